"""The Suite interface: tasks, their visible files, and grading that the agent never sees."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from metasearch.sandboxes.protocol import Sandbox


@dataclass(frozen=True)
class Task:
    """One benchmark task. ``id`` is stable across runs and machines."""

    id: str
    suite: str
    statement: str
    subsets: tuple[str, ...] = ()
    needs_gpu: bool = False
    timeout_s: float = 600.0


@dataclass(frozen=True)
class TaskResult:
    """A graded artifact: ``score`` in [0, 1], metrics and integrity flags beside it.

    ``error`` holds the reason when the candidate failed (crash, no artifact, wrong answer).
    """

    score: float
    metrics: Mapping[str, float] = field(default_factory=dict)
    flags: tuple[str, ...] = ()
    error: str | None = None


@runtime_checkable
class Suite(Protocol):
    """A benchmark.

    The runner calls ``prepare`` to write the *visible* files of a task into a fresh directory that the
    agent's sandbox mounts at ``/task`` (writable). The agent writes its artifact under
    ``/task/<artifact_path>``. The runner then calls ``grade`` with that artifact directory and a
    sandbox; ``grade`` mounts the hidden files itself into a *fresh* sandbox run. ``grade`` must never
    raise for candidate misbehaviour: it returns a TaskResult with ``error`` set.
    """

    name: str
    description: str
    artifact_path: str
    needs_docker: bool
    needs_gpu: bool

    def tasks(self, subset: str | None = None) -> Sequence[Task]: ...

    def prepare(self, task_id: str, dest: Path) -> None: ...

    def grade(self, task_id: str, artifact_dir: Path, sandbox: Sandbox) -> TaskResult: ...


def grader_files(suite: object, task_id: str) -> dict[str, str]:
    """The hidden files that grade ``task_id`` (path -> text), for meta-agents only when a config option
    explicitly allows it (``proposer.allow_grader_files``). Optional: suites without ``grader_files`` show
    nothing."""
    method = getattr(suite, "grader_files", None)
    return dict(method(task_id)) if callable(method) else {}
