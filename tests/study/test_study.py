"""Study ask/tell/run against a real GitArchive, with job functions that stand in for sandboxes."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from metasearch.archive import GitArchive
from metasearch.errors import InfrastructureError, MetasearchError, TaskUnfit
from metasearch.events import Evaluated, Expanded, ExpansionRejected, InfraFailure, Outcome
from metasearch.registry import SCHEDULERS
from metasearch.study import StopSignal, Study
from metasearch.types import Budget, Evaluate, Evaluation, Expand, Job, job_from_dict

TASKS = [f"t{i}" for i in range(6)]


def _archive(tmp_path: Path, name: str = "s") -> GitArchive:
    seed = tmp_path / "seed"
    seed.mkdir(exist_ok=True)
    (seed / "agent.toml").write_text('name = "seed"\n[entry]\nsolve = ["true"]\n')
    (seed / "quality.txt").write_text("0.3\n")
    archive = GitArchive.create(tmp_path / name, study=name, config_text="{}\n")
    archive.add_seed("seed", seed, job_id="seed-0")
    return archive


class Landscape:
    """A job function: children have a hidden quality; evaluations are seeded Bernoulli draws."""

    def __init__(
        self, archive: GitArchive, *, fail_every: int = 0, infra_every: int = 0, unfit: tuple[str, ...] = ()
    ) -> None:
        self.archive = archive
        self.unfit = unfit
        self.quality: dict[str, float] = {}
        self.calls = Counter[str]()
        self.fail_every = fail_every
        self.infra_every = infra_every
        self._lock = threading.Lock()

    def __call__(self, job: Job) -> Outcome:
        with self._lock:
            self.calls[job.kind] += 1
            n = self.calls[job.kind]
        if self.infra_every and n % self.infra_every == 0:
            return InfraFailure("simulated daemon hiccup")
        if isinstance(job, Evaluate) and job.task_id in self.unfit:
            return InfraFailure(
                f"{job.task_id} needs 30000 MB, over the cap", retryable=False, task_unfit=True
            )
        if isinstance(job, Evaluate):
            q = self.quality.get(job.agent_id, 0.3)
            rng = random.Random(f"{job.agent_id}/{job.task_id}")
            return Evaluated(Evaluation(job.job_id, job.agent_id, job.task_id, score=float(rng.random() < q)))
        assert isinstance(job, Expand)
        if self.fail_every and n % self.fail_every == 0:
            return ExpansionRejected("proposer produced garbage")
        with self.archive.checkout(job.parent_id) as ws:
            q = min(
                1.0,
                float((ws / "quality.txt").read_text())
                + random.Random(f"{job.parent_id}/{n}").uniform(-0.1, 0.3),
            )
            (ws / "quality.txt").write_text(f"{q}\n")
            agent = self.archive.add_child(
                job.parent_id, ws, job_id=job.job_id, meta={"summary": f"q={q:.2f}"}
            )
        self.quality[agent.id] = q
        return Expanded(agent)


def _study(archive: GitArchive, budget: int = 30, **kw) -> Study:
    scheduler = SCHEDULERS.resolve("hgm")
    return Study(archive, scheduler(scheduler.Config()), tasks=TASKS, budget=Budget(evaluations=budget), **kw)


def test_run_spends_the_budget_and_never_repeats_a_pair(tmp_path: Path) -> None:
    archive = _archive(tmp_path)
    study = _study(archive, budget=40)
    reason = study.run(Landscape(archive), workers=4)
    assert reason.startswith("budget exhausted")
    evals = list(archive.index.evaluations.values())
    pairs = Counter((ev.agent_id, ev.task_id) for ev in evals)
    assert max(pairs.values()) == 1
    seed_id = next(a.id for a in archive.index.agents.values() if a.parent_id is None)
    assert sum(1 for ev in evals if ev.agent_id == seed_id) == len(TASKS), "seeds are evaluated on every task"
    assert study.usage().evaluations == 40 == sum(1 for ev in evals if ev.agent_id != seed_id)
    assert len(archive.index.agents) > 2
    assert study.best() in archive.index.agents
    archive.close()


def test_failed_expansions_are_recorded_and_search_goes_on(tmp_path: Path) -> None:
    archive = _archive(tmp_path)
    study = _study(archive, budget=30)
    study.run(Landscape(archive, fail_every=2), workers=2)
    failed = archive.index.failed_expansions
    assert failed and all(f["reason"] == "proposer produced garbage" for f in failed)
    assert study.tree.failed_expansions(failed[0]["parent_id"]) >= 1
    archive.close()


def test_infra_failures_requeue_then_stop_cleanly(tmp_path: Path) -> None:
    archive = _archive(tmp_path)
    study = _study(archive, budget=30)
    reason = study.run(lambda job: InfraFailure("docker daemon unreachable"), workers=2)
    assert reason == "infrastructure failure: docker daemon unreachable"
    assert not archive.index.evaluations and not archive.index.open_jobs
    # the abandoned pairs are back in the queue: a fresh study over the same archive dispatches them again
    again = _study(archive, budget=30)
    job = again.ask()
    assert isinstance(job, Evaluate)
    archive.close()


def test_a_task_no_one_can_be_graded_on_is_retired_and_the_search_goes_on(tmp_path: Path) -> None:
    """One task's grading cannot fit this machine (``errors.TaskUnfit``): the study retires it, journaled,
    and spends its budget on the others; resumed, it keeps the task retired; with every task retired it
    stops, saying why."""
    archive = _archive(tmp_path)
    reason = _study(archive, budget=30).run(Landscape(archive, unfit=("t3",)), workers=2)
    assert reason.startswith("budget exhausted")
    assert archive.index.retired_tasks == {"t3": "t3 needs 30000 MB, over the cap"}
    evals = list(archive.index.evaluations.values())
    assert evals and all(ev.task_id != "t3" for ev in evals) and not archive.index.open_jobs
    archive.close()
    reopened = GitArchive.open(tmp_path / "s")
    assert _study(reopened, budget=40).tasks == tuple(t for t in TASKS if t != "t3")
    reopened.close()

    other = _archive(tmp_path, "all")
    reason = _study(other, budget=30).run(Landscape(other, unfit=tuple(TASKS)), workers=2)
    assert reason.startswith("no task left that can be graded here")
    assert set(other.index.retired_tasks) == set(TASKS) and not other.index.evaluations
    with pytest.raises(MetasearchError, match="no task of this study can be graded here: t0: t0 needs"):
        _study(other, budget=30)
    other.close()


def test_a_task_unfit_error_crosses_a_process_boundary_as_itself() -> None:
    """Ray jobs hand errors back as data: a task that cannot be graded here stays that, not a machine fault."""
    back = InfrastructureError.from_dict(TaskUnfit("over the cap").to_dict())
    assert isinstance(back, TaskUnfit) and str(back) == "over the cap" and not back.retryable
    plain = InfrastructureError.from_dict(InfrastructureError("daemon down").to_dict())
    assert type(plain) is InfrastructureError and plain.retryable


def test_one_worker_with_a_seed_is_reproducible(tmp_path: Path) -> None:
    def trace(name: str) -> list[tuple[str, str]]:
        archive = _archive(tmp_path, name)
        study = _study(archive, budget=25, seed=7)
        study.run(Landscape(archive), workers=1)
        out = [(ev.agent_id, ev.task_id) for ev in archive.index.evaluations.values()]
        archive.close()
        return out

    assert trace("a") == trace("b")


def test_resume_continues_from_the_journal(tmp_path: Path) -> None:
    archive = _archive(tmp_path)
    _study(archive, budget=15).run(Landscape(archive), workers=2)
    n_agents, n_evals = len(archive.index.agents), len(archive.index.evaluations)
    archive.close()
    reopened = GitArchive.open(tmp_path / "s")
    study = _study(reopened, budget=30)
    assert study.usage().evaluations == 15
    study.run(Landscape(reopened), workers=2)
    assert len(reopened.index.evaluations) == n_evals + 15
    assert len(reopened.index.agents) >= n_agents
    reopened.close()


def test_drain_stops_dispatching_and_finishes_in_flight(tmp_path: Path) -> None:
    archive = _archive(tmp_path)
    study = _study(archive, budget=1000)
    stop = StopSignal()
    landscape = Landscape(archive)

    def execute(job: Job) -> Outcome:
        if landscape.calls["evaluate"] >= 10:
            stop.drain.set()
        return landscape(job)

    reason = study.run(execute, workers=2, stop=stop)
    assert reason == "interrupted"
    assert not archive.index.open_jobs
    archive.close()


def test_abort_ends_running_jobs_and_returns_at_once(tmp_path: Path) -> None:
    """A second Ctrl-C: the running jobs are abandoned (back in the queue, nothing recorded for them) and
    the job function is asked to end what they run; the study returns without waiting for them. It used
    to wait for each job to end, minutes for an agent waiting on a slow model."""
    archive = _archive(tmp_path)
    study = _study(archive, budget=1000)
    stop = StopSignal()
    started, ended = threading.Barrier(3, timeout=30), threading.Event()

    class Stuck:
        def __call__(self, job: Job) -> Outcome:
            started.wait()
            ended.wait(timeout=600)  # what a sandbox does until its run is ended
            return InfraFailure("ended by abort")

        def abort(self) -> None:
            ended.set()

    def interrupt() -> None:
        started.wait()
        stop.drain.set()
        stop.abort.set()

    threading.Thread(target=interrupt, daemon=True).start()
    began = time.monotonic()
    assert study.run(Stuck(), workers=2, stop=stop) == "interrupted"
    assert time.monotonic() - began < 30 and ended.is_set()
    assert not archive.index.open_jobs and not archive.index.evaluations
    archive.close()


def test_ask_and_tell_from_threads_lose_nothing(tmp_path: Path) -> None:
    archive = _archive(tmp_path)
    study = _study(archive, budget=60)
    landscape = Landscape(archive)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            while (job := study.ask()) is not None:
                study.tell(job, landscape(job))
        except BaseException as exc:  # pragma: no cover - surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    evals = list(archive.index.evaluations.values())
    assert len({ev.job_id for ev in evals}) == len(evals)
    own = Counter(ev.agent_id for ev in evals)
    for agent_id, n in own.items():
        assert study.tree.own(agent_id)[1] == pytest.approx(n)
    assert np.isclose(sum(study.tree.own(a)[0] for a in archive.index.agents), sum(ev.score for ev in evals))
    archive.close()


def test_a_spent_expansion_budget_stops_only_expansions(tmp_path: Path) -> None:
    archive = _archive(tmp_path)
    scheduler = SCHEDULERS.resolve("hgm")
    study = Study(
        archive, scheduler(scheduler.Config()), tasks=TASKS, budget=Budget(evaluations=10, expansions=2)
    )
    reason = study.run(Landscape(archive), workers=2)
    assert reason == "budget exhausted: evaluations"
    assert study.usage().expansions == 2 and study.usage().evaluations == 10
    # with more evaluation budget than two children can use, the study ends when no work is left
    more = _study(archive, budget=100)
    more.budget = Budget(evaluations=100, expansions=2)
    assert more.run(Landscape(archive), workers=2) == "no more work"
    assert more.usage().evaluations == 2 * len(TASKS)
    archive.close()


@pytest.mark.parametrize(("workers", "initial"), [(1, 1), (4, 2), (8, 3)])
def test_hgm_paper_sizes_its_initial_expansions_by_the_run_s_workers(
    tmp_path: Path, workers: int, initial: int
) -> None:
    """The seed is evaluated on every task first (free), then min(5, floor(workers ** 0.6)) expansions of it."""
    archive = _archive(tmp_path)
    cls = SCHEDULERS.resolve("hgm-paper")
    study = Study(archive, cls(cls.Config()), tasks=TASKS, budget=Budget(evaluations=12))
    study.run(Landscape(archive), workers=workers)
    lines = (archive.root / "journal.jsonl").read_text().splitlines()
    order = [
        job_from_dict(e["job"]) for e in map(json.loads, lines) if e["op"] == "job_started"
    ]  # dispatch order
    seed = next(a.id for a in archive.index.agents.values() if a.parent_id is None)
    head = order[: len(TASKS)]
    assert all(isinstance(j, Evaluate) and j.agent_id == seed for j in head)
    after = order[len(TASKS) : len(TASKS) + initial + 1]
    assert [isinstance(j, Expand) and j.parent_id == seed for j in after[:initial]] == [True] * initial
    counted = sum(ev.agent_id != seed for ev in archive.index.evaluations.values())
    assert counted >= 12 - workers  # the seed's evaluations were free: the budget went to the children
