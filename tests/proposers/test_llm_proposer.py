"""The ``llm`` meta-agent in a real study (git archive, local sandbox, training suite) against the scripted
OpenAI-compatible server: one real edit becomes a child commit; garbage, malformed diffs, protected edits
and oversized output are each rejected with a reason while the search goes on."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import yaml

from metasearch import launch
from metasearch.config import load_config
from metasearch.llm.scripted import ScriptedLLM

SOLVE = """import json, sys
from pathlib import Path
import numpy as np


def main(task):
    info = json.loads((task / "task.json").read_text())
    np.save(task / "output" / "predictions.npy", np.zeros(info["n_test"], dtype=np.int64))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
"""
TEST = """import unittest

class T(unittest.TestCase):
    def test_imports(self):
        import solve  # noqa: F401
"""
MANIFEST = """name = "tiny"
protected = ["tests/**"]
[entry]
solve = ["python3", "solve.py", "{task_dir}"]
smoke = ["python3", "-m", "unittest", "discover", "-s", "tests", "-q"]
"""
GOOD = """Predict the majority class instead of zero.

The parent always predicts class 0; the majority class of train_y is a better constant.

```diff
diff --git a/solve.py b/solve.py
--- a/solve.py
+++ b/solve.py
@@ -5,5 +5,6 @@ import numpy as np
<blank>
 def main(task):
     info = json.loads((task / "task.json").read_text())
-    np.save(task / "output" / "predictions.npy", np.zeros(info["n_test"], dtype=np.int64))
+    majority = int(np.bincount(np.load(task / "train_y.npy").astype(np.int64)).argmax())
+    np.save(task / "output" / "predictions.npy", np.full(info["n_test"], majority, dtype=np.int64))
<blank>
```
""".replace("<blank>\n", " \n")  # a diff's blank context line is a single space
GARBAGE = "I am not sure what to do. Maybe try harder next time?"
MALFORMED = "Fix it.\n\n```diff\ndiff --git a/solve.py b/solve.py\n--- a/solve.py\n+++ b/solve.py\n@@ -40,2 +40,2 @@\n-nothing here\n+at all\n```\n"
PROTECTED = (
    "Skip the tests.\n\n```diff\ndiff --git a/tests/test_more.py b/tests/test_more.py\nnew file mode 100644\n"
    "--- /dev/null\n+++ b/tests/test_more.py\n@@ -0,0 +1 @@\n+pass\n```\n"
)
BIG = "".join(f"+# line {i} of filler that makes this change far too large\n" for i in range(400))
OVERSIZED = (
    "Add notes.\n\n```diff\ndiff --git a/notes.py b/notes.py\nnew file mode 100644\n--- /dev/null\n"
    f"+++ b/notes.py\n@@ -0,0 +1,400 @@\n{BIG}```\n"
)
REPLIES = [GOOD, GARBAGE, MALFORMED, PROTECTED, OVERSIZED]


def write_seed(root: Path) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "agent.toml").write_text(MANIFEST)
    (root / "solve.py").write_text(SOLVE)
    (root / "tests" / "test_solve.py").write_text(TEST)
    return root


def test_the_meta_agent_edits_and_bad_proposals_are_rejected_with_reasons(tmp_path: Path) -> None:
    seed = write_seed(tmp_path / "seed")
    lock = threading.Lock()
    prompts: list[str] = []

    def script(body: dict[str, Any]) -> str:
        with lock:
            prompts.append(body["messages"][-1]["content"])
            return (
                REPLIES[min(len(prompts) - 1, len(REPLIES) - 1)] if len(prompts) <= len(REPLIES) else GARBAGE
            )

    with ScriptedLLM(script) as llm:
        config = tmp_path / "study.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "study": {"name": "meta", "seeds": [str(seed)], "workers": 1},
                    "budget": {"evaluations": 12, "expansions": 5, "wall_time_s": 300},
                    "scheduler": {"name": "greedy"},
                    "proposer": {"name": "llm", "edit_format": "diff", "retries": 0, "reply_tokens": 8000},
                    "suite": {"name": "training", "subset": "smoke", "time_budget_s": 2},
                    "sandbox": {"name": "local"},
                    "llm": {"base_url": llm.base_url, "api_key_env": None},
                    "gate": {"max_diff_bytes": 4000},
                    "tracking": {"mlflow": {"enabled": False}},
                }
            )
        )
        launched = launch.create(load_config(config), tmp_path / "archive" / "meta")
        try:
            result = launched.study.run(launched.runner, workers=1)
        finally:
            launched.close()
    index = launched.archive.index
    assert "exhausted" in str(result) or index.finished, result
    children = [a for a in index.agents.values() if a.parent_id is not None]
    assert len(children) == 1, [f["reason"] for f in index.failed_expansions]
    [child] = children
    diff = (Path(index.agents[child.id].meta["transcript_path"]).parent / "proposal.diff").read_text()
    assert "+    majority = int(np.bincount(" in diff and diff.startswith("diff --git a/solve.py b/solve.py")
    assert child.meta["summary"] == "Predict the majority class instead of zero."
    assert child.meta["proposer"] == "llm" and child.meta["tokens"] > 0
    # The child really is a commit holding the edit.
    with launched.archive.__class__.open(tmp_path / "archive" / "meta", readonly=True) as archive:
        with archive.checkout(child.id) as code:
            assert "majority" in (code / "solve.py").read_text()
    reasons = [f["reason"] for f in index.failed_expansions]
    assert len(reasons) == 4, reasons
    assert any("no edit found" in r for r in reasons), reasons
    assert any("solve.py: the SEARCH lines are not in the file" in r for r in reasons), reasons
    assert any("protected" in r and "tests/test_more.py" in r for r in reasons), reasons
    assert any("too large" in r for r in reasons), reasons
    kinds = sorted(f["kind"] for f in index.failed_expansions)
    assert kinds == ["apply_failed", "gate", "gate", "no_edit"], kinds
    # Each rejected proposal keeps its diff (when there was one) and the transcript in the job's logs.
    logs = launched.archive.root / "logs"
    assert sum(1 for _ in logs.glob("*/transcript.jsonl")) == 5
    # The meta-agent saw the parent's code and how it scored.
    assert "solve.py" in prompts[0] and "training/" in prompts[0]
    # The child was evaluated and beat the all-zero seed on the balanced tasks.
    scores = {a: [e.score for e in index.evaluations.values() if e.agent_id == a] for a in index.agents}
    assert scores[child.id], "the child was evaluated"
    assert index.tokens > 0  # metered calls were journaled as usage
    json.dumps(reasons)


def test_the_tool_loop_edits_the_workspace_in_a_sandbox_session(tmp_path: Path) -> None:
    seed = write_seed(tmp_path / "seed")
    steps = [
        "Look at the code first.\n```bash\ncat solve.py && ls tests\n```",
        "Swap zeros for ones.\n```bash\nsed -i 's/np.zeros(/np.ones(/' solve.py && python3 -m unittest discover -s tests -q\n```",
        "SUBMIT\nPredict class one instead of zero",
    ]
    observations: list[str] = []

    def script(body: dict[str, Any]) -> str:
        messages = body["messages"]
        if messages[-1]["role"] == "user" and len(messages) > 2:
            observations.append(messages[-1]["content"])
        return steps[min(sum(m["role"] == "assistant" for m in messages), len(steps) - 1)]

    with ScriptedLLM(script) as llm:
        config = tmp_path / "study.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "study": {"name": "tools", "seeds": [str(seed)], "workers": 1},
                    "budget": {"evaluations": 4, "expansions": 1, "wall_time_s": 300},
                    "scheduler": {"name": "greedy"},
                    "proposer": {"name": "llm", "mode": "tools", "max_steps": 5},
                    "suite": {"name": "training", "subset": "smoke", "time_budget_s": 2},
                    "sandbox": {"name": "local"},
                    "llm": {"base_url": llm.base_url, "api_key_env": None},
                    "tracking": {"mlflow": {"enabled": False}},
                }
            )
        )
        launched = launch.create(load_config(config), tmp_path / "archive" / "tools")
        try:
            launched.study.run(launched.runner, workers=1)
        finally:
            launched.close()
    index = launched.archive.index
    [child] = [a for a in index.agents.values() if a.parent_id is not None]
    assert child.meta["summary"] == "Predict class one instead of zero"
    assert "def main(task):" in observations[0] and "test_solve.py" in observations[0]
    assert observations[1].startswith("exit code 0")
    diff = (Path(child.meta["transcript_path"]).parent / "proposal.diff").read_text()
    assert '-    np.save(task / "output" / "predictions.npy", np.zeros(' in diff
    assert '+    np.save(task / "output" / "predictions.npy", np.ones(' in diff


def test_grader_files_reach_the_prompt_only_when_allowed(tmp_path: Path) -> None:
    from metasearch.proposers.base import ProposalContext
    from metasearch.proposers.llm import LLMProposer
    from metasearch.sandboxes.local import LocalSandbox
    from metasearch.suites.code_edit import CodeEditSuite
    from metasearch.types import Agent, Evaluation

    seed = write_seed(tmp_path / "seed")
    parent = Agent("a00000", None, "0" * 40, "agents/a00000", 0.0)
    context = ProposalContext(
        job_id="job-1",
        study_dir=tmp_path,
        log_dir=tmp_path,
        sandbox=LocalSandbox(),
        suite_description="bugs",
        parent_evaluations=[
            Evaluation("e1", parent.id, "code-edit/textstats", 0.2, error="2 of 6 hidden tests pass")
        ],
        extra={"grader_files": CodeEditSuite().grader_files},
    )
    hidden_test = "def test_"
    for allowed in (False, True):
        proposer = LLMProposer(
            LLMProposer.Config(allow_grader_files=allowed), study_dir=tmp_path, model=object()
        )  # type: ignore[arg-type]
        prompt = proposer.prompt(parent, seed, context)
        assert ("hidden_tests/" in prompt and hidden_test in prompt) is allowed, allowed
        assert ("Grader files" in prompt) is allowed
