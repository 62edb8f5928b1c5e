"""Final selection: which agent the study believes is best.

``lower_percentile`` (the HGM best-belief agent): the highest epsilon-quantile of the posterior
Beta(1 + successes, 1 + failures) of the agent's own results, among agents with at least ``min_trials``
evaluations (if none has that many, among those with the most). It prefers a 7/8 agent over a lucky 1/1.
``mean`` is the baseline DGM and SICA use: the highest empirical mean.
Ties go to more trials, then to the older agent. An agent with any flagged evaluation is never selected
(see cmp.py): a forged score must not become the study's answer, however good it looks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import betaincinv

from metasearch.schedulers.cmp import SearchTree


@dataclass(frozen=True)
class AgentStats:
    mean: float
    trials: int
    lower_bound: float


def lower_bounds(successes: np.ndarray, trials: np.ndarray, epsilon: float) -> np.ndarray:
    return np.asarray(betaincinv(1.0 + successes, 1.0 + trials - successes, epsilon), dtype=np.float64)


def select_final(
    tree: SearchTree, *, method: str = "lower_percentile", epsilon: float = 0.01, min_trials: int = 3
) -> str | None:
    n = np.where(tree.view("flagged") > 0, 0.0, tree.view("own_n"))
    if len(n) == 0 or n.max() == 0:
        return None
    floor = min(min_trials, int(n.max()))
    candidates = np.flatnonzero(n >= max(floor, 1))
    s = tree.view("own_s")[candidates]
    trials = n[candidates]
    stat = lower_bounds(s, trials, epsilon) if method == "lower_percentile" else s / trials
    # lexsort: last key is primary -> stat desc, trials desc, index asc
    order = np.lexsort((candidates, -trials, -stat))
    return tree.ids[int(candidates[order[0]])]


def agent_stats(tree: SearchTree, agent_id: str, *, epsilon: float = 0.01) -> AgentStats:
    s, n = tree.own(agent_id)
    if n == 0:
        return AgentStats(mean=0.0, trials=0, lower_bound=0.0)
    lb = float(lower_bounds(np.array([s]), np.array([float(n)]), epsilon)[0])
    return AgentStats(mean=s / n, trials=n, lower_bound=lb)
