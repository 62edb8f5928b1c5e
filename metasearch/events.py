"""Events a study emits to its callbacks, and the outcomes a job returns to the study."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from metasearch.types import Agent, Evaluation, Expand, Job, Proposal

# -- outcomes: what running a job produced (returned by the runner, consumed by Study.tell) --------


@dataclass(frozen=True)
class Evaluated:
    evaluation: Evaluation


@dataclass(frozen=True)
class Expanded:
    """The child is already committed to the archive (the runner does it while the workspace exists)."""

    agent: Agent
    proposal: Proposal | None = None


@dataclass(frozen=True)
class ExpansionRejected:
    """The proposer failed or the gate refused the child: a failed expansion, recorded with its reason."""

    reason: str
    diff: str = ""
    proposal: Proposal | None = None
    kind: str = "other"
    """Its class (``proposers.base.FAILURE_KINDS``): what status and MLflow count."""


@dataclass(frozen=True)
class InfraFailure:
    """Not the candidate's fault: the job is abandoned and its work returns to the queue."""

    reason: str
    retryable: bool = True
    transient: bool = False
    """Lost with a machine that went away: re-queued without counting toward the failure streak."""
    task_unfit: bool = False
    """The evaluated task cannot be graded here by anyone (``errors.TaskUnfit``): it is retired."""


Outcome = Evaluated | Expanded | ExpansionRejected | InfraFailure


# -- events: what callbacks see -----------------------------------------------------------------


@dataclass(frozen=True)
class JobStarted:
    job: Job


@dataclass(frozen=True)
class AgentAdded:
    agent: Agent
    proposal: Proposal | None = None


@dataclass(frozen=True)
class EvaluationRecorded:
    evaluation: Evaluation


@dataclass(frozen=True)
class ExpansionFailed:
    job: Expand
    reason: str
    kind: str = "other"


@dataclass(frozen=True)
class JobAbandoned:
    job: Job
    reason: str


@dataclass(frozen=True)
class TaskRetired:
    """A task the study no longer evaluates: it cannot be graded here (``errors.TaskUnfit``)."""

    task_id: str
    reason: str


@dataclass(frozen=True)
class StudyFinished:
    reason: str
    summary: dict[str, Any]


Event = (
    JobStarted
    | AgentAdded
    | EvaluationRecorded
    | ExpansionFailed
    | JobAbandoned
    | TaskRetired
    | StudyFinished
)
