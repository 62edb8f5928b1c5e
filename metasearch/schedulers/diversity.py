"""Per-task diversity of an archive: how an agent's results differ from the others', and who is on the front.

All read the per-task scores a ``SearchTree`` keeps (``task_matrix``: agents x tasks, counted score and
whether there is one) and compare two agents only on the tasks both have a result for. Used by ``hgm``'s
``novelty`` and ``pareto_parents``, and by ``gea`` (``cosine_novelty``).

``novelty`` and ``pareto_front`` are exact: they compare each candidate with every agent (with every agent
that has a result once the tree has more than ``SAMPLE`` agents: the others share no task and count for
nothing). They cost candidates x agents x tasks, so ``hgm`` calls them only while at most ``SAMPLE`` agents
have results, and otherwise ``choose_at_scale``, whose work per decision is bounded (its docstring has
the rule). With scores all 0 or 1, the pair counts come from bit sets of tasks (64 to a word) and their
popcounts, the same integers as the elementwise sums; other scores take the elementwise route, in chunks
that bound memory.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from metasearch.schedulers.cmp import SearchTree

SAMPLE = 256
"""M: above this many agents with results, a decision compares candidates with a random sample of M of them."""
CANDIDATES = 64
"""K: above ``SAMPLE`` agents with results, a decision considers at most this many candidates (the
highest Thompson draws)."""
_CHUNK = 1 << 21  # elements of one candidates x agents x tasks block on the elementwise route


def score_matrix(tree: SearchTree, tasks: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(scores, has): agents x tasks, ``has`` true where the agent has a result on the task."""
    return tree.task_matrix(np.arange(len(tree)), tasks)


def compared(tree: SearchTree) -> np.ndarray:
    """The agents exact comparisons run against: all of them in a tree of at most ``SAMPLE`` agents, else
    those with a finished evaluation (an agent without one shares no task with anybody)."""
    if len(tree) <= SAMPLE:
        return np.arange(len(tree))
    return np.flatnonzero(tree.view("own_n") > 0)


def at_scale(tree: SearchTree) -> bool:
    """More than ``SAMPLE`` agents have a finished evaluation: decisions sample (``choose_at_scale``)."""
    return int(np.count_nonzero(tree.view("own_n") > 0)) > SAMPLE


def novelty(
    tree: SearchTree, tasks: Sequence[str], candidates: np.ndarray, rows: np.ndarray | None = None
) -> np.ndarray:
    """Per candidate: the mean, over other agents sharing at least one task with it, of the mean absolute
    difference of their scores on the shared tasks; 0 when it shares no task with anyone. The other agents
    are ``rows`` (default ``compared(tree)``)."""
    rows = compared(tree) if rows is None else rows
    ss, hs = tree.task_matrix(rows, tasks)
    sc, hc = tree.task_matrix(candidates, tasks)
    out = np.zeros(len(candidates))
    for part in _chunks(len(candidates), len(rows) * len(tasks)):
        out[part] = _novelty(sc[part], hc[part], ss, hs, candidates[part, None] == rows[None, :])
    return out


def pareto_front(
    tree: SearchTree, tasks: Sequence[str], candidates: np.ndarray, rows: np.ndarray | None = None
) -> np.ndarray:
    """The candidates no other agent with results dominates: at least as good on every task both have a
    result for, and better on one. Compared against the whole archive (``rows``, default
    ``compared(tree)``), not only the candidates."""
    rows = compared(tree) if rows is None else rows
    ss, hs = tree.task_matrix(rows, tasks)
    sc, hc = tree.task_matrix(candidates, tasks)
    dominated = np.zeros(len(candidates), dtype=bool)
    for part in _chunks(len(candidates), len(rows) * len(tasks)):
        dominated[part] = _dominated(sc[part], hc[part], ss, hs)
    return candidates[~dominated]


def choose_at_scale(
    tree: SearchTree,
    tasks: Sequence[str],
    parents: np.ndarray,
    draws: np.ndarray,
    novelty_weight: float,
    pareto: bool,
    rng: np.random.Generator,
) -> int:
    """The position in ``parents`` of the parent to expand, for an archive with more than ``SAMPLE``
    agents with results, given each parent's Thompson draw. The sampling rule:

    * Only the ``CANDIDATES`` (K = 64) highest draws are considered (ties to the earlier parent).
    * They are compared with a random sample, drawn with ``rng`` (so a seeded run repeats), of ``SAMPLE``
      (M = 256) agents with a finished evaluation, in place of the whole archive; a candidate drawn into
      the sample is not compared with itself.
    * ``pareto``: the considered candidates that no sampled agent dominates stay (all K if none does).
    * ``novelty_weight`` > 0: a distance is at most 1, so only candidates whose draw is within
      ``novelty_weight`` of the highest one left can still win; those get their novelty against the sample
      and the highest draw + novelty_weight x novelty wins. Otherwise the highest draw left wins.

    Below the threshold the exact rule (``novelty``, ``pareto_front`` over the archive) decides; the
    result is the same rule evaluated on a sample, for at most K x M pairs per decision.
    """
    order = _top(draws, CANDIDATES)
    pool = np.flatnonzero(tree.view("own_n") > 0)
    sample = rng.choice(pool, size=min(SAMPLE, len(pool)), replace=False)
    ss, hs = tree.task_matrix(sample, tasks)
    sc, hc = tree.task_matrix(parents[order], tasks)
    if pareto:
        keep = ~_dominated(sc, hc, ss, hs)
        if keep.any():
            order, sc, hc = order[keep], sc[keep], hc[keep]
    if novelty_weight <= 0:
        return int(order[0])
    near = draws[order] >= draws[order[0]] - novelty_weight  # a prefix: order is by draw, highest first
    order, sc, hc = order[near], sc[near], hc[near]
    itself = parents[order][:, None] == sample[None, :]
    bonus = novelty_weight * _novelty(sc, hc, ss, hs, itself)
    return int(order[int(np.argmax(draws[order] + bonus))])


def cosine_novelty(
    tree: SearchTree, tasks: Sequence[str], candidates: np.ndarray, neighbours: int
) -> np.ndarray:
    """GEA's novelty among ``candidates``: the mean cosine distance 1 - z_i.z_j / (|z_i| |z_j| + 1e-8)
    of per-task score vectors, restricted to the tasks both have a result for, to the ``neighbours`` most
    similar other candidates sharing a task; 1 for a candidate that shares no task with any other.

    Exact, and quadratic in the candidates by definition (nearest neighbours in the whole group); rows
    are done in chunks that bound memory, and 0/1 scores take the bit-set route."""
    z, h = tree.task_matrix(candidates, tasks)
    n = len(candidates)
    out = np.ones(n)
    for part in _chunks(n, n * len(tasks)):
        dist, valid = _cosine(z[part], h[part], z, h)
        rows = np.arange(n)[part]
        valid[np.arange(len(rows)), rows] = False  # not against itself
        dist = np.where(valid, dist, np.inf)
        k = min(neighbours, n)
        nearest = np.sort(np.partition(dist, k - 1, axis=1)[:, :k] if k < n else dist, axis=1)
        counted = np.isfinite(nearest)
        total = np.where(counted, nearest, 0.0).sum(axis=1)
        found = counted.sum(axis=1)
        out[part] = np.divide(total, found, out=np.ones(len(rows)), where=found > 0)
    return out


# -- kernels: candidates (sc, hc) against agents (ss, hs), each a scores / has matrix over the same tasks --


def _novelty(
    sc: np.ndarray, hc: np.ndarray, ss: np.ndarray, hs: np.ndarray, itself: np.ndarray
) -> np.ndarray:
    """``novelty`` of each candidate row against the agent rows; ``itself`` (candidates x agents) marks
    the pairs of an agent with itself, which do not count."""
    if _binary(sc, ss):  # bit sets of tasks: shared = |has & has|, diff = |(solved ^ solved) & shared|
        (hbc, sbc), (hbs, sbs) = _bitsets(sc, hc), _bitsets(ss, hs)
        both = hbc[:, None, :] & hbs[None, :, :]
        shared = _popcount(both)
        diff = _popcount((sbc[:, None, :] ^ sbs[None, :, :]) & both)
    else:
        both3 = hc[:, None, :] & hs[None, :, :]  # candidates x agents x tasks
        shared = both3.sum(axis=2)
        diff = np.where(both3, np.abs(sc[:, None, :] - ss[None, :, :]), 0.0).sum(axis=2)
    shared[itself] = 0
    dist = diff / np.maximum(shared, 1)  # diff is 0 where nothing is shared (an agent and itself included)
    others = (shared > 0).sum(axis=1)
    return np.divide(dist.sum(axis=1), others, out=np.zeros(len(sc)), where=others > 0)


def _dominated(sc: np.ndarray, hc: np.ndarray, ss: np.ndarray, hs: np.ndarray) -> np.ndarray:
    """Per candidate row: some agent row is >= on every shared task and > on one (never the row itself)."""
    if _binary(sc, ss):
        (hbc, sbc), (hbs, sbs) = _bitsets(sc, hc), _bitsets(ss, hs)
        worse = _popcount(sbc[:, None, :] & (hbs & ~sbs)[None, :, :])  # shared: candidate 1, agent 0
        better = _popcount((hbc & ~sbc)[:, None, :] & sbs[None, :, :])  # shared: candidate 0, agent 1
        return np.asarray(((worse == 0) & (better > 0)).any(axis=1))
    both = hc[:, None, :] & hs[None, :, :]
    geq = np.where(both, ss[None, :, :] >= sc[:, None, :], True).all(axis=2)
    gt = (both & (ss[None, :, :] > sc[:, None, :])).any(axis=2)
    return np.asarray((geq & gt).any(axis=1))


def _cosine(zc: np.ndarray, hc: np.ndarray, za: np.ndarray, ha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cosine distance of each candidate row to each agent row on their shared tasks, and whether they
    share one (candidates x agents each)."""
    if _binary(zc, za):  # on shared tasks: z_i.z_j = |S_i & S_j|, |z_i| ** 2 = |S_i & H_j|
        (hbc, sbc), (hba, sba) = _bitsets(zc, hc), _bitsets(za, ha)
        dot = _popcount(sbc[:, None, :] & sba[None, :, :])
        norms = np.sqrt(_popcount(sbc[:, None, :] & hba[None, :, :]).astype(np.float64)) * np.sqrt(
            _popcount(hbc[:, None, :] & sba[None, :, :]).astype(np.float64)
        )
        valid = _popcount(hbc[:, None, :] & hba[None, :, :]) > 0
    else:
        both = hc[:, None, :] & ha[None, :, :]  # candidates x agents x tasks
        zi, zj = np.where(both, zc[:, None, :], 0.0), np.where(both, za[None, :, :], 0.0)
        dot = (zi * zj).sum(axis=2)
        norms = np.sqrt((zi * zi).sum(axis=2)) * np.sqrt((zj * zj).sum(axis=2))
        valid = both.any(axis=2)
    return 1.0 - dot / (norms + 1e-8), valid


def _binary(*scores: np.ndarray) -> bool:
    """Every score 0 or 1 (where there is no result the matrices hold 0): the bit-set route is exact."""
    return all(bool(((s == 0) | (s == 1)).all()) for s in scores)


def _bitsets(scores: np.ndarray, has: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """0/1 score rows as two bit sets of tasks per row: those with a result, those solved."""
    return _bits(has), _bits(scores == 1)


def _bits(mask: np.ndarray) -> np.ndarray:
    """rows x tasks booleans as rows x words of 64 bits."""
    words = max(1, -(-mask.shape[1] // 64))
    padded = np.zeros((mask.shape[0], 64 * words), dtype=bool)
    padded[:, : mask.shape[1]] = mask
    return np.packbits(padded, axis=1, bitorder="little").view(np.uint64)


_BYTE_BITS = np.array([bin(b).count("1") for b in range(256)], dtype=np.int64)


def _popcount(words: np.ndarray) -> np.ndarray:
    """Set bits of ... x words uint64, summed over the last axis (int64)."""
    if hasattr(np, "bitwise_count"):  # numpy >= 2.0
        counts = np.bitwise_count(words)
        return (
            counts[..., 0].astype(np.int64) if words.shape[-1] == 1 else counts.sum(axis=-1, dtype=np.int64)
        )
    as_bytes = np.ascontiguousarray(words).view(np.uint8)
    return np.asarray(_BYTE_BITS[as_bytes].sum(axis=-1))


def _chunks(n: int, per_candidate: int) -> Iterator[slice]:
    step = max(1, _CHUNK // max(1, per_candidate))
    for start in range(0, n, step):
        yield slice(start, start + step)


def _top(draws: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` highest draws, highest first, ties to the earlier position."""
    idx = np.arange(len(draws)) if len(draws) <= k else np.argpartition(-draws, k - 1)[:k]
    return idx[np.lexsort((idx, -draws[idx]))]
