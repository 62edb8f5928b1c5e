"""An event-driven simulation of W asynchronous workers running any scheduler unchanged.

The scheduler sees exactly what it sees in a real study: a SearchTree with reservations, pending
expansions and results, and a SearchState with the budget, usage and worker count. Expansions call
``landscape.child``; an evaluation of a design on task t succeeds with the design's solve probability for t,
made from its latent quality (or, where the landscape has ``task_qualities(state, n_tasks)``, its latent
quality on t): see ``realism.py`` for task difficulty, durations, infrastructure failures, token costs and
the seed's free evaluation. Time advances to the next finishing job; a freed worker immediately asks for
the next job. Randomness: ``[seed, 1]`` drives the world (landscape, outcomes, durations), ``[seed, 2]`` the scheduler,
``[seed, 3]`` the task set, so paired runs of two schedulers share the landscape and the tasks.

``heldout_tasks`` H adds tasks the scheduler never sees, drawn by the same generative model from their own
stream ``[seed, 4]`` (so the search is the same with or without them): task difficulty from the realism (a
landscape with its own task set is resampled), and, where the landscape has ``task_qualities``, the
latent quality of tasks n..n+H-1 (task k of a grouped landscape stays in group k % groups). Every agent's
true quality on them is in ``SimResult.heldout``: what the final agent is worth on tasks it was not chosen on.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from metasearch.schedulers.base import Scheduler, SearchState
from metasearch.schedulers.cmp import SearchTree
from metasearch.sim.realism import Realism, solve_probabilities
from metasearch.types import Budget, Evaluate, Expand, Job, Usage


@dataclass
class SimResult:
    tree: SearchTree
    truth: dict[str, float]
    final: str | None
    evaluations: int
    expansions: int
    failed: int
    decisions: int
    extra: dict[str, Any] = field(default_factory=dict)
    heldout: dict[str, float] = field(default_factory=dict)  # true quality on the held-out tasks

    @property
    def final_quality(self) -> float:
        return self.truth[self.final] if self.final else 0.0

    @property
    def final_heldout(self) -> float:
        return self.heldout[self.final] if self.final and self.heldout else 0.0

    @property
    def best_quality(self) -> float:
        return max(self.truth.values())


@dataclass
class _World:
    """The hidden truth of one run and the draws that use it."""

    landscape: Any
    realism: Realism
    rng: np.random.Generator
    easiness: np.ndarray
    tasks: tuple[str, ...]
    heldout_easiness: np.ndarray = field(default_factory=lambda: np.zeros(0))
    states: dict[str, Any] = field(default_factory=dict)
    probs: dict[str, np.ndarray] = field(default_factory=dict)
    truth: dict[str, float] = field(default_factory=dict)
    heldout: dict[str, float] = field(default_factory=dict)
    speed: dict[str, float] = field(default_factory=dict)

    def add(self, agent_id: str, state: Any) -> None:
        n, held = len(self.tasks), len(self.heldout_easiness)
        per_task = getattr(self.landscape, "task_qualities", None)  # optional: one latent quality per task
        q_search: float | np.ndarray
        q_held: float | np.ndarray
        if callable(per_task):
            q = np.asarray(per_task(state, n + held))
            q_search, q_held = q[:n], q[n:]
        else:
            q_search = q_held = float(self.landscape.quality(state))
        p = solve_probabilities(q_search, self.easiness)
        self.states[agent_id], self.probs[agent_id], self.truth[agent_id] = state, p, float(p.mean())
        if held:
            self.heldout[agent_id] = float(solve_probabilities(q_held, self.heldout_easiness).mean())
        sigma = self.realism.design_speed_sigma if self.realism.durations else 0.0
        self.speed[agent_id] = float(np.exp(self.rng.normal(0.0, sigma))) if sigma else 1.0

    def evaluation(self, job: Evaluate) -> tuple[float, float]:
        """(score, duration) of one evaluation."""
        p = self.probs[job.agent_id][self.tasks.index(job.task_id)]
        score = float(self.rng.random() < p)
        r = self.realism
        if not r.durations:
            return score, _landscape_duration(self.landscape, "evaluation", self.rng)
        mean = r.eval_time_success if score else r.eval_time_failure
        return score, self.speed[job.agent_id] * _lognormal(self.rng, mean, r.duration_sigma)

    def expansion(self, job: Expand) -> tuple[Any, float]:
        """(child state or None, duration) of one expansion."""
        child = self.landscape.child(self.states[job.parent_id], self.rng)
        r = self.realism
        if not r.durations:
            return child, _landscape_duration(self.landscape, "expansion", self.rng)
        duration = _lognormal(self.rng, r.expansion_time, r.duration_sigma)
        return child, duration * (r.failed_expansion_time if child is None else 1.0)


def _lognormal(rng: np.random.Generator, mean: float, sigma: float) -> float:
    """A log-normal draw with the given mean."""
    return float(mean * np.exp(rng.normal(-0.5 * sigma * sigma, sigma)))


def _landscape_duration(landscape: Any, kind: str, rng: np.random.Generator) -> float:
    fn = getattr(landscape, f"{kind}_duration", None)
    return float(fn(rng)) if callable(fn) else float(rng.exponential(5.0 if kind == "expansion" else 1.0))


def simulate(
    landscape: Any,
    scheduler: Scheduler,
    *,
    budget: int,
    workers: int,
    n_tasks: int,
    seed: int,
    realism: Realism | None = None,
    wall_time_s: float | None = None,
    models: Any = None,
    tokens: float | None = None,
    heldout_tasks: int = 0,
) -> SimResult:
    """One run until ``budget`` evaluations (the seed's free ones excluded) have finished, or, with
    ``wall_time_s``, until no job may start after that much simulated time (jobs in flight finish), or,
    with a ``tokens`` budget, until no job may start after that many tokens are spent. ``models`` (see
    ``models.py``) writes every child with a model it chooses, at that model's token cost."""
    realism = Realism() if realism is None else realism
    tasks = tuple(f"t{i}" for i in range(n_tasks))
    own = getattr(landscape, "task_easiness", None)
    easiness = own if own is not None else realism.task_easiness(n_tasks, np.random.default_rng([seed, 3]))
    world = _World(
        landscape,
        realism,
        np.random.default_rng([seed, 1]),
        np.asarray(easiness)[:n_tasks],
        tasks,
        _heldout_easiness(own, realism, heldout_tasks, np.random.default_rng([seed, 4])),
    )
    decide = np.random.default_rng([seed, 2])
    tree = SearchTree()
    world.add("a0", landscape.root(world.rng))
    tree.add_agent("a0", None)
    free = list(tasks) if realism.seed_free else []
    events: list[tuple[float, int, Job, Any, bool]] = []
    seq = evaluations = expansions = failed = decisions = infra = 0
    exp_in_flight = eval_in_flight = 0
    spent = busy = 0.0
    now = 0.0
    budget_obj = Budget(evaluations=budget, wall_time_s=wall_time_s, tokens=_int(tokens))
    while True:
        while exp_in_flight + eval_in_flight < workers:
            job: Job | None
            if free:
                job = Evaluate(agent_id="a0", task_id=free.pop(0), job_id=str(seq))
            elif (
                evaluations >= budget
                or (wall_time_s is not None and now >= wall_time_s)
                or (tokens is not None and spent >= tokens)
            ):
                break
            else:
                state = SearchState(
                    tree,
                    tasks,
                    budget_obj,
                    Usage(evaluations, expansions, wall_time_s=now, tokens=int(spent)),
                    exp_in_flight,
                    eval_in_flight,
                    workers,
                )
                job = scheduler.next_job(state, decide)
                decisions += 1
                if job is None:
                    break
            seq += 1
            lost = realism.infra_failure_rate > 0 and world.rng.random() < realism.infra_failure_rate
            outcome: Any
            if isinstance(job, Evaluate):
                tree.reserve(job.agent_id, job.task_id)
                outcome, duration = world.evaluation(job)
                evaluations += not _is_free(job, realism)
                eval_in_flight += 1
            else:
                tree.expansion_started(job.parent_id)
                if models is not None:
                    outcome, duration, cost = models.expand(world, job, tree)
                    spent += cost
                else:
                    outcome, duration = world.expansion(job)
                    spent += (
                        _lognormal(world.rng, realism.expansion_tokens, 0.5)
                        if realism.expansion_tokens
                        else 0
                    )
                expansions += 1
                exp_in_flight += 1
            if lost:
                duration *= realism.infra_time
            busy += duration
            heapq.heappush(events, (now + duration, seq, job, (outcome, duration), lost))
        if not events:
            break
        now, _, job, (outcome, duration), lost = heapq.heappop(events)
        if isinstance(job, Evaluate):
            eval_in_flight -= 1
            if lost:  # abandoned and re-queued: no result, no budget
                tree.release(job.agent_id, job.task_id)
                evaluations -= not _is_free(job, realism)
                infra += 1
                if _is_free(job, realism):
                    free.append(job.task_id)
            else:
                tree.add_result(job.agent_id, job.task_id, outcome, duration=duration)
        else:
            exp_in_flight -= 1
            if lost:
                tree.expansion_finished(job.parent_id, failed=False)
                expansions -= 1
                infra += 1
                if models is not None:
                    models.finished(job, None, lost=True)
                continue
            tree.expansion_finished(job.parent_id, failed=outcome is None)
            agent_id = None
            if outcome is None:
                failed += 1
            else:
                agent_id = f"a{len(tree)}"
                tree.add_agent(agent_id, job.parent_id)
                world.add(agent_id, outcome)
            if models is not None:
                models.finished(job, agent_id)
    final = scheduler.select_final(
        SearchState(tree, tasks, budget_obj, Usage(evaluations, expansions), 0, 0, workers)
    )
    extra = {"tokens": spent, "busy_time": busy, "wall_time": now, "infra_failures": infra}
    return SimResult(
        tree, world.truth, final, evaluations, expansions, failed, decisions, extra, world.heldout
    )


def _heldout_easiness(own: Any, realism: Realism, n: int, rng: np.random.Generator) -> np.ndarray:
    """Difficulty offsets of ``n`` held-out tasks: the realism's draw, or a resample of the landscape's own."""
    if n <= 0:
        return np.zeros(0)
    if own is not None:
        return np.asarray(own)[rng.integers(len(own), size=n)]
    return realism.task_easiness(n, rng)


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def _is_free(job: Evaluate, realism: Realism) -> bool:
    return realism.seed_free and job.agent_id == "a0"


def cmp_correlations(tree: SearchTree, min_trials: int = 3) -> tuple[float, float, int]:
    """Weighted correlations with the best empirical descendant mean (HGM, Appendix D).

    For every agent with descendants in at least two child subtrees: the target is the highest own mean
    (over >= ``min_trials`` evaluations) among its descendants; the clade predictor pools the other
    child subtrees (the one holding that best descendant is left out, so the target does not leak in);
    the baseline predictor is the agent's own mean. Weights: evaluations in the pooled subtrees.
    Returns (clade correlation, own-score correlation, number of agents used).
    """
    n = tree.view("own_n")
    mean = np.divide(tree.view("own_s"), n, out=np.zeros(len(n)), where=n > 0)
    rows: list[tuple[float, float, float, float]] = []
    for v in range(len(tree)):
        kids = tree.children[v]
        if len(kids) < 2 or n[v] < min_trials:
            continue
        best, best_kid = -1.0, -1
        for k in kids:
            stack = [k]
            while stack:
                d = stack.pop()
                if n[d] >= min_trials and mean[d] > best:
                    best, best_kid = float(mean[d]), k
                stack.extend(tree.children[d])
        others = [k for k in kids if k != best_kid]
        pooled_n = float(sum(tree.clade_n[k] for k in others))
        if best_kid < 0 or pooled_n == 0:
            continue
        pooled = float(sum(tree.clade_s[k] for k in others)) / pooled_n
        rows.append((best, pooled, float(mean[v]), pooled_n))
    if len(rows) < 3:
        return float("nan"), float("nan"), len(rows)
    arr = np.array(rows)
    return _wcorr(arr[:, 0], arr[:, 1], arr[:, 3]), _wcorr(arr[:, 0], arr[:, 2], arr[:, 3]), len(rows)


def _wcorr(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    w = w / w.sum()
    mx, my = float(np.sum(w * x)), float(np.sum(w * y))
    cov = float(np.sum(w * (x - mx) * (y - my)))
    sx, sy = np.sqrt(float(np.sum(w * (x - mx) ** 2))), np.sqrt(float(np.sum(w * (y - my) ** 2)))
    return cov / (sx * sy) if sx > 0 and sy > 0 else float("nan")
