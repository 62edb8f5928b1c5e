from __future__ import annotations

import numpy as np
import pytest

from metasearch.registry import SCHEDULERS
from metasearch.schedulers.base import SearchState
from metasearch.schedulers.cmp import SearchTree
from metasearch.schedulers.final import agent_stats, select_final
from metasearch.types import Budget, Evaluate, Expand, Usage

TASKS = tuple(f"t{i}" for i in range(20))
NAMES = SCHEDULERS.names()


def make(name: str, **options):
    cls = SCHEDULERS.resolve(name)
    return cls(cls.Config(**options))


def state(tree: SearchTree, evaluations: int = 0, expansions: int = 0, exp_in_flight: int = 0) -> SearchState:
    return SearchState(tree, TASKS, Budget(evaluations=500), Usage(evaluations, expansions), exp_in_flight, 0)


def small_tree(rng: np.random.Generator) -> SearchTree:
    tree = SearchTree()
    tree.add_agent("s", None)
    for i in range(6):
        tree.add_agent(f"c{i}", "s" if i < 3 else f"c{i - 3}")
    for a in tree.ids:
        for t in TASKS[: int(rng.integers(1, 6))]:
            tree.reserve(a, t)
            tree.add_result(a, t, float(rng.random() < 0.5))
    return tree


@pytest.mark.parametrize("name", NAMES)
def test_drives_a_search_without_repeating_pairs(name: str) -> None:
    rng = np.random.default_rng(0)
    scheduler = make(name)
    tree = SearchTree()
    tree.add_agent("s", None)
    evals = exps = 0
    for _ in range(300):
        job = scheduler.next_job(state(tree, evals, exps), rng)
        if job is None:
            break
        if isinstance(job, Evaluate):
            assert job.task_id in tree.unseen_tasks(job.agent_id, TASKS)
            tree.reserve(job.agent_id, job.task_id)
            tree.add_result(job.agent_id, job.task_id, float(rng.random() < 0.4))
            evals += 1
        else:
            assert isinstance(job, Expand) and job.parent_id in tree
            tree.add_agent(f"a{len(tree)}", job.parent_id)
            exps += 1
    assert evals > 50 and exps > 2
    assert scheduler.select_final(state(tree, evals, exps)) in tree


@pytest.mark.parametrize("name", NAMES)
def test_same_state_and_seed_same_choice(name: str) -> None:
    tree = small_tree(np.random.default_rng(1))
    scheduler = make(name)
    picks = [scheduler.next_job(state(tree, 40, 6), np.random.default_rng(5)) for _ in range(2)]
    assert picks[0] is not None and picks[1] is not None
    strip = [{k: v for k, v in vars(p).items() if k != "job_id"} for p in picks]
    assert strip[0] == strip[1]


def test_hgm_expand_rule() -> None:
    tree = small_tree(np.random.default_rng(2))  # 6 non-seed agents
    hgm = make("hgm", initial_expansions=0)
    rng = np.random.default_rng(0)
    # 20 ** 0.6 = 6.03 >= 6 agents -> expand; with one expansion in flight 6.03 < 7 -> evaluate
    assert isinstance(hgm.next_job(state(tree, 20), rng), Expand)
    assert isinstance(hgm.next_job(state(tree, 20, exp_in_flight=1), rng), Evaluate)
    assert isinstance(hgm.next_job(state(tree, 10), rng), Evaluate)


def test_hgm_initial_expansions_go_to_the_seed() -> None:
    tree = SearchTree()
    tree.add_agent("s", None)
    hgm = make("hgm", initial_expansions=3)
    rng = np.random.default_rng(0)
    assert all(
        isinstance(j, Expand) and j.parent_id == "s"
        for j in (hgm.next_job(state(tree, 0, k), rng) for k in range(3))
    )


def test_hgm_back_pressure_when_nothing_is_possible() -> None:
    tree = SearchTree()
    tree.add_agent("s", None)
    for t in TASKS:
        tree.reserve("s", t)  # all in flight, none finished: no parent is eligible yet
    assert make("hgm", initial_expansions=0).next_job(state(tree, 20), np.random.default_rng(0)) is None


@pytest.mark.parametrize("name", ["hgm", "hgm-paper"])
def test_a_seed_that_scored_nothing_is_still_expanded(name: str) -> None:
    """A weak model's seed often scores 0 on every task (a real SmolLM2 kernels study did): the study goes
    on expanding it instead of stopping with expansions left. A child that scored nothing is no parent."""
    tree = SearchTree()
    tree.add_agent("s", None)
    tree.add_agent("c", "s")
    for a in ("s", "c"):
        for t in TASKS:
            tree.reserve(a, t)
            tree.add_result(a, t, 0.0)
    rng = np.random.default_rng(0)
    jobs = [make(name, initial_expansions=0).next_job(state(tree, 40, 1), rng) for _ in range(20)]
    assert all(isinstance(j, Expand) and j.parent_id == "s" for j in jobs), jobs


def test_hgm_parents_follow_clade_not_own_score() -> None:
    tree = SearchTree()
    tree.add_agent("s", None)
    tree.add_agent("weak", "s")  # poor itself, excellent descendants
    tree.add_agent("strong", "s")  # good itself, barren
    tree.add_agent("kid", "weak")
    tree.add_agent("grandkid", "kid")
    for i, t in enumerate(TASKS):
        scores = (
            ("weak", float(i < 4)),
            ("strong", float(i < 10)),
            ("kid", 1.0),
            ("grandkid", 1.0),
            ("s", 0.5),
        )
        for agent, score in scores:
            tree.add_result(agent, t, score)
    hgm = make("hgm", initial_expansions=0)
    parents = np.array([tree.index[a] for a in ("weak", "strong")])
    rng = np.random.default_rng(0)
    picks = [tree.ids[hgm.choose_parent(state(tree), parents, rng)] for _ in range(200)]
    assert picks.count("weak") > 180  # clade 44/60 beats 10/20, although own 4/20 < 10/20


def test_dgm_staged_evaluation() -> None:
    dgm = make("dgm", stage1=4, stage2=6)
    tree = SearchTree()
    tree.add_agent("s", None)
    rng = np.random.default_rng(0)
    for k in range(4):
        job = dgm.next_job(state(tree, k), rng)
        assert isinstance(job, Evaluate) and job.task_id == TASKS[k]
        tree.reserve("s", job.task_id)
        tree.add_result("s", job.task_id, 1.0 if k < 2 else 0.0)  # 50% >= 40%: promoted
    assert dgm.allowed(state(tree), 0) == 10
    tree.add_agent("c", "s")
    for t in TASKS[:4]:
        tree.add_result("c", t, 0.0)
    assert dgm.allowed(state(tree), 1) == 4  # 0% stays at stage 1


def test_final_selection_prefers_evidence_over_luck() -> None:
    tree = SearchTree()
    for a in ("lucky", "solid", "poor"):
        tree.add_agent(a, None)
    tree.add_result("lucky", "t0", 1.0)
    for i in range(8):
        tree.add_result("solid", f"t{i}", float(i < 7))
        tree.add_result("poor", f"t{i}", float(i < 2))
    assert select_final(tree, min_trials=1) == "solid"
    assert select_final(tree, method="mean", min_trials=1) == "lucky"
    stats = agent_stats(tree, "solid")
    assert stats.trials == 8 and stats.mean == pytest.approx(0.875) and 0.3 < stats.lower_bound < 0.875


@pytest.mark.parametrize(("workers", "expected"), [(1, 1), (8, 3), (20, 5), (64, 5)])
def test_hgm_paper_initial_expansions_follow_the_worker_count(workers: int, expected: int) -> None:
    tree = SearchTree()
    tree.add_agent("s", None)
    tree.add_result("s", "t0", 0.0)  # no eligible parent: only the initial expansions can expand
    paper = make("hgm-paper")
    jobs = [
        paper.next_job(
            SearchState(tree, TASKS, Budget(500), Usage(0, k), k, 0, workers), np.random.default_rng(k)
        )
        for k in range(6)
    ]
    assert [isinstance(j, Expand) for j in jobs] == [k < expected for k in range(6)]


def test_dgm_archive_admits_only_children_that_pass_stage_one() -> None:
    dgm = make("dgm", stage1=4)
    tree = SearchTree()
    tree.add_agent("s", None)
    tree.add_agent("broken", "s")  # evaluated on stage 1, never solved anything: not archived
    tree.add_agent("ok", "s")
    tree.add_agent("new", "s")  # stage 1 not finished: not archived yet
    for t in TASKS[:4]:
        tree.add_result("s", t, 1.0)
        tree.add_result("broken", t, 0.0)
        tree.add_result("ok", t, float(t == "t0"))
    tree.add_result("new", "t0", 1.0)
    mask = dgm.archived(state(tree))
    assert [tree.ids[i] for i in np.flatnonzero(mask)] == ["s", "ok"]
    assert [tree.ids[i] for i in np.flatnonzero(make("dgm", archive="all").archived(state(tree)))] == [
        "s",
        "broken",
        "ok",
        "new",
    ]


def test_cost_exponent_prefers_the_cheaper_of_equally_promising_agents() -> None:
    tree = SearchTree()
    for a in ("s", "cheap", "slow"):
        tree.add_agent(a, None if a == "s" else "s")
    for t in TASKS[:4]:  # same record, 1 s against 4 s per evaluation
        tree.add_result("cheap", t, float(t in ("t0", "t1")), duration=1.0)
        tree.add_result("slow", t, float(t in ("t0", "t1")), duration=4.0)
    tree.add_result("s", "t0", 1.0, duration=2.5)
    candidates = np.array([tree.index["cheap"], tree.index["slow"]])
    rng = np.random.default_rng(0)

    def picks(scheduler: object) -> int:
        return sum(
            tree.ids[scheduler.choose_agent(state(tree), candidates, rng)] == "cheap"  # type: ignore[attr-defined]
            for _ in range(400)
        )

    assert 150 < picks(make("hgm")) < 250  # a coin flip without costs
    assert picks(make("hgm", cost_exponent=2.0)) > 300


def test_replayed_tree_keeps_evaluation_times() -> None:
    agents = [("s", None), ("c", "s")]
    results = [("s", "t0", 1.0), ("c", "t0", 0.0), ("c", "t1", 1.0)]
    tree = SearchTree.replayed(agents, results, durations=[2.0, 3.0, 5.0])
    incremental = SearchTree()
    for a, p in agents:
        incremental.add_agent(a, p)
    for (a, t, s), d in zip(results, (2.0, 3.0, 5.0), strict=True):
        incremental.add_result(a, t, s, duration=d)
    assert list(tree.view("own_time")) == list(incremental.view("own_time")) == [2.0, 8.0]
