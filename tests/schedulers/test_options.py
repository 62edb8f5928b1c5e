"""Every documented scheduler option changes behaviour: the same simulated run with one option changed
makes different decisions (or selects a different final agent) on at least one of a few seeds."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from metasearch.registry import SCHEDULERS
from metasearch.schedulers.base import SearchState
from metasearch.schedulers.cmp import SearchTree
from metasearch.sim import default_family, simulate
from metasearch.types import Budget, Usage

# (scheduler, option, a value different from the default)
OPTIONS: list[tuple[str, str, Any]] = [
    ("hgm", "alpha", 0.4),
    ("hgm", "cool_down", False),
    ("hgm", "initial_expansions", 6),
    ("hgm", "initial_expansions", 0),
    ("hgm", "min_parent_mean", 0.3),
    ("hgm", "pending_aware", True),
    ("hgm", "count_failed_expansions", True),
    ("hgm", "eval_virtual_loss", True),
    ("hgm", "cost_exponent", 2.0),
    ("hgm", "novelty", 0.5),
    ("hgm", "pareto_parents", True),
    ("hgm-paper", "cool_down", False),
    ("hgm-paper", "initial_expansions", 0),
    ("mcts", "selection", "thompson"),
    ("mcts", "c_uct", 3.0),
    ("mcts", "widening_k", 3.0),
    ("mcts", "widening", 1.0),
    ("dgm", "stage1", 4),
    ("dgm", "stage2", 2),
    ("dgm", "promote_at", 0.1),
    ("dgm", "sharpness", 1.0),
    ("dgm", "archive", "all"),
    ("gea", "group_size", 1),
    ("gea", "neighbours", 1),
    ("gea", "stage1", 4),
    ("gea", "promote_at", 0.1),
    ("greedy", "alpha", 0.4),
    ("random", "alpha", 0.4),
]
# options that act only on the final selection: (scheduler, base options, the option changed), compared
# on the final pick of a fixed tree
FINAL_OPTIONS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (name, base, changed)
    for name in SCHEDULERS.names()
    for base, changed in (
        ({"final": "lower_percentile", "min_trials": 3}, {"final": "mean"}),
        ({"final": "lower_percentile", "min_trials": 3}, {"epsilon": 0.4}),
        ({"final": "mean", "min_trials": 3}, {"min_trials": 1}),
    )
]


def trace(name: str, options: dict[str, Any], seed: int) -> tuple[Any, ...]:
    cls = SCHEDULERS.resolve(name)
    result = simulate(
        default_family(np.random.default_rng([seed, 0])),
        cls(cls.Config(**options)),
        budget=120,
        workers=8,
        n_tasks=20,
        seed=seed,
    )
    tree = result.tree
    return (tuple(tree.view("parent")), tuple(tree.view("own_n")), result.final)


@pytest.mark.parametrize(("name", "option", "value"), OPTIONS)
def test_option_changes_decisions(name: str, option: str, value: Any) -> None:
    assert SCHEDULERS.resolve(name).Config().model_dump()[option] != value
    assert any(trace(name, {}, s) != trace(name, {option: value}, s) for s in range(4))


def final_tree() -> SearchTree:
    """Candidates whose ranking depends on the rule: a lucky 2/2, a solid 40/50, a hot 9/10, a fair 20/30."""
    tree = SearchTree()
    for agent, (s, n) in {"lucky": (2, 2), "solid": (40, 50), "hot": (9, 10), "fair": (20, 30)}.items():
        tree.add_agent(agent, None)
        for k in range(n):
            tree.add_result(agent, f"t{k}", float(k < s))
    return tree


@pytest.mark.parametrize(("name", "base", "changed"), FINAL_OPTIONS)
def test_final_option_changes_the_pick(name: str, base: dict[str, Any], changed: dict[str, Any]) -> None:
    cls = SCHEDULERS.resolve(name)
    tasks = tuple(f"t{k}" for k in range(60))
    state = SearchState(final_tree(), tasks, Budget(evaluations=100), Usage(92, 3), 0, 0)
    before = cls(cls.Config(**base)).select_final(state)
    after = cls(cls.Config(**base | changed)).select_final(state)
    assert before != after


def test_dgm_reports_the_best_of_the_most_evaluated() -> None:
    """DGM's own default (mean over the agents with the most complete evaluation) picks the 40/50 agent."""
    cls = SCHEDULERS.resolve("dgm")
    state = SearchState(final_tree(), tuple(f"t{k}" for k in range(60)), Budget(100), Usage(92, 3), 0, 0)
    assert cls(cls.Config()).select_final(state) == "solid"
