"""The Suite interface: tasks, their visible files, and grading that the agent never sees."""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

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


Fact = int | float | str
"""One thing a suite learned about a task (``Suite.learn``): plain data, so the journal can hold it."""


class Suite(ABC):
    """A benchmark: the base class of every suite, a user's own (registered as ``module:Class``) included.

    The runner calls ``prepare`` to write the *visible* files of a task into a fresh directory that the
    agent's sandbox mounts at ``/task`` (writable). The agent writes its artifact under
    ``/task/<artifact_path>``. The runner then calls ``grade`` with that artifact directory and a
    sandbox; ``grade`` mounts the hidden files itself into a *fresh* sandbox run. ``grade`` must never
    raise for candidate misbehaviour: it returns a TaskResult with ``error`` set.

    A suite sets ``name`` and ``description`` and implements ``tasks``, ``prepare`` and ``grade``. The rest
    has a default, overridden where the suite has something to say: the class attributes ``artifact_path``
    (``"output"``), ``needs_docker`` and ``needs_gpu`` (False), ``content_hash`` (None: no digest of loaded
    data to record), and the methods ``needs``, ``plan_note``, ``grader_files``, ``learned`` and ``learn``.
    """

    name: str
    description: str
    artifact_path: str = "output"
    needs_docker: bool = False
    needs_gpu: bool = False
    content_hash: str | None = None
    """A digest of the data the suite loaded (an adapter of a user's checkout), recorded in provenance."""

    @abstractmethod
    def tasks(self, subset: str | None = None) -> Sequence[Task]: ...

    @abstractmethod
    def prepare(self, task_id: str, dest: Path) -> None: ...

    @abstractmethod
    def grade(self, task_id: str, artifact_dir: Path, sandbox: Sandbox) -> TaskResult: ...

    def needs(self) -> None:
        """Raises ConfigError, saying what is missing, when this machine cannot run the suite (a harness
        package, a GPU, a Docker engine). Called before a study starts and by ``doctor``; by default nothing
        is missing."""
        return None

    def plan_note(self) -> str:
        """One line ``--dry-run`` adds to the suite's row (where grading runs, what is left out); default
        none."""
        return ""

    def grader_files(self, task_id: str) -> dict[str, str]:
        """The hidden files that grade ``task_id`` (path -> text), for meta-agents only when a config option
        explicitly allows it (``proposer.allow_grader_files``), and hashed into provenance. Default none."""
        return {}

    def learned(self) -> Mapping[str, Mapping[str, Fact]]:
        """What grading learned about each task (task id -> facts), e.g. kernelbench's ``grading_mb``: the
        memory a problem's grading needed. The runner journals what is new after each grading and a study
        hands the journal's facts back (``learn``) before it grades, so a resumed study and every Ray
        worker start where the last grading ended."""
        return dict(self._facts())

    def learn(self, task_id: str, facts: Mapping[str, Fact]) -> None:
        """Remember ``facts`` about ``task_id`` (a later value of a fact replaces the earlier). Called by the
        suite's own grading and by the study with what the journal holds; the suite reads them back with
        ``learned``. TypeError for a fact that is not an int, float or str."""
        for key, value in facts.items():
            if (
                not isinstance(key, str)
                or isinstance(value, bool)
                or not isinstance(value, int | float | str)
            ):
                raise TypeError(
                    f"{self.name}: fact {key!r} = {value!r} about {task_id}: not an int, float or str"
                )
        known = self._facts()
        known[task_id] = {**known.get(task_id, {}), **facts}  # a new mapping: readers keep a whole one

    def _facts(self) -> dict[str, dict[str, Fact]]:
        # Made on first use: a suite's __init__ need not call ours.
        facts: dict[str, dict[str, Fact]] = vars(self).setdefault("_learned_facts", {})
        return facts


def hash_files(root: Path, files: Iterable[Path], extra: str = "") -> str:
    """sha256 over (relative path, content digest) of ``files``, sorted: order and location independent;
    ``extra`` (how the files are used, e.g. a scale) is hashed too when given."""
    digest = hashlib.sha256()
    if extra:
        digest.update(b"extra\0" + extra.encode() + b"\n")
    for path in sorted(files):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).hexdigest().encode() + b"\n")
    return digest.hexdigest()
