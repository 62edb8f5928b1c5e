"""An event-driven simulation of W asynchronous workers running any scheduler unchanged.

The scheduler sees exactly what it sees in a real study: a SearchTree with reservations, pending
expansions and results, and a SearchState with the budget and usage. Evaluations are Bernoulli draws
of the design's true quality; expansions call ``landscape.child``. Time advances to the next finishing
job; a freed worker immediately asks for the next job.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from metasearch.schedulers.base import Scheduler, SearchState
from metasearch.schedulers.cmp import SearchTree
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

    @property
    def final_quality(self) -> float:
        return self.truth[self.final] if self.final else 0.0

    @property
    def best_quality(self) -> float:
        return max(self.truth.values())


def _duration(landscape: Any, kind: str, rng: np.random.Generator) -> float:
    fn = getattr(landscape, f"{kind}_duration", None)
    return float(fn(rng)) if callable(fn) else float(rng.exponential(5.0 if kind == "expansion" else 1.0))


def simulate(
    landscape: Any, scheduler: Scheduler, *, budget: int, workers: int, n_tasks: int, seed: int
) -> SimResult:
    world = np.random.default_rng([seed, 1])  # the landscape's randomness: identical across schedulers
    decide = np.random.default_rng([seed, 2])  # the scheduler's randomness
    tasks = tuple(f"t{i}" for i in range(n_tasks))
    tree = SearchTree()
    states = {"a0": landscape.root(world)}
    truth = {"a0": float(landscape.quality(states["a0"]))}
    tree.add_agent("a0", None)
    events: list[tuple[float, int, Job, Any]] = []
    seq = evaluations = expansions = failed = decisions = 0
    exp_in_flight = eval_in_flight = 0
    now = 0.0
    budget_obj = Budget(evaluations=budget)
    while True:
        while exp_in_flight + eval_in_flight < workers and evaluations < budget:
            state = SearchState(
                tree,
                tasks,
                budget_obj,
                Usage(evaluations, expansions),
                exp_in_flight,
                eval_in_flight,
                workers,
            )
            job = scheduler.next_job(state, decide)
            decisions += 1
            if job is None:
                break
            seq += 1
            if isinstance(job, Evaluate):
                tree.reserve(job.agent_id, job.task_id)
                outcome: Any = float(world.random() < truth[job.agent_id])
                evaluations += 1
                eval_in_flight += 1
                heapq.heappush(events, (now + _duration(landscape, "evaluation", world), seq, job, outcome))
            else:
                tree.expansion_started(job.parent_id)
                outcome = landscape.child(states[job.parent_id], world)
                expansions += 1
                exp_in_flight += 1
                heapq.heappush(events, (now + _duration(landscape, "expansion", world), seq, job, outcome))
        if not events:
            break
        now, _, job, outcome = heapq.heappop(events)
        if isinstance(job, Evaluate):
            eval_in_flight -= 1
            tree.add_result(job.agent_id, job.task_id, outcome)
        else:
            assert isinstance(job, Expand)
            exp_in_flight -= 1
            tree.expansion_finished(job.parent_id, failed=outcome is None)
            if outcome is None:
                failed += 1
            else:
                agent_id = f"a{len(tree)}"
                tree.add_agent(agent_id, job.parent_id)
                states[agent_id] = outcome
                truth[agent_id] = float(landscape.quality(outcome))
    final = scheduler.select_final(SearchState(tree, tasks, budget_obj, Usage(evaluations, expansions), 0, 0))
    return SimResult(tree, truth, final, evaluations, expansions, failed, decisions)


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
