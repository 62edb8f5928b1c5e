"""The base of the test-based suites (``HiddenTestSuite``): what code-edit, polyglot and SWE-bench share."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import BaseModel

from metasearch.errors import ConfigError
from metasearch.registry import SUITES
from metasearch.sandboxes.local import LocalSandbox
from metasearch.sandboxes.protocol import ExecResult, Mount, RunSpec, Sandbox
from metasearch.suites.code_edit import CodeEditSuite
from metasearch.suites.contract import Judged
from metasearch.suites.grading import TESTRUN_MOUNT
from metasearch.suites.hidden_tests import ARTIFACT_MOUNT, HiddenTestSuite
from metasearch.suites.polyglot import PolyglotSuite
from metasearch.suites.swebench import SWEBenchSuite

GRADER = """\
import json, pathlib, sys
sys.path.insert(0, str(pathlib.Path(sys.argv[3]).parent))
import testrun  # the shared grader side is mounted beside this task's own
answer = pathlib.Path(sys.argv[1])
right = answer.is_file() and answer.read_text().strip() == pathlib.Path(sys.argv[2]).read_text().strip()
print(json.dumps({"score": 1.0 if right else 0.0, "error": None if right else "wrong answer"}))
"""


ANSWERS = {"a": "1", "b": "42"}
SHELF_SUBSETS = {"smoke": ("b",)}


class Shelf(HiddenTestSuite[str]):
    """A test-based suite in a few lines: an item is a question's key; its grader compares the artifact with
    the hidden answer."""

    name = "shelf"
    description = "write the answer to output/answer.txt"
    items_noun = "shelved questions"
    named_subsets = SHELF_SUBSETS

    class Config(BaseModel):
        grade_timeout_s: float = 30.0
        solve_timeout_s: float = 5.0

    def __init__(self, hidden: Path) -> None:
        self.config = Shelf.Config()
        self.hidden = hidden  # the grader side: one folder per task, with its answer and the grader
        for key, answer in ANSWERS.items():
            (hidden / key).mkdir(parents=True)
            (hidden / key / "answer.txt").write_text(answer)
            (hidden / key / "grader.py").write_text(GRADER)
        super().__init__({f"shelf/{key}": key for key in ANSWERS})

    def statement(self, item: str) -> str:
        return f"# question {item}\n"

    def write_visible(self, item: str, dest: Path) -> None:
        (dest / "hint.txt").write_text(f"{len(ANSWERS[item])} digits\n")

    def judge(self, item: str, artifact_dir: Path, sandbox: Sandbox) -> Judged:
        command = [
            "python3",
            "/grader/grader.py",
            f"{ARTIFACT_MOUNT}/answer.txt",
            "/grader/answer.txt",
            TESTRUN_MOUNT,
        ]
        return self.run_test_grader(
            sandbox,
            command,
            [Mount(self.hidden / item, "/grader")],
            artifact_dir,
            what="shelf",
            workdir="/grader",
        )


class RecordingSandbox(LocalSandbox):
    """The local sandbox, keeping each run's spec."""

    def __init__(self) -> None:
        super().__init__()
        self.specs: list[RunSpec] = []

    def run(self, spec: RunSpec) -> ExecResult:
        self.specs.append(spec)
        return super().run(spec)


def test_the_three_test_based_suites_are_hidden_test_suites() -> None:
    for name in ("code-edit", "polyglot", "swebench"):
        assert issubclass(SUITES.resolve(name), HiddenTestSuite), name


def test_the_base_lists_prepares_and_grades(tmp_path: Path) -> None:
    suite = Shelf(tmp_path / "hidden")
    listed = [(t.id, t.subsets, t.timeout_s, t.statement) for t in suite.tasks()]
    assert listed == [
        ("shelf/a", ("all",), 5.0, "# question a\n"),
        ("shelf/b", ("all", "smoke"), 5.0, "# question b\n"),
    ]
    assert [t.id for t in suite.tasks("smoke")] == ["shelf/b"]

    task = tmp_path / "task"
    suite.prepare("shelf/b", task)
    assert sorted(p.name for p in task.iterdir()) == ["TASK.md", "hint.txt", "output"]
    assert (task / "TASK.md").read_text() == suite.tasks()[1].statement

    sandbox = RecordingSandbox()
    wrong = suite.grade("shelf/b", task / "output", sandbox)
    assert (wrong.score, wrong.error) == (0.0, "wrong answer")
    (task / "output" / "answer.txt").write_text("42\n")
    assert suite.grade("shelf/b", task / "output", sandbox).score == 1.0
    targets = [m.target for m in sandbox.specs[-1].mounts]
    assert targets == ["/grader", TESTRUN_MOUNT, ARTIFACT_MOUNT]
    assert all(m.read_only for m in sandbox.specs[-1].mounts)
    assert sandbox.specs[-1].limits.timeout_s == 30.0


def test_an_unknown_task_or_subset_is_named() -> None:
    # Once, through one subclass: every suite's prepare, grade and grader_files look tasks up the same way.
    suite = CodeEditSuite()
    with pytest.raises(ConfigError, match=r"code-edit: unknown task 'code-edit/nope' \(not among the repo"):
        suite.grade("code-edit/nope", Path("/nonexistent"), LocalSandbox())
    with pytest.raises(ConfigError, match="unknown task 'code-edit/nope'"):
        suite.grader_files("code-edit/nope")
    with pytest.raises(ConfigError, match=r"code-edit: unknown subset 'nope'; allowed: all, smoke"):
        suite.tasks("nope")
    with pytest.raises(ConfigError, match=r"suite\.subset: unknown subset 'nope'; allowed: all, smoke"):
        CodeEditSuite(CodeEditSuite.Config(subset="nope"))


@pytest.mark.parametrize(
    ("build", "key"),
    [
        (lambda path: PolyglotSuite(PolyglotSuite.Config(path=path)), "suite.path"),
        (lambda path: SWEBenchSuite(SWEBenchSuite.Config(instances=path)), "suite.instances"),
    ],
)
def test_a_missing_checkout_names_its_key(
    build: Callable[[str | None], object], key: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=rf"^{key}: required; set it to a local "):
        build(None)
    with pytest.raises(ConfigError, match=rf"^{key}: {tmp_path}/nope does not exist"):
        build(str(tmp_path / "nope"))
