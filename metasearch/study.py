"""Study: the ask / tell / run loop over an archive, a scheduler and a job function.

``ask`` asks the scheduler for the next job and reserves it (the (agent, task) pair or the pending
expansion becomes visible to later decisions); ``tell`` records the outcome in the archive, updates the
clade statistics and notifies callbacks; ``run`` drives N concurrent workers until the budget is spent,
the scheduler has nothing left to do, or the user stops it. All state lives in the archive: a study is
reopened by replaying its journal.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from metasearch.archive import GitArchive
from metasearch.errors import ArchiveError, MetasearchError
from metasearch.events import (
    AgentAdded,
    Evaluated,
    EvaluationRecorded,
    Event,
    Expanded,
    ExpansionFailed,
    ExpansionRejected,
    InfraFailure,
    JobAbandoned,
    JobStarted,
    Outcome,
    StudyFinished,
    TaskRetired,
)
from metasearch.schedulers.base import Scheduler, SearchState
from metasearch.schedulers.cmp import SearchTree, replay_results
from metasearch.types import Budget, Evaluate, Expand, Job, Usage

# Called with the study and each event it emits; losing a callback's backend loses nothing.
Callback = Callable[["Study", Event], None]

log = logging.getLogger(__name__)

JobFunction = Callable[[Job], Outcome]

# Jobs lost with their machines (transient failures) in a row before the study stops: a cluster whose
# nodes keep dying is not worth running on.
LOST_JOBS_STOP = 32


@dataclass
class StopSignal:
    """Set by the CLI on Ctrl-C: ``drain`` stops dispatching; ``abort`` also abandons running jobs."""

    drain: threading.Event = field(default_factory=threading.Event)
    abort: threading.Event = field(default_factory=threading.Event)


class Study:
    """One search over agent designs, backed by a GitArchive.

    Thread-safe: ``ask`` and ``tell`` may be called from any thread. ``run`` is the usual driver.
    """

    def __init__(
        self,
        archive: GitArchive,
        scheduler: Scheduler,
        *,
        tasks: Sequence[str],
        budget: Budget,
        seed: int = 0,
        seed_evaluations: bool = True,
        callbacks: Sequence[Callback] = (),
        max_infra_failures: int = 3,
    ) -> None:
        if not tasks:
            raise MetasearchError("a study needs at least one task")
        self.archive = archive
        self.scheduler = scheduler
        retired = archive.index.retired_tasks
        self.tasks = tuple(t for t in tasks if t not in retired)
        if not self.tasks:
            raise MetasearchError(
                "no task of this study can be graded here: "
                + "; ".join(f"{t}: {retired[t]}" for t in tasks if t in retired)[:2000]
            )
        self.budget = budget
        self.callbacks = list(callbacks)
        self.seed_evaluations = seed_evaluations
        self.max_infra_failures = max_infra_failures
        self.workers = 1  # set by run(); schedulers see it in SearchState.workers
        self.rng = np.random.default_rng(seed)
        self.tree = SearchTree()
        self._lock = threading.RLock()
        self._in_flight: dict[str, Job] = {}
        self._started = time.monotonic()
        self._infra_streak = 0
        self._lost_streak = 0
        self.stop_reason: str | None = None
        self._counted_evaluations = 0  # finished, budget-counting (seeds' initial evaluations are free)
        self._finished_expansions = 0  # admitted children + failed expansions
        self._replay()

    # -- state ------------------------------------------------------------------------------------

    def _replay(self) -> None:
        index = self.archive.index
        if index.open_jobs:
            raise ArchiveError(
                f"{self.archive.root}: {len(index.open_jobs)} job(s) are still running in another live "
                "process; stop it first (or wait for its lease to expire)"
            )
        self._seed_ids = [a.id for a in index.agents.values() if a.parent_id is None]
        self.tree = replay_results(
            [(a.id, a.parent_id) for a in index.agents.values()],
            [(ev.agent_id, ev.task_id, ev.score, ev.flags) for ev in index.evaluations.values()],
            [ev.duration_s for ev in index.evaluations.values()],
        )
        self._finished_expansions += sum(a.parent_id is not None for a in index.agents.values())
        self._counted_evaluations += sum(not self._is_free(ev.agent_id) for ev in index.evaluations.values())
        for failure in index.failed_expansions:
            self.tree.expansion_started(failure["parent_id"])
            self.tree.expansion_finished(failure["parent_id"], failed=True)
            self._finished_expansions += 1

    def usage(self) -> Usage:
        """Budget-counting work: seeds' initial evaluations are free, as in HGM."""
        with self._lock:
            index = self.archive.index
            evals = self._counted_evaluations + sum(
                1
                for j in self._in_flight.values()
                if isinstance(j, Evaluate) and not self._is_free(j.agent_id)
            )
            expansions = self._finished_expansions + sum(
                1 for j in self._in_flight.values() if isinstance(j, Expand)
            )
            return Usage(
                evaluations=evals,
                expansions=expansions,
                wall_time_s=time.monotonic() - self._started,
                tokens=index.tokens,
                cost_usd=index.cost_usd,
            )

    def _is_free(self, agent_id: str) -> bool:
        return self.seed_evaluations and self.archive.index.agents[agent_id].parent_id is None

    def state(self) -> SearchState:
        """A read-only view for the scheduler; valid while the caller holds no expectation of stability."""
        in_flight = list(self._in_flight.values())
        return SearchState(
            tree=self.tree,
            tasks=self.tasks,
            budget=self.budget,
            usage=self.usage(),
            expansions_in_flight=sum(1 for j in in_flight if isinstance(j, Expand)),
            evaluations_in_flight=sum(1 for j in in_flight if isinstance(j, Evaluate)),
            workers=self.workers,
        )

    @property
    def in_flight(self) -> list[Job]:
        with self._lock:
            return list(self._in_flight.values())

    def best(self) -> str | None:
        with self._lock:
            return self.scheduler.select_final(self.state())

    # -- ask / tell -------------------------------------------------------------------------------

    def ask(self) -> Job | None:
        """The next job to start, already reserved and journaled; ``None`` when nothing should start now."""
        with self._lock:
            if self.stop_reason is not None:
                return None
            job: Job | None = self._next_seed_evaluation()
            if job is None:
                if self._spent() is not None:
                    return None
                job = self.scheduler.next_job(self.state(), self.rng)
            if job is None:
                return None
            self._reserve(job)
            self.archive.start_job(job)
            self._in_flight[job.job_id] = job
        self._emit(JobStarted(job))
        return job

    def _spent(self) -> str | None:
        """The exhausted limit that ends the study. A spent expansion budget only stops expansions (the
        schedulers see it); evaluations of the existing agents go on until another limit is reached."""
        usage = self.usage()
        return Usage(usage.evaluations, 0, usage.wall_time_s, usage.tokens, usage.cost_usd).exhausted(
            self.budget
        )

    def _next_seed_evaluation(self) -> Evaluate | None:
        if not self.seed_evaluations:
            return None
        for seed_id in self._seed_ids:
            unseen = self.tree.unseen_tasks(seed_id, self.tasks)
            if unseen:
                return Evaluate(agent_id=seed_id, task_id=unseen[0])
        return None

    def _reserve(self, job: Job) -> None:
        if isinstance(job, Evaluate):
            if job.agent_id not in self.archive.index.agents:
                raise MetasearchError(f"scheduler chose unknown agent {job.agent_id!r}")
            if job.task_id not in self.tasks or job.task_id not in self.tree.unseen_tasks(
                job.agent_id, self.tasks
            ):
                raise MetasearchError(f"scheduler chose ({job.agent_id}, {job.task_id}) twice or off-list")
            self.tree.reserve(job.agent_id, job.task_id)
        else:
            if job.parent_id not in self.archive.index.agents:
                raise MetasearchError(f"scheduler chose unknown parent {job.parent_id!r}")
            self.tree.expansion_started(job.parent_id)

    def tell(self, job: Job, outcome: Outcome) -> None:
        """Record what a job produced. Idempotent per job id at the archive level."""
        events: list[Event] = []
        with self._lock:
            if self._in_flight.pop(job.job_id, None) is None:
                raise MetasearchError(f"tell() for job {job.job_id} that is not in flight")
            if isinstance(outcome, InfraFailure):
                if outcome.transient:  # lost with a node: re-queued, and only a long run of these stops
                    self._lost_streak += 1
                elif not outcome.task_unfit:  # one task's fault, not the machine's
                    self._infra_streak += 1
                self.archive.abandon_job(job.job_id, outcome.reason)
                self._unreserve(job)
                events.append(JobAbandoned(job, outcome.reason))
                if outcome.task_unfit and isinstance(job, Evaluate):
                    events += self._retire(job.task_id, outcome.reason)
                elif (
                    not outcome.retryable
                    or self._infra_streak >= self.max_infra_failures
                    or self._lost_streak >= LOST_JOBS_STOP
                ):
                    self.stop_reason = f"infrastructure failure: {outcome.reason}"
            else:
                self._infra_streak = self._lost_streak = 0
                events.append(self._apply(job, outcome))
        for event in events:
            self._emit(event)

    def _retire(self, task_id: str, reason: str) -> list[Event]:
        """Evaluate ``task_id`` no more (caller holds the lock); stop when no task is left."""
        if task_id not in self.tasks:
            return []
        self.archive.retire_task(task_id, reason)
        self.tasks = tuple(t for t in self.tasks if t != task_id)
        log.warning("task %s retired: it cannot be graded here: %s", task_id, reason)
        if not self.tasks:
            self.stop_reason = f"no task left that can be graded here (the last: {task_id}: {reason})"
        return [TaskRetired(task_id, reason)]

    def _apply(self, job: Job, outcome: Outcome) -> Event:
        if isinstance(job, Evaluate) and isinstance(outcome, Evaluated):
            ev = replace(outcome.evaluation, job_id=job.job_id, agent_id=job.agent_id, task_id=job.task_id)
            self.archive.record(ev)
            self.tree.add_result(ev.agent_id, ev.task_id, ev.score, ev.flags, ev.duration_s)
            self._counted_evaluations += not self._is_free(ev.agent_id)
            return EvaluationRecorded(ev)
        if isinstance(job, Expand) and isinstance(outcome, Expanded):
            self.tree.expansion_finished(job.parent_id, failed=False)
            self.tree.add_agent(outcome.agent.id, outcome.agent.parent_id)
            self._finished_expansions += 1
            return AgentAdded(outcome.agent, outcome.proposal)
        if isinstance(job, Expand) and isinstance(outcome, ExpansionRejected):
            self.archive.fail_expansion(job, outcome.reason, outcome.diff, kind=outcome.kind)
            self.tree.expansion_finished(job.parent_id, failed=True)
            self._finished_expansions += 1
            return ExpansionFailed(job, outcome.reason, outcome.kind)
        raise MetasearchError(f"outcome {type(outcome).__name__} does not fit job {job.kind}")

    def _unreserve(self, job: Job) -> None:
        if isinstance(job, Evaluate):
            self.tree.release(job.agent_id, job.task_id)
        else:
            self.tree.expansion_finished(job.parent_id, failed=False)

    def _emit(self, event: Event) -> None:
        for callback in self.callbacks:
            try:
                callback(self, event)
            except Exception:  # a broken callback (e.g. tracking server down) must not stop the search
                log.exception("callback %r failed on %s", callback, type(event).__name__)

    # -- run --------------------------------------------------------------------------------------

    def run(
        self,
        execute: JobFunction,
        *,
        workers: int = 1,
        stop: StopSignal | None = None,
        heartbeat_s: float = 5.0,
    ) -> str:
        """Run jobs on ``workers`` threads until done; returns why it stopped (also ``self.stop_reason``).

        Holds the study's lease meanwhile (renewed every ``heartbeat_s``), released however it ends."""
        self.workers = workers
        try:
            return self._run(execute, workers, stop or StopSignal(), heartbeat_s)  # ends with finish()
        except BaseException:
            self.archive.release()
            raise

    def _run(self, execute: JobFunction, workers: int, stop: StopSignal, heartbeat_s: float) -> str:
        futures: dict[Future[Outcome], Job] = {}
        last_beat = 0.0
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="metasearch-job") as pool:
            while True:
                if time.monotonic() - last_beat >= heartbeat_s:
                    self.archive.heartbeat()
                    last_beat = time.monotonic()
                if stop.drain.is_set() and self.stop_reason is None:
                    self.stop_reason = "interrupted"
                while len(futures) < workers and not stop.drain.is_set():
                    job = self.ask()
                    if job is None:
                        break
                    futures[pool.submit(_guarded, execute, job)] = job
                if not futures:
                    break
                if stop.abort.is_set():
                    # drain may have been set after the check above; an abort is an interrupt all the same
                    self.stop_reason = self.stop_reason or "interrupted"
                    self._abandon(futures, "aborted by user")
                    pool.shutdown(wait=False, cancel_futures=True)
                    end_running = getattr(execute, "abort", None)
                    if callable(end_running):  # ends what the abandoned jobs still run, so the workers return
                        end_running()
                    break
                done, _ = wait(futures, timeout=min(heartbeat_s, 0.5), return_when=FIRST_COMPLETED)
                for fut in done:
                    self.tell(futures.pop(fut), fut.result())
        spent = self._spent()
        reason = self.stop_reason or (f"budget exhausted: {spent}" if spent else "no more work")
        self.stop_reason = reason
        summary = self.summary()
        self.archive.finish(reason)
        self._emit(StudyFinished(reason, summary))
        return reason

    def _abandon(self, futures: dict[Future[Outcome], Job], reason: str) -> None:
        for fut, job in list(futures.items()):
            fut.cancel()
            with self._lock:
                if self._in_flight.pop(job.job_id, None) is not None:
                    self.archive.abandon_job(job.job_id, reason)
                    self._unreserve(job)
        futures.clear()

    def summary(self) -> dict[str, Any]:
        with self._lock:
            usage = self.usage()
            index = self.archive.index
            return {
                "study": self.archive.study,
                "agents": len(index.agents),
                "evaluations": len(index.evaluations),
                "expansions": usage.expansions,
                "expansions_failed": len(index.failed_expansions),
                "running": len(self._in_flight),
                "best": self.best(),
                "wall_time_s": round(usage.wall_time_s, 3),
                "tokens": usage.tokens,
                "cost_usd": usage.cost_usd,
            }


def _guarded(execute: JobFunction, job: Job) -> Outcome:
    """A job function that raised is an infrastructure fault (candidate faults are returned as data)."""
    try:
        return execute(job)
    except Exception as exc:
        log.exception("job %s failed with an unexpected error", job.job_id)
        return InfraFailure(f"{type(exc).__name__}: {exc}")
