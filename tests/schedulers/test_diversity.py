"""The diversity options of ``hgm`` change the parent choice on a constructed tree, and only there."""

from __future__ import annotations

import numpy as np

from metasearch.registry import SCHEDULERS
from metasearch.schedulers.base import SearchState
from metasearch.schedulers.cmp import SearchTree
from metasearch.schedulers.diversity import novelty, pareto_front
from metasearch.types import Budget, Usage

TASKS = tuple(f"t{i}" for i in range(12))


def make(**options: object) -> object:
    cls = SCHEDULERS.resolve("hgm")
    return cls(cls.Config(**options))


def state(tree: SearchTree) -> SearchState:
    return SearchState(tree, TASKS, Budget(evaluations=500), Usage(0, 0), 0, 0)


def build(results: dict[str, tuple[str | None, list[float]]]) -> SearchTree:
    """Agents (parents first) with their scores on t0, t1, ..."""
    tree = SearchTree()
    for agent, (parent, scores) in results.items():
        tree.add_agent(agent, parent)
        for task, score in zip(TASKS, scores, strict=False):
            tree.add_result(agent, task, score)
    return tree


def picks(scheduler: object, tree: SearchTree, parents: list[str], target: str, draws: int = 400) -> int:
    rng = np.random.default_rng(0)
    idx = np.array([tree.index[p] for p in parents])
    return sum(
        tree.ids[scheduler.choose_parent(state(tree), idx, rng)] == target  # type: ignore[attr-defined]
        for _ in range(draws)
    )


def test_novelty_is_the_mean_distance_on_shared_tasks() -> None:
    tree = build({"s": (None, [1, 1, 0, 0]), "a": ("s", [1, 1, 0, 0]), "b": ("s", [0, 0, 1])})
    got = novelty(tree, TASKS, np.arange(3))
    # s: 0 to a, 3/3 to b; a: the same; b: 3/3 to both
    assert np.allclose(got, [0.5, 0.5, 1.0])
    lonely = build({"s": (None, [1]), "x": ("s", [])})
    assert np.allclose(novelty(lonely, TASKS, np.arange(2)), [0.0, 0.0])


def test_novelty_prefers_the_parent_unlike_the_rest() -> None:
    # twins a and b score alike on their tasks, odd solves what they fail; odd's record is a little worse
    tree = build(
        {
            "s": (None, [1, 0, 1, 0, 1, 0]),
            "a": ("s", [1, 0, 1, 0, 1, 1]),
            "b": ("s", [1, 0, 1, 0, 1, 1]),
            "odd": ("s", [0, 1, 0, 1, 0, 1]),
        }
    )
    plain = picks(make(cool_down=False), tree, ["a", "b", "odd"], "odd")
    novel = picks(make(cool_down=False, novelty=1.0), tree, ["a", "b", "odd"], "odd")
    assert plain < 150 and novel > 300


def test_pareto_front_drops_the_dominated() -> None:
    tree = build(
        {
            "s": (None, [1, 0, 0, 0]),
            "best": ("s", [1, 1, 1, 0]),
            "worse": ("s", [1, 0, 1, 0]),  # dominated by best
            "other": ("s", [0, 0, 0, 1]),  # solves what nobody else does
            "new": ("s", []),  # shares nothing: nobody dominates it
        }
    )
    front = pareto_front(tree, TASKS, np.arange(len(tree)))
    assert [tree.ids[i] for i in front] == ["best", "other", "new"]


def test_pareto_parents_skip_a_dominated_parent_with_a_strong_clade() -> None:
    # "worse" has productive descendants, so its clade beats "best"'s, but best dominates it task by task
    tree = build(
        {
            "s": (None, [0, 0, 0, 0, 0, 0]),
            "best": ("s", [1, 1, 1, 0, 0, 0]),
            "worse": ("s", [1, 0, 1, 0, 0, 0]),
            "star": ("worse", [1, 0] + [1] * 10),  # dominates worse, not best
            "star2": ("star", [1, 0] + [1] * 10),
        }
    )
    assert picks(make(), tree, ["best", "worse"], "worse") > 300
    assert picks(make(pareto_parents=True), tree, ["best", "worse"], "worse") == 0


def test_pareto_parents_fall_back_to_all_when_the_front_is_empty() -> None:
    tree = build({"s": (None, [1, 1]), "a": ("s", [0, 1])})
    assert picks(make(pareto_parents=True), tree, ["a"], "a", draws=5) == 5
