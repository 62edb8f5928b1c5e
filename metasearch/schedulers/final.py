"""Final selection: which agent the study believes is best.

``lower_percentile`` (the HGM best-belief agent): the highest epsilon-quantile of the posterior
Beta(1 + successes, 1 + failures) of the agent's own results, among agents with at least ``min_trials``
evaluations (if none has that many, among those with the most). It prefers a 7/8 agent over a lucky 1/1.
``mean`` is the baseline DGM and SICA use: the highest empirical mean.
Two rules borrow strength from the tree (measured in docs/benchmarks.md, neither is a default):
``clade_prior`` takes the same quantile of a posterior whose prior is the mean of the parent's clade
without the agent's own subtree (its parent, siblings and their descendants; the archive's mean for a
seed), worth ``prior_trials`` evaluations, so a child with few results is judged near its family;
``clade_top_k`` takes the ``top_k`` agents by the lower percentile and picks the one whose own clade
(itself and its descendants) has the highest mean.
Ties go to more trials, then to the older agent. An agent with any flagged evaluation is never selected
(see cmp.py): a forged score must not become the study's answer, however good it looks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
from scipy.special import betaincinv

from metasearch.schedulers.cmp import SearchTree

FinalMethod = Literal["lower_percentile", "mean", "clade_prior", "clade_top_k"]
METHODS: tuple[str, ...] = get_args(FinalMethod)


@dataclass(frozen=True)
class AgentStats:
    mean: float
    trials: int
    lower_bound: float


def lower_bounds(successes: np.ndarray, trials: np.ndarray, epsilon: float) -> np.ndarray:
    return np.asarray(betaincinv(1.0 + successes, 1.0 + trials - successes, epsilon), dtype=np.float64)


def select_final(
    tree: SearchTree,
    *,
    method: str = "lower_percentile",
    epsilon: float = 0.01,
    min_trials: int = 3,
    prior_trials: float = 10.0,
    top_k: int = 5,
) -> str | None:
    if method not in METHODS:
        raise ValueError(f"final: unknown method {method!r}; allowed: {', '.join(METHODS)}")
    n = np.where(tree.view("flagged") > 0, 0.0, tree.view("own_n"))
    if len(n) == 0 or n.max() == 0:
        return None
    floor = min(min_trials, int(n.max()))
    candidates = np.flatnonzero(n >= max(floor, 1))
    s = tree.view("own_s")[candidates]
    trials = n[candidates]
    if method == "mean":
        stat = s / trials
    elif method == "clade_prior":
        prior = prior_trials * _family_means(tree, candidates)
        stat = lower_bounds(s + prior, trials + prior_trials, epsilon)
    else:
        stat = lower_bounds(s, trials, epsilon)
    if method == "clade_top_k":
        top = np.lexsort((candidates, -trials, -stat))[:top_k]
        candidates, trials = candidates[top], trials[top]
        stat = tree.view("clade_s")[candidates] / tree.view("clade_n")[candidates]
    # lexsort: last key is primary -> stat desc, trials desc, index asc
    order = np.lexsort((candidates, -trials, -stat))
    return tree.ids[int(candidates[order[0]])]


def _family_means(tree: SearchTree, agents: np.ndarray) -> np.ndarray:
    """Per agent: the mean of its parent's clade without the agent's subtree; the tree's mean for a seed
    or where that leaves no result."""
    parent = tree.view("parent")[agents]
    cs, cn = tree.view("clade_s"), tree.view("clade_n")
    roots = tree.view("parent") < 0
    overall = float(cs[roots].sum() / cn[roots].sum()) if cn[roots].sum() > 0 else 0.5
    p = np.maximum(parent, 0)
    s, n = cs[p] - cs[agents], cn[p] - cn[agents]
    return np.where((parent >= 0) & (n > 0), s / np.maximum(n, 1e-12), overall)


def agent_stats(tree: SearchTree, agent_id: str, *, epsilon: float = 0.01) -> AgentStats:
    s, n = tree.own(agent_id)
    if n == 0:
        return AgentStats(mean=0.0, trials=0, lower_bound=0.0)
    lb = float(lower_bounds(np.array([s]), np.array([float(n)]), epsilon)[0])
    return AgentStats(mean=s / n, trials=n, lower_bound=lb)
