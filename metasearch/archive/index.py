"""ArchiveIndex: what the journal says, in memory.

Built by replaying the journal (see journal.py) and kept current by every append. A plain object: it is
read by many threads but only ever mutated while the journal's file lock is held, one event at a time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from metasearch.archive.tally import ModelLedger
from metasearch.types import Agent, Evaluate, Evaluation, Expand, Job, job_from_dict

# Events that finish a job for good; a second one for the same job id is refused (idempotency).
CLOSING_OPS = frozenset({"agent_added", "evaluation_recorded", "expansion_failed"})


@dataclass
class ArchiveIndex:
    """The study's state as of the last event applied.

    ``agents`` keeps insertion (creation) order; ``evaluations`` is keyed by job id; ``open_jobs`` holds
    jobs started and neither closed nor abandoned. ``last_seen`` maps a process's owner token to the
    time of its latest sign of life (a lease or a job it started); stale-lease recovery reads it.
    """

    study: str | None = None
    study_id: str | None = None  # unique per study, written at creation (older studies have none)
    conditions: str | None = None  # hash of the score-deciding conditions now in force (provenance.py)
    drift: list[dict[str, Any]] = field(default_factory=list)  # drift_accepted events, oldest first
    agents: dict[str, Agent] = field(default_factory=dict)
    agent_by_job: dict[str, str] = field(default_factory=dict)  # job id -> agent id
    evaluations: dict[str, Evaluation] = field(default_factory=dict)  # by job id
    failed_expansions: list[dict[str, Any]] = field(default_factory=list)
    open_jobs: dict[str, Job] = field(default_factory=dict)
    job_owner: dict[str, str] = field(default_factory=dict)
    job_started_at: dict[str, float] = field(default_factory=dict)  # job id -> ts of its latest start
    leases: dict[str, dict[str, Any]] = field(default_factory=dict)  # owner -> last lease event
    last_seen: dict[str, float] = field(default_factory=dict)  # owner -> ts of its latest event
    released: set[str] = field(default_factory=set)  # owners whose run ended (no lease since)
    closed: set[str] = field(default_factory=set)
    started: set[str] = field(default_factory=set)
    expansions_started: int = 0  # distinct expand jobs ever started (a retried job id counts once)
    evaluations_started: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    finished: str | None = None
    retired_tasks: dict[str, str] = field(default_factory=dict)  # task id -> why it cannot be graded here
    learned: dict[str, dict[str, Any]] = field(default_factory=dict)  # task id -> what grading it taught
    models: ModelLedger = field(default_factory=ModelLedger)  # which model wrote each expansion (tally.py)
    events: int = 0
    torn_tail: bool = False

    def apply(self, event: Mapping[str, Any]) -> None:
        """Fold one event into the index. Unknown ops are counted and otherwise ignored (forward compat)."""
        op = event["op"]
        job_id = event.get("job_id")
        self.events += 1
        self.models.apply(event)
        if op == "evaluation_recorded":  # the most frequent event first
            e = dict(event["evaluation"])
            e["flags"] = tuple(e.get("flags") or ())
            self.evaluations[e["job_id"]] = Evaluation(**e)
        elif op == "agent_added":
            a = event["agent"]
            self.agents[a["id"]] = Agent(
                id=a["id"],
                parent_id=a["parent_id"],
                commit=a["commit"],
                branch=a["branch"],
                created_at=a["created_at"],
                meta=a.get("meta") or {},
            )
            if job_id is not None:
                self.agent_by_job[job_id] = a["id"]
        elif op == "usage":
            self.tokens += int(event.get("tokens", 0))
            self.cost_usd += float(event.get("cost_usd", 0.0))
        elif op == "job_started":
            job = job_from_dict(event["job"])
            self.open_jobs[job.job_id] = job
            owner = str(event.get("owner", ""))
            self.job_owner[job.job_id] = owner
            self.job_started_at[job.job_id] = float(event.get("ts", 0.0))
            self.last_seen[owner] = max(self.last_seen.get(owner, 0.0), float(event.get("ts", 0.0)))
            if job.job_id not in self.started:
                self.started.add(job.job_id)
                self.expansions_started += isinstance(job, Expand)
                self.evaluations_started += isinstance(job, Evaluate)
            self.finished = None  # a resumed study is running again
        elif op == "lease":
            owner = str(event["owner"])
            self.leases[owner] = dict(event)
            self.released.discard(owner)
            self.last_seen[owner] = max(self.last_seen.get(owner, 0.0), float(event.get("ts", 0.0)))
        elif op == "expansion_failed":
            self.failed_expansions.append(
                {
                    "job_id": job_id,
                    "parent_id": event["parent_id"],
                    "reason": event["reason"],
                    "kind": event.get("kind", "other"),
                    "diff_path": event.get("diff_path"),
                    "model": self.models.model_of(str(job_id)),
                }
            )
        elif op == "job_abandoned":
            if job_id is not None:
                self.open_jobs.pop(job_id, None)
        elif op == "task_retired":
            self.retired_tasks[str(event["task_id"])] = str(event.get("reason", ""))
        elif op == "task_learned":  # a later value of a fact replaces the earlier
            task_id = str(event["task_id"])
            self.learned[task_id] = {**self.learned.get(task_id, {}), **dict(event.get("facts") or {})}
        elif op == "lease_released":
            self.released.add(str(event["owner"]))
        elif op == "study_created":
            self.study = event.get("study")
            self.study_id = event.get("study_id")
            self.conditions = event.get("conditions")
        elif op == "drift_accepted":
            self.conditions = event.get("conditions")
            self.drift.append(dict(event))
        elif op == "study_finished":
            self.finished = event.get("reason")
            if "owner" in event:
                self.released.add(str(event["owner"]))
        if op in CLOSING_OPS and job_id is not None:
            self.closed.add(job_id)
            self.open_jobs.pop(job_id, None)
