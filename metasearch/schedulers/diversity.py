"""Per-task diversity of an archive: how an agent's results differ from the others', and who is on the front.

Both read the per-task scores a ``SearchTree`` keeps (``scores``: task -> counted score) and compare two
agents only on the tasks both have a result for. Used by ``hgm``'s ``novelty`` and ``pareto_parents``, and
by ``gea`` (``cosine_novelty``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from metasearch.schedulers.cmp import SearchTree


def score_matrix(tree: SearchTree, tasks: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(scores, has): agents x tasks, ``has`` true where the agent has a result on the task."""
    col = {t: k for k, t in enumerate(tasks)}
    scores = np.zeros((len(tree), len(tasks)))
    has = np.zeros((len(tree), len(tasks)), dtype=bool)
    for i, row in enumerate(tree.scores):
        for task, score in row.items():
            k = col.get(task)
            if k is not None:
                scores[i, k], has[i, k] = score, True
    return scores, has


def novelty(tree: SearchTree, tasks: Sequence[str], candidates: np.ndarray) -> np.ndarray:
    """Per candidate: the mean, over other agents sharing at least one task with it, of the mean absolute
    difference of their scores on the shared tasks; 0 when it shares no task with anyone."""
    scores, has = score_matrix(tree, tasks)
    s, h = scores[candidates][:, None, :], has[candidates][:, None, :]
    both = h & has[None, :, :]  # candidates x agents x tasks
    shared = both.sum(axis=2)
    shared[np.arange(len(candidates)), candidates] = 0  # not against itself
    diff = np.where(both, np.abs(s - scores[None, :, :]), 0.0).sum(axis=2)
    dist = np.divide(diff, shared, out=np.zeros(shared.shape), where=shared > 0)
    others = (shared > 0).sum(axis=1)
    return np.divide(dist.sum(axis=1), others, out=np.zeros(len(candidates)), where=others > 0)


def cosine_novelty(
    tree: SearchTree, tasks: Sequence[str], candidates: np.ndarray, neighbours: int
) -> np.ndarray:
    """GEA's novelty among ``candidates``: the mean cosine distance 1 - z_i.z_j / (|z_i| |z_j| + 1e-8)
    of per-task score vectors, restricted to the tasks both have a result for, to the ``neighbours`` most
    similar other candidates sharing a task; 1 for a candidate that shares no task with any other."""
    scores, has = score_matrix(tree, tasks)
    z, h = scores[candidates], has[candidates]
    both = h[:, None, :] & h[None, :, :]  # candidates x candidates x tasks
    zi, zj = np.where(both, z[:, None, :], 0.0), np.where(both, z[None, :, :], 0.0)
    dot = (zi * zj).sum(axis=2)
    norms = np.sqrt((zi * zi).sum(axis=2)) * np.sqrt((zj * zj).sum(axis=2))
    dist = 1.0 - dot / (norms + 1e-8)
    valid = both.any(axis=2)
    np.fill_diagonal(valid, False)
    dist = np.where(valid, dist, np.inf)
    nearest = np.sort(dist, axis=1)[:, :neighbours]
    counted = np.isfinite(nearest)
    total = np.where(counted, nearest, 0.0).sum(axis=1)
    k = counted.sum(axis=1)
    return np.divide(total, k, out=np.ones(len(candidates)), where=k > 0)


def pareto_front(tree: SearchTree, tasks: Sequence[str], candidates: np.ndarray) -> np.ndarray:
    """The candidates no other agent with results dominates: at least as good on every task both have a
    result for, and better on one. Compared against the whole archive, not only the candidates."""
    scores, has = score_matrix(tree, tasks)
    s, h = scores[candidates][:, None, :], has[candidates][:, None, :]
    both = h & has[None, :, :]
    geq = np.where(both, scores[None, :, :] >= s, True).all(axis=2)
    gt = (both & (scores[None, :, :] > s)).any(axis=2)
    dominated = (geq & gt).any(axis=1)  # an agent is never > itself, so no self-domination
    return candidates[~dominated]
