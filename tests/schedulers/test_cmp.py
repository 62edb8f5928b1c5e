"""SearchTree clade sums, pending and failure counts against brute-force recomputation."""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metasearch.schedulers.cmp import SearchTree, replay_results
from metasearch.schedulers.final import select_final

Op = tuple[str, int, int, float]


@st.composite
def histories(draw: st.DrawFn) -> list[Op]:
    n_ops = draw(st.integers(1, 120))
    ops: list[Op] = []
    for _ in range(n_ops):
        kind = draw(st.sampled_from(["add", "reserve", "result", "release", "exp_ok", "exp_fail"]))
        ops.append((kind, draw(st.integers(0, 10_000)), draw(st.integers(0, 7)), draw(st.floats(0, 1))))
    return ops


def brute_force(
    parents: dict[str, str | None], results: dict[str, list[float]]
) -> dict[str, tuple[float, int]]:
    def clade(a: str) -> list[str]:
        kids = [c for c, p in parents.items() if p == a]
        return [a] + [d for k in kids for d in clade(k)]

    return {
        a: (sum(sum(results[m]) for m in clade(a)), sum(len(results[m]) for m in clade(a))) for a in parents
    }


@settings(max_examples=150, deadline=None)
@given(histories())
def test_clade_sums_match_brute_force(ops: list[Op]) -> None:
    tree = SearchTree(capacity=2)  # force growth
    parents: dict[str, str | None] = {"r": None}
    tree.add_agent("r", None)
    results: dict[str, list[float]] = {"r": []}
    reserved: set[tuple[str, str]] = set()
    done: set[tuple[str, str]] = set()
    pending_exp: dict[str, int] = {}
    failed: dict[str, int] = {}
    for kind, pick, task_n, score in ops:
        ids = list(parents)
        agent = ids[pick % len(ids)]
        task = f"t{task_n}"
        if kind == "add":
            new = f"a{len(ids)}"
            tree.add_agent(new, agent)
            parents[new] = agent
            results[new] = []
        elif kind == "reserve" and (agent, task) not in reserved | done:
            tree.reserve(agent, task)
            reserved.add((agent, task))
        elif kind == "result" and (agent, task) not in done:
            tree.add_result(agent, task, score)
            reserved.discard((agent, task))
            done.add((agent, task))
            results[agent].append(score)
        elif kind == "release" and (agent, task) in reserved:
            tree.release(agent, task)
            reserved.discard((agent, task))
        elif kind in ("exp_ok", "exp_fail"):
            tree.expansion_started(agent)
            tree.expansion_finished(agent, failed=kind == "exp_fail")
            failed[agent] = failed.get(agent, 0) + (kind == "exp_fail")
            pending_exp[agent] = 0
    expected = brute_force(parents, results)
    for a in parents:
        s, n = tree.clade(a)
        assert s == pytest.approx(expected[a][0]) and n == expected[a][1]
        assert tree.own(a) == (pytest.approx(sum(results[a])), len(results[a]))
        assert tree.pending(a) == sum(1 for x, _ in reserved if x == a)
        assert tree.failed_expansions(a) == failed.get(a, 0)
        seen = {t for x, t in reserved | done if x == a}
        assert tree.unseen_tasks(a, [f"t{i}" for i in range(8)]) == [
            f"t{i}" for i in range(8) if f"t{i}" not in seen
        ]


def test_a_pair_cannot_be_reserved_twice() -> None:
    tree = SearchTree()
    tree.add_agent("r", None)
    tree.reserve("r", "t")
    with pytest.raises(ValueError, match="already dispatched"):
        tree.reserve("r", "t")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        tree.add_result("r", "t", 1.5)


def test_views_are_read_only() -> None:
    tree = SearchTree()
    tree.add_agent("r", None)
    with pytest.raises(ValueError):
        tree.view("own_s")[0] = 1.0


def test_concurrent_updates_under_a_lock_lose_nothing() -> None:
    tree = SearchTree()
    tree.add_agent("r", None)
    for i in range(20):
        tree.add_agent(f"c{i}", "r" if i == 0 else f"c{i - 1}")
    lock = threading.Lock()

    def work(w: int) -> None:
        for k in range(200):
            with lock:
                tree.reserve(f"c{(w + k) % 20}", f"w{w}-{k}")
            with lock:
                tree.add_result(f"c{(w + k) % 20}", f"w{w}-{k}", 0.5)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert tree.clade("r") == (pytest.approx(400.0), 800)
    assert int(np.sum(tree.view("pending_evals"))) == 0


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=1, max_value=40), st.integers(min_value=0, max_value=120), st.integers(0, 2**31))
def test_a_replayed_tree_equals_the_incremental_one(agents: int, results: int, seed: int) -> None:
    rng = random.Random(seed)
    history = [
        (f"a{i}", None if i == 0 or rng.random() < 0.1 else f"a{rng.randrange(i)}") for i in range(agents)
    ]
    pairs = {(f"a{rng.randrange(agents)}", f"t{rng.randrange(5)}") for _ in range(results)}  # each pair once
    evals = [(a, t, rng.choice([0.0, 1.0, rng.random()])) for a, t in sorted(pairs)]
    incremental = SearchTree()
    for agent_id, parent_id in history:
        incremental.add_agent(agent_id, parent_id)
    for agent_id, task_id, score in evals:
        incremental.add_result(agent_id, task_id, score)
    replayed = SearchTree.replayed(history, evals)
    n = agents
    assert replayed.ids == incremental.ids and replayed.children == incremental.children
    assert replayed.seen == incremental.seen and replayed.scores == incremental.scores
    for name in (
        "parent",
        "depth",
        "own_n",
        "clade_n",
        "clade_size",
        "n_children",
        "n_seen",
        "pending_evals",
    ):
        assert np.array_equal(getattr(replayed, name)[:n], getattr(incremental, name)[:n]), name
    for name in ("own_s", "clade_s"):
        assert np.allclose(getattr(replayed, name)[:n], getattr(incremental, name)[:n]), name
    replayed.add_agent("late", "a0")  # still grows and updates incrementally afterwards
    replayed.add_result("late", "t0", 1.0)
    assert replayed.clade_size[0] == incremental.clade_size[0] + 1


def test_a_flagged_result_counts_as_a_failure_and_is_never_final() -> None:
    tree = SearchTree()
    for agent_id, parent in (("seed", None), ("cheat", "seed"), ("heir", "cheat")):
        tree.add_agent(agent_id, parent)
    for task in ("t1", "t2", "t3"):
        tree.add_result("seed", task, 0.3)
        tree.add_result("cheat", task, 1.0, ("tampered_timer",) if task == "t1" else ())
        tree.add_result("heir", task, 0.6)
    assert tree.own("cheat") == (2.0, 3) and tree.is_flagged("cheat") and not tree.is_flagged("heir")
    assert tree.task_scores("cheat") == {"t1": 0.0, "t2": 1.0, "t3": 1.0}
    assert tree.clade("seed") == (pytest.approx(0.9 + 2.0 + 1.8), 9)
    assert select_final(tree) == "heir" and select_final(tree, method="mean") == "heir"
    replayed = replay_results(
        [("seed", None), ("cheat", "seed"), ("heir", "cheat")],
        [
            (a, t, s, ("tampered_timer",) if (a, t) == ("cheat", "t1") else ())
            for a, s in (("seed", 0.3), ("cheat", 1.0), ("heir", 0.6))
            for t in ("t1", "t2", "t3")
        ],
    )
    for name in ("own_s", "own_n", "clade_s", "clade_n", "flagged"):
        assert np.allclose(replayed.view(name), tree.view(name)), name
    assert replayed.scores == tree.scores
    only_flagged = SearchTree()
    only_flagged.add_agent("cheat", None)
    only_flagged.add_result("cheat", "t1", 1.0, ("stale_output",))
    assert select_final(only_flagged) is None
