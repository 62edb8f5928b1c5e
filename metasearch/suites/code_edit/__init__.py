"""``code-edit``: fix one bug in a tiny Python repository; graded by tests the agent never sees.

Each task is a directory under ``repos/<name>/``: the visible source with exactly one bug, ``ISSUE.md``
describing the symptom, sometimes a visible ``tests/`` folder, and ``hidden_tests/`` which only the grader
mounts. ``prepare`` copies the visible part to ``/task/repo`` as a fresh git repository (one commit), so
``git diff`` yields the artifact: a unified diff in ``output/patch.diff`` with paths relative to the
repository root. The grader (``grade.py``) applies it to a pristine copy and runs the hidden tests.

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
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from metasearch.errors import ConfigError, InfrastructureError
from metasearch.sandboxes.protocol import Mount, Sandbox
from metasearch.suites.grading import TESTRUN_MOUNT, grade, run_budget, testrun_mount
from metasearch.suites.protocol import Suite, Task, TaskResult

GRADER_DIR = Path(__file__).resolve().parent
REPOS_DIR = GRADER_DIR / "repos"
HIDDEN = "hidden_tests"
SMOKE = ("intervals", "textstats")
SUBSETS = ("all", "smoke")
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


class CodeEditSuite(Suite):
    name = "code-edit"
    description = DESCRIPTION
    artifact_path = "output"
    needs_docker = False
    needs_gpu = False

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid")
        subset: str = "all"
        grade_timeout_s: float = Field(60.0, gt=0)
        solve_timeout_s: float = Field(600.0, gt=0)

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or CodeEditSuite.Config()
        _check_subset(self.config.subset, "suite.subset")

    def tasks(self, subset: str | None = None) -> Sequence[Task]:
        wanted = subset or self.config.subset
        _check_subset(wanted, "code-edit: subset")
        names = sorted(p.name for p in REPOS_DIR.iterdir() if (p / "ISSUE.md").is_file())
        return [
            Task(
                id=f"code-edit/{name}",
                suite=self.name,
                statement=_statement(name),
                subsets=("all", "smoke") if name in SMOKE else ("all",),
                timeout_s=self.config.solve_timeout_s,
            )
            for name in names
            if wanted == "all" or name in SMOKE
        ]

    def prepare(self, task_id: str, dest: Path) -> None:
        """Write ``TASK.md``, ``repo/`` (a one-commit git repository) and an empty ``output/``."""
        name = _name(task_id)
        repo = dest / "repo"
        shutil.copytree(
            REPOS_DIR / name,
            repo,
            ignore=shutil.ignore_patterns(HIDDEN, "__pycache__", "*.pyc", ".pytest_cache"),
        )
        (dest / "TASK.md").write_text(_statement(name))
        (dest / "output").mkdir(exist_ok=True)
        for command in (
            ["git", "init", "-q", "-b", "main"],
            ["git", "add", "-A"],
            ["git", "commit", "-q", "-m", f"{name}: starting point"],
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
        hidden = REPOS_DIR / _name(task_id) / HIDDEN
        return {f"{HIDDEN}/{p.relative_to(hidden)}": p.read_text() for p in sorted(hidden.rglob("*.py"))}

    def grade(self, task_id: str, artifact_dir: Path, sandbox: Sandbox) -> TaskResult:
        name = _name(task_id)
        artifact_dir.mkdir(parents=True, exist_ok=True)
        timeout = self.config.grade_timeout_s
        command = ["python3", "/grader/grade.py", f"/grader/repos/{name}", "/artifact/patch.diff"]
        command += [TESTRUN_MOUNT, repr(run_budget(timeout, 3))]  # collect, then two harnesses
        # The grader script and this task's repository only: never another task's hidden tests.
        mounts = [
            Mount(GRADER_DIR / "grade.py", "/grader/grade.py"),
            Mount(REPOS_DIR / name, f"/grader/repos/{name}"),
            testrun_mount(),
            Mount(artifact_dir, "/artifact"),
        ]
        return grade(
            sandbox, command, mounts, timeout_s=timeout, what=f"code-edit grader on {name}", workdir="/grader"
        )


def _statement(name: str) -> str:
    issue = (REPOS_DIR / name / "ISSUE.md").read_text()
    return (
        f"# code-edit/{name}\n\n{DESCRIPTION}\n\n## The issue\n\n{issue.strip()}\n\n"
        "Do not edit tests: add or change source files only.\n"
    )


def _check_subset(subset: str, where: str) -> None:
    if subset not in SUBSETS:
        raise ConfigError(f"{where}: unknown subset {subset!r}; allowed: {', '.join(SUBSETS)}")


def _name(task_id: str) -> str:
    name = task_id.split("/", 1)[-1]
    if (
        not task_id.startswith("code-edit/")
        or "/" in name
        or name.startswith(".")
        or not (REPOS_DIR / name / "ISSUE.md").is_file()
    ):
        raise ConfigError(f"code-edit: unknown task {task_id!r}")
    return name
