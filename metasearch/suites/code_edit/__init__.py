"""``code-edit``: fix one bug in a tiny Python repository; graded by tests the agent never sees.

Each task is a directory under ``repos/<name>/``: the visible source with exactly one bug, ``ISSUE.md``
describing the symptom, sometimes a visible ``tests/`` folder, and ``hidden_tests/`` which only the grader
mounts. ``prepare`` copies the visible part to ``/task/repo`` as a fresh git repository (one commit), so
``git diff`` yields the artifact: a unified diff in ``output/patch.diff`` with paths relative to the
repository root. The grader (``grade.py``) applies it to a pristine copy and runs the hidden tests.

Host side: ``CodeEditSuite`` here (a ``HiddenTestSuite``: the shared listing, preparing and grading flow).
Grader side, mounted read-only into each grading run: ``grade.py`` and the one task's ``repos/<name>/``.

Score: fraction of the expected hidden tests (collected on the pristine repository) that both grading
harnesses report passed; metric ``resolved`` is all-or-nothing. A patch that touches any test file is
refused with flag ``touched_tests``; one whose added code the tamper scan flags, or whose run forges,
hides or disturbs results, scores 0 with flag ``tamper_suspect`` or ``inconsistent_results`` (see
``grade.py`` and ``testrun/verdict.py``). Subsets: ``all`` and ``smoke`` (two tasks).

Packaging note: ``ISSUE.md`` ships only from a source checkout until ``**/*.md`` is package data.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from metasearch.errors import InfrastructureError
from metasearch.sandboxes.protocol import Mount, Sandbox
from metasearch.suites.contract import Judged
from metasearch.suites.grading import TESTRUN_MOUNT, run_budget
from metasearch.suites.hidden_tests import ARTIFACT_MOUNT, HiddenTestSuite

GRADER_DIR = Path(__file__).resolve().parent
REPOS_DIR = GRADER_DIR / "repos"
HIDDEN = "hidden_tests"
SMOKE = ("intervals", "textstats")
SUBSETS = {"smoke": SMOKE}  # besides "all"
DESCRIPTION = (
    "Bug fixing in small Python repositories. /task/repo is a git repository holding the code and, in "
    "ISSUE.md, a description of one bug. Fix the bug in the source (never in tests: patches touching test "
    "files score 0) and write the change as a unified diff to output/patch.diff, e.g. "
    "`cd /task/repo && git diff > /task/output/patch.diff`. Scored by hidden tests: the fraction that pass."
)
# Fixed identity and dates so that the prepared repository is the same commit on every machine.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "metasearch",
    "GIT_AUTHOR_EMAIL": "metasearch@localhost",
    "GIT_COMMITTER_NAME": "metasearch",
    "GIT_COMMITTER_EMAIL": "metasearch@localhost",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
}


class CodeEditSuite(HiddenTestSuite[str]):
    """The repositories under ``repos/``; an item is a repository's name."""

    name = "code-edit"
    description = DESCRIPTION
    artifact_path = "output"
    needs_docker = False
    needs_gpu = False
    items_noun = "repositories"
    named_subsets = SUBSETS

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid")
        subset: str = "all"
        grade_timeout_s: float = Field(60.0, gt=0)
        solve_timeout_s: float = Field(600.0, gt=0)

    config: Config

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or CodeEditSuite.Config()
        self.check_subset(self.config.subset)
        names = sorted(p.name for p in REPOS_DIR.iterdir() if (p / "ISSUE.md").is_file())
        # Every repository stays gradable whatever the subset: the held-out gate grades tasks("all").
        super().__init__({f"code-edit/{name}": name for name in names}, subset=self.config.subset)

    def statement(self, item: str) -> str:
        issue = (REPOS_DIR / item / "ISSUE.md").read_text()
        return (
            f"# code-edit/{item}\n\n{DESCRIPTION}\n\n## The issue\n\n{issue.strip()}\n\n"
            "Do not edit tests: add or change source files only.\n"
        )

    def write_visible(self, item: str, dest: Path) -> None:
        """``repo/``: the repository without its hidden tests, as a one-commit git repository."""
        task_id, repo = f"code-edit/{item}", dest / "repo"
        shutil.copytree(
            REPOS_DIR / item,
            repo,
            ignore=shutil.ignore_patterns(HIDDEN, "__pycache__", "*.pyc", ".pytest_cache"),
        )
        for command in (
            ["git", "init", "-q", "-b", "main"],
            ["git", "add", "-A"],
            ["git", "commit", "-q", "-m", f"{item}: starting point"],
        ):
            try:
                done = subprocess.run(command, cwd=repo, env=GIT_ENV, capture_output=True, text=True)
            except OSError as exc:
                raise InfrastructureError(
                    f"code-edit: preparing {task_id} needs git: {exc}", retryable=False
                ) from exc
            if done.returncode != 0:
                raise InfrastructureError(
                    f"code-edit: preparing {task_id}: {' '.join(command)}: {done.stderr}"
                )

    def grader_files(self, task_id: str) -> dict[str, str]:
        hidden = REPOS_DIR / self.item(task_id) / HIDDEN
        return {f"{HIDDEN}/{p.relative_to(hidden)}": p.read_text() for p in sorted(hidden.rglob("*.py"))}

    def judge(self, item: str, artifact_dir: Path, sandbox: Sandbox) -> Judged:
        command = ["python3", "/grader/grade.py", f"/grader/repos/{item}", f"{ARTIFACT_MOUNT}/patch.diff"]
        command += [TESTRUN_MOUNT, repr(run_budget(self.config.grade_timeout_s, 3))]  # collect, two harnesses
        # The grader script and this task's repository only: never another task's hidden tests.
        grader_side = [
            Mount(GRADER_DIR / "grade.py", "/grader/grade.py"),
            Mount(REPOS_DIR / item, f"/grader/repos/{item}"),
        ]
        what = f"code-edit grader on {item}"
        return self.run_test_grader(sandbox, command, grader_side, artifact_dir, what=what, workdir="/grader")
