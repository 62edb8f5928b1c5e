"""``HiddenTestSuite``: the base of the suites graded by tests the agent never sees (code-edit, polyglot,
SWE-bench).

Each such suite has two sides, kept apart. The *host side* is the suite class, in the study's process: it
loads the tasks (a built-in folder or a user's checkout), writes what the agent may see and starts each
grading. The *grader side* is what a grading run mounts read-only: the task's hidden tests and the suite's
grader script (``grader_side`` of ``run_test_grader``), the shared ``testrun`` package at
``grading.TESTRUN_MOUNT``, and the candidate's artifact at ``ARTIFACT_MOUNT``; it never imports the host
side. SWE-bench's official harness runs on the host and starts containers of its own, so that suite has no
grader side of ours.

The base owns the flow the three share; a subclass fills in what differs:

- the catalogue: ``items`` maps each task id to what the suite loaded for it (a repository's name, an
  ``Exercise``, an instance record); ``item`` turns an id that is not there into a ``ConfigError``;
- named subsets besides ``all`` (``named_subsets``: name -> member keys, ``subset_key`` of a task),
  checked when the config is read (``check_subset``) and when ``tasks`` is asked for one;
- ``tasks``: one ``Task`` per item, with its ``statement`` and ``config.solve_timeout_s``;
- ``prepare``: the visible files (the subclass's ``write_visible``), ``TASK.md`` (the same statement) and
  the empty artifact folder;
- ``grade``: the subclass's ``judge`` returns the grader contract's verdict or candidate failure (a grader
  fault has become ``TaskUnfit`` on the way, ``grading.settle``) and the base makes it the ``TaskResult``.

A subclass sets ``name``, ``description``, ``items_noun`` and ``named_subsets``, calls ``__init__`` with its
items once it has loaded them, and implements ``statement``, ``write_visible`` and ``judge``.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import ClassVar, Generic, Protocol, TypeVar

from metasearch.errors import ConfigError
from metasearch.sandboxes.protocol import Mount, Sandbox
from metasearch.suites.contract import Judged
from metasearch.suites.grading import run_grader, testrun_mount
from metasearch.suites.protocol import Suite, Task, TaskResult

Item = TypeVar("Item")
ARTIFACT_MOUNT = "/artifact"


class Timeouts(Protocol):
    """The options every test-based suite's ``Config`` has (each with its own defaults)."""

    @property
    def grade_timeout_s(self) -> float: ...

    @property
    def solve_timeout_s(self) -> float: ...


class HiddenTestSuite(Suite, Generic[Item]):
    """A suite whose tasks are graded by hidden tests; see the module docstring for who owns what.

    Built by the subclass's ``__init__(config)`` (the registry's ``cls(config)``), which validates its own
    options, loads its items and then calls ``HiddenTestSuite.__init__``."""

    items_noun: ClassVar[str]
    """What the items are, for the unknown-task error: ``not among the {items_noun}``."""
    named_subsets: ClassVar[Mapping[str, Collection[str]]] = {}
    """Subsets besides ``all``: name -> the ``subset_key`` of each member."""
    config: Timeouts

    def __init__(self, items: Mapping[str, Item], *, subset: str = "all") -> None:
        """``items``: task id -> item, in task order; ``subset``: what ``tasks()`` lists when asked for none."""
        self.items = items
        self.default_subset = subset

    @abstractmethod
    def statement(self, item: Item) -> str:
        """The task's statement: ``Task.statement`` and the agent's ``TASK.md``."""

    @abstractmethod
    def write_visible(self, item: Item, dest: Path) -> None:
        """Write the files the agent may see under ``dest`` (which exists); never a hidden test."""

    @abstractmethod
    def judge(self, item: Item, artifact_dir: Path, sandbox: Sandbox) -> Judged:
        """Grade the artifact: a verdict or a candidate failure. A grader fault raises ``TaskUnfit`` (as
        ``run_test_grader`` and ``grading.settle`` do); a candidate's misbehaviour never raises."""

    def subset_key(self, task_id: str, item: Item) -> str:
        """The name ``named_subsets`` lists the task under; by default its id without the suite's prefix."""
        return task_id.split("/", 1)[1]

    def task_subsets(self, task_id: str, item: Item) -> tuple[str, ...]:
        """``Task.subsets``: ``all`` and every named subset that lists the task."""
        key = self.subset_key(task_id, item)
        return ("all", *(name for name, keys in self.named_subsets.items() if key in keys))

    def check_subset(self, subset: str, where: str = "suite.subset") -> None:
        """``ConfigError``, naming ``where``, for a subset that is neither ``all`` nor a named one."""
        if subset != "all" and subset not in self.named_subsets:
            allowed = ", ".join(["all", *self.named_subsets])
            raise ConfigError(f"{where}: unknown subset {subset!r}; allowed: {allowed}")

    def item(self, task_id: str) -> Item:
        """The item of ``task_id``; ``ConfigError`` naming the id when the suite has no such task."""
        if task_id not in self.items:
            raise ConfigError(f"{self.name}: unknown task {task_id!r} (not among the {self.items_noun})")
        return self.items[task_id]

    def tasks(self, subset: str | None = None) -> Sequence[Task]:
        wanted = subset or self.default_subset
        self.check_subset(wanted, self.name)
        members = self.named_subsets.get(wanted, ())
        return [
            Task(
                id=task_id,
                suite=self.name,
                statement=self.statement(item),
                subsets=self.task_subsets(task_id, item),
                timeout_s=self.config.solve_timeout_s,
            )
            for task_id, item in self.items.items()
            if wanted == "all" or self.subset_key(task_id, item) in members
        ]

    def prepare(self, task_id: str, dest: Path) -> None:
        """The visible files (``write_visible``), ``TASK.md`` and an empty artifact folder under ``dest``."""
        item = self.item(task_id)
        dest.mkdir(parents=True, exist_ok=True)
        self.write_visible(item, dest)
        (dest / "TASK.md").write_text(self.statement(item))
        (dest / self.artifact_path).mkdir(exist_ok=True)

    def grade(self, task_id: str, artifact_dir: Path, sandbox: Sandbox) -> TaskResult:
        return self.judge(self.item(task_id), artifact_dir, sandbox).task_result()

    def run_test_grader(
        self,
        sandbox: Sandbox,
        command: Sequence[str],
        grader_side: Sequence[Mount],
        artifact_dir: Path,
        *,
        what: str,
        workdir: str,
        memory_mb: int = 2048,
        pids: int | None = None,
        runs_candidate: bool = True,
        hint: str = "",
    ) -> Judged:
        """Run a grader in a fresh sandbox run (``grading.run_grader``, within ``config.grade_timeout_s``)
        with ``grader_side`` (this task's hidden files and grader script, read-only), the shared
        ``testrun`` package and ``artifact_dir`` at ``ARTIFACT_MOUNT`` (made when missing) mounted."""
        artifact_dir.mkdir(parents=True, exist_ok=True)
        mounts = [*grader_side, testrun_mount(), Mount(artifact_dir, ARTIFACT_MOUNT)]
        return run_grader(
            sandbox,
            command,
            mounts,
            timeout_s=self.config.grade_timeout_s,
            what=what,
            memory_mb=memory_mb,
            pids=pids,
            workdir=workdir,
            runs_candidate=runs_candidate,
            hint=hint,
        )
