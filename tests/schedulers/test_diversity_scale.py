"""The diversity options at scale: exact (and unchanged) on small archives, bounded work on large ones.

``reference_*`` are the exact functions as they were before the options learned to scale (a Python loop
over every agent's scores, candidates x agents x tasks arrays); small archives must give the same numbers,
bit for bit, and the same parent picks from the same generator.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import pytest

from metasearch.registry import SCHEDULERS
from metasearch.schedulers import diversity
from metasearch.schedulers.base import SearchState, thompson_argmax
from metasearch.schedulers.cmp import SearchTree
from metasearch.types import Budget, Usage

TASKS = tuple(f"t{i}" for i in range(12))


# -- the exact functions before this change (the reference) ----------------------------------------


def reference_score_matrix(tree: SearchTree, tasks: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    col = {t: k for k, t in enumerate(tasks)}
    scores = np.zeros((len(tree), len(tasks)))
    has = np.zeros((len(tree), len(tasks)), dtype=bool)
    for i, row in enumerate(tree.scores):
        for task, score in row.items():
            k = col.get(task)
            if k is not None:
                scores[i, k], has[i, k] = score, True
    return scores, has


def reference_novelty(tree: SearchTree, tasks: Sequence[str], candidates: np.ndarray) -> np.ndarray:
    scores, has = reference_score_matrix(tree, tasks)
    s, h = scores[candidates][:, None, :], has[candidates][:, None, :]
    both = h & has[None, :, :]
    shared = both.sum(axis=2)
    shared[np.arange(len(candidates)), candidates] = 0
    diff = np.where(both, np.abs(s - scores[None, :, :]), 0.0).sum(axis=2)
    dist = np.divide(diff, shared, out=np.zeros(shared.shape), where=shared > 0)
    others = (shared > 0).sum(axis=1)
    return np.divide(dist.sum(axis=1), others, out=np.zeros(len(candidates)), where=others > 0)


def reference_pareto_front(tree: SearchTree, tasks: Sequence[str], candidates: np.ndarray) -> np.ndarray:
    scores, has = reference_score_matrix(tree, tasks)
    s, h = scores[candidates][:, None, :], has[candidates][:, None, :]
    both = h & has[None, :, :]
    geq = np.where(both, scores[None, :, :] >= s, True).all(axis=2)
    gt = (both & (scores[None, :, :] > s)).any(axis=2)
    return candidates[~(geq & gt).any(axis=1)]


def reference_cosine_novelty(
    tree: SearchTree, tasks: Sequence[str], candidates: np.ndarray, neighbours: int
) -> np.ndarray:
    scores, has = reference_score_matrix(tree, tasks)
    z, h = scores[candidates], has[candidates]
    both = h[:, None, :] & h[None, :, :]
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


def reference_choose_parent(
    config: object, state: SearchState, parents: np.ndarray, rng: np.random.Generator
) -> int:
    """``HGMScheduler.choose_parent`` before this change, on the reference functions."""
    tree, cfg = state.tree, config
    if cfg.pareto_parents:  # type: ignore[attr-defined]
        front = reference_pareto_front(tree, state.tasks, parents)
        parents = front if len(front) else parents
    s = tree.view("clade_s")[parents]
    f = tree.view("clade_n")[parents] - s
    tau = 1.0  # cool_down off below
    if cfg.novelty <= 0:  # type: ignore[attr-defined]
        return int(parents[thompson_argmax(s, f, rng, tau)])
    draws = rng.beta(tau * (1.0 + s), tau * (1.0 + f))
    draws = draws + cfg.novelty * reference_novelty(tree, state.tasks, parents)  # type: ignore[attr-defined]
    return int(parents[int(np.argmax(draws))])


# -- trees --------------------------------------------------------------------------------------------


def random_tree(
    n: int, rng: np.random.Generator, tasks: Sequence[str] = TASKS, fractional: bool = False, most: int = 8
) -> SearchTree:
    """A random recursive tree; each agent has results on 0 to ``most`` tasks (some none, some flagged)."""
    tree = SearchTree(capacity=4)
    tree.add_agent("a0", None)
    for i in range(1, n):
        tree.add_agent(f"a{i}", f"a{int(rng.integers(0, i))}")
    rate = rng.random(n)
    for i in rng.permutation(np.repeat(np.arange(n), rng.integers(0, most + 1, n))):
        task = tasks[int(rng.integers(len(tasks)))]  # repeats happen: the latest score counts
        score = float(rng.random()) if fractional and rng.random() < 0.5 else float(rng.random() < rate[i])
        tree.add_result(f"a{i}", task, score, flags=("tampered",) if rng.random() < 0.02 else ())
    return tree


def state(tree: SearchTree, tasks: Sequence[str] = TASKS, used: int = 10**8) -> SearchState:
    return SearchState(tree, tuple(tasks), Budget(evaluations=10**9), Usage(used, 0), 0, 0)


def make(**options: object) -> object:
    cls = SCHEDULERS.resolve("hgm")
    return cls(cls.Config(**{"cool_down": False, **options}))


# -- small archives: the exact computation, unchanged ---------------------------------------------------


@pytest.mark.parametrize("fractional", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_small_archives_give_the_old_numbers_bit_for_bit(seed: int, fractional: bool) -> None:
    rng = np.random.default_rng(seed)
    tree = random_tree(int(rng.integers(2, diversity.SAMPLE + 1)), rng, fractional=fractional)
    tasks = (*TASKS[:10], "never-run")  # a task nobody has a result on; t10, t11 are left out
    everyone = np.arange(len(tree))
    some = np.sort(rng.choice(len(tree), size=max(1, len(tree) // 3), replace=False))
    for candidates in (everyone, some):
        assert np.array_equal(
            diversity.novelty(tree, tasks, candidates), reference_novelty(tree, tasks, candidates)
        )
        assert np.array_equal(
            diversity.pareto_front(tree, tasks, candidates), reference_pareto_front(tree, tasks, candidates)
        )
        for k in (1, 4):
            assert np.array_equal(
                diversity.cosine_novelty(tree, tasks, candidates, k),
                reference_cosine_novelty(tree, tasks, candidates, k),
            )
    scores, has = diversity.score_matrix(tree, tasks)
    ref_scores, ref_has = reference_score_matrix(tree, tasks)
    assert np.array_equal(scores, ref_scores) and np.array_equal(has, ref_has)


@pytest.mark.parametrize(
    "options", [{"novelty": 0.5}, {"pareto_parents": True}, {"novelty": 0.2, "pareto_parents": True}]
)
def test_small_archives_pick_the_same_parents_from_the_same_generator(options: dict[str, object]) -> None:
    for seed in range(4):
        tree = random_tree(120, np.random.default_rng(seed))
        scheduler = make(**options)
        parents = scheduler.eligible_parents(state(tree))  # type: ignore[attr-defined]
        new, old = np.random.default_rng(seed), np.random.default_rng(seed)
        for _ in range(30):
            got = scheduler.choose_parent(state(tree), parents, new)  # type: ignore[attr-defined]
            assert got == reference_choose_parent(scheduler.config, state(tree), parents, old)  # type: ignore[attr-defined]


def test_a_big_tree_with_few_results_is_compared_exactly_with_those_that_have_one() -> None:
    rng = np.random.default_rng(1)
    tree = random_tree(100, rng)
    for i in range(100, 100 + 2 * diversity.SAMPLE):  # many agents without a result: still exact
        tree.add_agent(f"a{i}", "a0")
    assert not diversity.at_scale(tree)
    candidates = np.flatnonzero(tree.view("own_n") > 0)
    assert np.allclose(diversity.novelty(tree, TASKS, candidates), reference_novelty(tree, TASKS, candidates))
    assert np.array_equal(
        diversity.pareto_front(tree, TASKS, candidates), reference_pareto_front(tree, TASKS, candidates)
    )


def test_the_bit_set_route_matches_the_elementwise_one_past_64_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    tasks = tuple(f"t{i}" for i in range(130))  # three 64-bit words
    tree = random_tree(150, np.random.default_rng(3), tasks=tasks, most=60)
    everyone = np.arange(len(tree))

    def check() -> None:
        assert np.array_equal(
            diversity.novelty(tree, tasks, everyone), reference_novelty(tree, tasks, everyone)
        )
        assert np.array_equal(
            diversity.pareto_front(tree, tasks, everyone), reference_pareto_front(tree, tasks, everyone)
        )
        assert np.array_equal(
            diversity.cosine_novelty(tree, tasks, everyone, 4),
            reference_cosine_novelty(tree, tasks, everyone, 4),
        )

    check()
    monkeypatch.delattr(np, "bitwise_count", raising=False)  # numpy < 2: the byte-table popcount
    check()


def test_the_tree_keeps_its_score_matrices_when_replayed() -> None:
    incremental = random_tree(80, np.random.default_rng(4))
    agents = [
        (incremental.ids[i], None if incremental.parent[i] < 0 else incremental.ids[incremental.parent[i]])
        for i in range(80)
    ]
    results = [
        (a, t, s) for a, row in zip(incremental.ids, incremental.scores, strict=True) for t, s in row.items()
    ]
    replayed = SearchTree.replayed(agents, results)
    rows = np.arange(80)
    for got, want in zip(
        replayed.task_matrix(rows, TASKS), incremental.task_matrix(rows, TASKS), strict=True
    ):
        assert np.array_equal(got, want)


# -- large archives: bounded work, the sampling rule --------------------------------------------------


def test_the_options_decide_on_a_20000_agent_tree_in_well_under_a_second() -> None:
    rng = np.random.default_rng(5)
    tasks = tuple(f"t{i}" for i in range(60))
    tree = random_tree(20_000, rng, tasks=tasks, most=10)
    assert diversity.at_scale(tree)
    for options in ({"novelty": 0.2}, {"pareto_parents": True}, {"novelty": 0.2, "pareto_parents": True}):
        scheduler = make(**options)
        parents = scheduler.eligible_parents(state(tree, tasks))  # type: ignore[attr-defined]
        for _ in range(3):
            start = time.perf_counter()
            pick = scheduler.choose_parent(state(tree, tasks), parents, rng)  # type: ignore[attr-defined]
            assert (
                time.perf_counter() - start < 2.0
            )  # was minutes and tens of GB: the point is it no longer explodes
            assert pick in set(parents.tolist())
        picks = [
            scheduler.choose_parent(state(tree, tasks), parents, np.random.default_rng(9))  # type: ignore[attr-defined]
            for _ in range(2)
        ]
        assert picks[0] == picks[1]  # the sample comes from the decision's generator: a seeded run repeats


def wide_tree(n: int, root: list[float], others: list[float], odd: list[float] | None = None) -> SearchTree:
    """A root and ``n`` children under it; the root scores ``root``, the children ``others`` (the last
    one ``odd`` if given), on t0, t1, ..."""
    tree = SearchTree()
    tree.add_agent("root", None)
    for task, score in zip(TASKS, root, strict=False):
        tree.add_result("root", task, score)
    for i in range(n):
        tree.add_agent(f"c{i}", "root")
        row = odd if odd is not None and i == n - 1 else others
        for task, score in zip(TASKS, row, strict=False):
            tree.add_result(f"c{i}", task, score)
    return tree


def picks(scheduler: object, tree: SearchTree, target: str, draws: int = 200, used: int = 10**8) -> int:
    rng = np.random.default_rng(0)
    at = state(tree, used=used)
    parents = scheduler.eligible_parents(at)  # type: ignore[attr-defined]
    return sum(tree.ids[scheduler.choose_parent(at, parents, rng)] == target for _ in range(draws))  # type: ignore[attr-defined]


def test_at_scale_pareto_parents_skip_the_dominated_top_draw() -> None:
    # the root's clade is 600 perfect children: with the budget all but spent (cool-down tau about 1000,
    # draws at their means) its draw, near 0.998, beats every child's (7/8), but each child dominates it
    # task by task (the root failed t1)
    tree = wide_tree(2 * diversity.SAMPLE + 100, root=[1, 0, 1], others=[1, 1, 1, 1, 1, 1])
    assert diversity.at_scale(tree)
    spent = 10**9 - 10**6
    assert picks(make(cool_down=True), tree, "root", used=spent) == 200
    assert picks(make(cool_down=True, pareto_parents=True), tree, "root", used=spent) == 0


def test_at_scale_novelty_favours_the_odd_agent_among_the_top_draws() -> None:
    # twins solve t0-t2 and fail t3-t5; "odd" (the last child) does the opposite, with the same record
    n = 2 * diversity.SAMPLE
    tree = wide_tree(n, root=[1, 1, 1, 0, 0, 0], others=[1, 1, 1, 0, 0, 0], odd=[0, 0, 0, 1, 1, 1])
    odd = f"c{n - 1}"
    assert diversity.at_scale(tree)
    plain, novel = picks(make(), tree, odd), picks(make(novelty=1.0), tree, odd)
    # the odd agent wins whenever its draw is among the CANDIDATES highest (about K / n of the time)
    assert plain <= 3 and novel > 10
