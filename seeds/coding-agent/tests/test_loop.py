import io
import tempfile
import unittest
from pathlib import Path

from coder.loop import episode
from coder.solve import read_statement


class LoopTest(unittest.TestCase):
    def test_runs_commands_until_submit(self):
        replies = iter(["Look first.\n```bash\necho hi > out.txt\n```", "SUBMIT\nwrote out.txt"])
        seen, caps = [], []

        def chat(messages, temperature=0.0, max_tokens=None):
            seen.append(messages[-1]["content"])
            caps.append(max_tokens)
            return next(replies)

        knobs = {"max_steps": 5, "max_reply_tokens": 300}
        with tempfile.TemporaryDirectory() as tmp:
            summary = episode("task", Path(tmp), knobs, chat, log=io.StringIO())
            self.assertEqual((Path(tmp) / "out.txt").read_text(), "hi\n")
        self.assertEqual(summary, "wrote out.txt")
        self.assertIn("exit code 0", seen[-1])
        self.assertEqual(caps, [300, 300])  # every reply is capped

    def test_format_errors_are_reported_and_steps_bounded(self):
        with tempfile.TemporaryDirectory() as tmp:
            summary = episode(
                "task", Path(tmp), {"max_steps": 2}, lambda m, **_: "no block", log=io.StringIO()
            )
        self.assertIsNone(summary)

    def test_gives_up_after_replies_in_a_row_without_a_command(self):
        replies = iter(["no block", "```bash\necho ok\n```", "still none", "none", "none", "SUBMIT\nx"])
        calls = []

        def chat(messages, **_):
            calls.append(1)
            return next(replies)

        with tempfile.TemporaryDirectory() as tmp:
            knobs = {"max_steps": 10, "max_unusable_replies": 3}
            summary = episode("task", Path(tmp), knobs, chat, log=io.StringIO())
        self.assertIsNone(summary)
        self.assertEqual(len(calls), 5)  # a command in between starts the count again

    def test_statement_files(self):
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "TASK.md").write_text("do it")
            self.assertEqual(read_statement(Path(tmp)), "do it")


if __name__ == "__main__":
    unittest.main()
