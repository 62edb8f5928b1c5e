"""``gea`` picks parents by performance x cosine novelty on DGM's protocol, and so searches unlike
``hgm-paper`` and ``dgm`` on the same simulated runs."""

from __future__ import annotations

import numpy as np

from metasearch.registry import SCHEDULERS
from metasearch.schedulers.base import SearchState
from metasearch.schedulers.cmp import SearchTree
from metasearch.schedulers.diversity import cosine_novelty
from metasearch.sim import default_family, simulate
from metasearch.types import Budget, Expand, Usage

TASKS = tuple(f"t{i}" for i in range(6))


def make(**options: object) -> object:
    cls = SCHEDULERS.resolve("gea")
    return cls(cls.Config(stage1=6, stage2=0, **options))


def build(results: dict[str, tuple[str | None, list[float]]]) -> SearchTree:
    tree = SearchTree()
    for agent, (parent, scores) in results.items():
        tree.add_agent(agent, parent)
        for task, score in zip(TASKS, scores, strict=False):
            tree.reserve(agent, task)
            tree.add_result(agent, task, score)
    return tree


def state(tree: SearchTree, expansions: int = 0) -> SearchState:
    return SearchState(tree, TASKS, Budget(evaluations=500), Usage(100, expansions), 0, 0)


def test_cosine_novelty_uses_the_nearest_neighbours_on_shared_tasks() -> None:
    tree = build(
        {
            "s": (None, [1, 1, 0, 0]),
            "twin": ("s", [1, 1, 0, 0]),
            "half": ("s", [1, 0, 0, 0]),
            "apart": ("s", [0, 0, 1, 1]),
        }
    )
    everyone = np.arange(4)
    one = cosine_novelty(tree, TASKS, everyone, neighbours=1)
    # s and twin are each other's nearest (0); half is nearest to both (1 - 1/sqrt 2); apart is 1 from all
    assert np.allclose(one, [0.0, 0.0, 1 - 1 / np.sqrt(2), 1.0], atol=1e-6)
    all3 = cosine_novelty(tree, TASKS, everyone, neighbours=3)
    assert all3[3] == 1.0 and np.isclose(all3[0], (0 + (1 - 1 / np.sqrt(2)) + 1) / 3, atol=1e-6)
    alone = build({"s": (None, [1]), "new": ("s", [])})
    assert list(cosine_novelty(alone, TASKS, np.arange(2), neighbours=4)) == [1.0, 1.0]


def test_the_parent_group_trades_performance_for_novelty() -> None:
    # three near-twins score 4/6; "odd" scores 3/6 on the tasks they fail: performance x novelty favours it
    tree = build(
        {
            "s": (None, [1, 1, 1, 1, 0, 0]),
            "a": ("s", [1, 1, 1, 1, 0, 0]),
            "b": ("s", [1, 1, 1, 1, 0, 0]),
            "odd": ("s", [0, 0, 0, 1, 1, 1]),
        }
    )
    gea = make()
    members = np.arange(len(tree))
    group = gea.parent_group(state(tree), members)  # type: ignore[attr-defined]
    assert tree.ids[group[0]] == "odd" and len(group) == 2
    parents = [gea.next_job(state(tree, k), np.random.default_rng(0)) for k in range(4)]  # type: ignore[attr-defined]
    assert all(isinstance(p, Expand) for p in parents)
    ids = [p.parent_id for p in parents]  # type: ignore[union-attr]
    assert ids[0] == ids[2] == "odd" and ids[1] == ids[3] == tree.ids[group[1]]  # K members in turn


def trace(name: str, seed: int) -> tuple[object, ...]:
    cls = SCHEDULERS.resolve(name)
    result = simulate(
        default_family(np.random.default_rng([seed, 0])),
        cls(cls.Config()),
        budget=200,
        workers=8,
        n_tasks=20,
        seed=seed,
    )
    return tuple(result.tree.view("parent")), tuple(result.tree.view("own_n"))


def test_gea_searches_unlike_hgm_paper_and_dgm() -> None:
    for seed in range(3):
        gea = trace("gea", seed)
        assert gea != trace("hgm-paper", seed)
        assert gea != trace("dgm", seed)
