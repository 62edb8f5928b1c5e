"""Frozen records that cross module boundaries.

Records go out, never live objects: an ``Agent`` is a fact read from the archive, a ``Job`` is a
decision made by a scheduler, an ``Evaluation`` is the outcome of one (agent, task) pair.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal


def new_job_id() -> str:
    """A fresh, globally unique job id (sortable by creation time to the millisecond)."""
    return f"{int(time.time() * 1000):013x}-{os.urandom(5).hex()}"  # os.urandom: uuid4 is 10x slower


@dataclass(frozen=True)
class Agent:
    """One agent design: a commit on the write-once branch ``agents/<id>`` of the study archive."""

    id: str
    parent_id: str | None
    commit: str
    branch: str
    created_at: float
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_seed(self) -> bool:
        return self.parent_id is None


@dataclass(frozen=True)
class Evaluation:
    """The outcome of running one agent on one task.

    ``score`` lies in [0, 1] and counts fractionally as successes. A candidate failure (crash,
    timeout, wrong output) is an evaluation with ``error`` set and usually score 0; an
    infrastructure fault is never an Evaluation (the job is abandoned and re-queued instead).
    """

    job_id: str
    agent_id: str
    task_id: str
    score: float
    metrics: Mapping[str, float] = field(default_factory=dict)
    flags: tuple[str, ...] = ()
    error: str | None = None
    duration_s: float = 0.0
    log_path: str | None = None
    finished_at: float = 0.0
    conditions: str | None = None
    """Hash of the score-deciding conditions it ran under (see provenance.py); equal hashes compare."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.score <= 1.0:
            raise ValueError(f"score must lie in [0, 1], got {self.score!r}")


@dataclass(frozen=True)
class Proposal:
    """What a proposer returns: a change to the parent's workspace, plus how it was made."""

    diff: str
    summary: str
    rationale: str = ""
    tokens: int = 0
    cost_usd: float = 0.0
    transcript_path: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)  # stored on the child agent (e.g. an Optuna trial)


@dataclass(frozen=True)
class Expand:
    """Create a child of ``parent_id``."""

    parent_id: str
    job_id: str = field(default_factory=new_job_id)

    @property
    def kind(self) -> str:
        return "expand"


@dataclass(frozen=True)
class Evaluate:
    """Run ``agent_id`` on ``task_id`` and grade it."""

    agent_id: str
    task_id: str
    job_id: str = field(default_factory=new_job_id)

    @property
    def kind(self) -> str:
        return "evaluate"


Job = Expand | Evaluate


def job_to_dict(job: Job) -> dict[str, Any]:
    if isinstance(job, Expand):
        return {"kind": "expand", "job_id": job.job_id, "parent_id": job.parent_id}
    return {"kind": "evaluate", "job_id": job.job_id, "agent_id": job.agent_id, "task_id": job.task_id}


def job_from_dict(data: Mapping[str, Any]) -> Job:
    if data["kind"] == "expand":
        return Expand(parent_id=data["parent_id"], job_id=data["job_id"])
    if data["kind"] == "evaluate":
        return Evaluate(agent_id=data["agent_id"], task_id=data["task_id"], job_id=data["job_id"])
    raise ValueError(f"unknown job kind {data['kind']!r}")


@dataclass(frozen=True)
class Pull:
    """One expansion written by the meta-agent model ``model``: what it spent and, once known, what it
    gained (the model bandit's record, ``schedulers.model_choice``; folded from the journal by
    ``archive.tally.ModelLedger``).

    ``gain`` is None while the outcome is unknown (the expansion runs, or its child has no task graded
    in common with its parent yet); 0.0 for a failed expansion."""

    model: str
    cost: float
    gain: float | None = None


CostBasis = Literal["tokens", "usd"]
"""What a ``Pull``'s cost counts: tokens, or USD when every model has a price."""


@dataclass(frozen=True)
class Budget:
    """Limits of a study. ``None`` means unlimited."""

    evaluations: int | None = None
    expansions: int | None = None
    wall_time_s: float | None = None
    tokens: int | None = None
    cost_usd: float | None = None


@dataclass(frozen=True)
class Usage:
    """What a study has spent so far (finished work plus work in flight where noted)."""

    evaluations: int = 0  # evaluations started (finished + in flight)
    expansions: int = 0  # expansions started (admitted + failed + in flight)
    wall_time_s: float = 0.0
    tokens: int = 0
    cost_usd: float = 0.0

    def exhausted(self, budget: Budget) -> str | None:
        """The name of the first exhausted limit, or ``None``."""
        checks: list[tuple[str, float | None, float]] = [
            ("evaluations", budget.evaluations, self.evaluations),
            ("expansions", budget.expansions, self.expansions),
            ("wall_time_s", budget.wall_time_s, self.wall_time_s),
            ("tokens", budget.tokens, self.tokens),
            ("cost_usd", budget.cost_usd, self.cost_usd),
        ]
        for name, limit, used in checks:
            if limit is not None and used >= limit:
                return name
        return None
