"""The final-selection rules that borrow strength from the tree: ``clade_prior`` and ``clade_top_k``."""

from __future__ import annotations

import pytest

from metasearch.schedulers.cmp import SearchTree
from metasearch.schedulers.final import select_final


def record(tree: SearchTree, agent: str, parent: str | None, successes: int, trials: int) -> None:
    tree.add_agent(agent, parent)
    for k in range(trials):
        tree.add_result(agent, f"t{k}", float(k < successes))


def test_clade_prior_judges_a_child_by_its_family() -> None:
    tree = SearchTree()
    record(tree, "s", None, 0, 0)
    for parent, kid, successes in (("poor", "poor_child", 3), ("good", "good_child", 17)):
        record(tree, parent, "s", successes, 20)
        record(tree, kid, parent, 4, 5)  # the same own record under a poor and a good parent
        tree.add_result(parent, "x", 0.0, flags=("stale",))  # parents out of the running: children compete
    options = {"min_trials": 1, "epsilon": 0.4}
    assert select_final(tree, **options) == "poor_child"  # a tie on own results: the older
    assert select_final(tree, method="clade_prior", **options) == "good_child"


def test_clade_prior_shrinks_a_seed_toward_the_tree_not_itself() -> None:
    tree = SearchTree()
    record(tree, "seed", None, 3, 3)  # a perfect 3/3 seed in a tree that mostly fails
    record(tree, "other", None, 20, 40)
    for k in range(4):
        record(tree, f"c{k}", "other", 4, 40)
    assert select_final(tree, method="clade_prior", prior_trials=10) == "other"
    assert select_final(tree, method="mean") == "seed"


def test_clade_top_k_prefers_the_agent_whose_descendants_do_well() -> None:
    tree = SearchTree()
    record(tree, "s", None, 5, 20)
    record(tree, "barren", "s", 19, 20)
    record(tree, "fertile", "s", 18, 20)
    for k in range(3):
        record(tree, f"kid{k}", "fertile", 15, 20)
        record(tree, f"dud{k}", "barren", 2, 20)
    assert select_final(tree) == "barren"
    assert select_final(tree, method="clade_top_k", top_k=1) == "barren"
    assert select_final(tree, method="clade_top_k", top_k=2) == "fertile"


def test_an_unknown_rule_is_an_error_naming_the_choices() -> None:
    tree = SearchTree()
    record(tree, "s", None, 1, 2)
    with pytest.raises(ValueError, match="clade_prior"):
        select_final(tree, method="median")
