from __future__ import annotations

import json

import numpy as np
import pytest

from metasearch.registry import SCHEDULERS
from metasearch.sim import default_family, simulate
from metasearch.sim.bench import Case, compare, run, run_case
from metasearch.sim.engine import cmp_correlations
from metasearch.sim.grouped import grouped_family
from metasearch.sim.realism import Realism


@pytest.mark.parametrize("name", SCHEDULERS.names())
def test_simulation_spends_the_budget_and_reports_truth(name: str) -> None:
    cls = SCHEDULERS.resolve(name)
    result = simulate(
        default_family(np.random.default_rng(3)), cls(cls.Config()), budget=150, workers=4, n_tasks=20, seed=3
    )
    assert result.evaluations == 150
    assert result.final in result.truth and 0 < result.final_quality <= result.best_quality <= 1
    assert sum(result.tree.own(a)[1] for a in result.tree.ids) == 150 + 20  # the seed's 20 are free
    assert result.tree.own("a0")[1] == 20
    assert len(result.tree) == result.expansions - result.failed + 1


def test_same_seed_same_landscape_across_schedulers() -> None:
    roots = []
    for name in ("hgm", "random"):
        cls = SCHEDULERS.resolve(name)
        landscape = default_family(np.random.default_rng([7, 0]))
        roots.append(
            simulate(landscape, cls(cls.Config()), budget=30, workers=2, n_tasks=10, seed=7).truth["a0"]
        )
    assert roots[0] == roots[1]


def test_cmp_correlation_is_defined_on_a_real_tree() -> None:
    cls = SCHEDULERS.resolve("hgm")
    result = simulate(
        default_family(np.random.default_rng(1)), cls(cls.Config()), budget=400, workers=4, n_tasks=40, seed=1
    )
    clade, own, used = cmp_correlations(result.tree)
    assert used >= 3 and -1 <= clade <= 1 and -1 <= own <= 1


def test_bench_json_has_the_documented_fields(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--seeds", "4", "--budget", "60", "--workers", "2", "--tasks", "10"]
    assert (
        run([*argv, "--schedulers", "hgm-paper,greedy", "--families", "default,disagreement", "--json"]) == 0
    )
    rows = json.loads(capsys.readouterr().out)
    assert [(r["family"], r["scheduler"]) for r in rows] == [
        ("default", "hgm-paper"),
        ("default", "greedy"),
        ("disagreement", "hgm-paper"),
        ("disagreement", "greedy"),
    ]
    for key in (
        "final_quality_mean",
        "final_quality_ci95",
        "best_quality_mean",
        "evaluations",
        "expansions",
        "wall_time",
        "cmp_correlation",
        "diff_vs_baseline_mean",
        "diff_vs_baseline_ci95",
    ):
        assert key in rows[1]
    assert rows[0]["diff_vs_baseline_mean"] == 0.0
    assert rows[1]["evaluations"] == 60


def test_custom_landscape_factory(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--landscape", "metasearch.sim.landscape:default_family", "--seeds", "2", "--budget", "30"]
    assert run([*argv, "--schedulers", "hgm", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["evaluations"] == 30


def test_bench_rejects_an_unknown_family() -> None:
    with pytest.raises(SystemExit):
        run(["--families", "nope", "--seeds", "2"])


def test_a_wall_time_budget_stops_new_jobs_and_cools_the_sampler() -> None:
    """With a wall-time budget no job starts after it (those in flight finish), and HGM's cool-down follows
    the limit nearest its end: tau = 1 / the fraction of wall time left, as B / b does for evaluations."""
    from metasearch.schedulers.base import SearchState, budget_left
    from metasearch.schedulers.cmp import SearchTree
    from metasearch.types import Budget, Usage

    cls = SCHEDULERS.resolve("hgm-paper")
    landscape = default_family(np.random.default_rng(5))
    free = simulate(landscape, cls(cls.Config()), budget=300, workers=4, n_tasks=20, seed=5)
    timed = simulate(
        default_family(np.random.default_rng(5)),
        cls(cls.Config()),
        budget=10**6,
        workers=4,
        n_tasks=20,
        seed=5,
        wall_time_s=free.extra["wall_time"] / 2,
    )
    assert 0 < timed.evaluations < free.evaluations
    assert free.extra["wall_time"] / 2 <= timed.extra["wall_time"] < free.extra["wall_time"]
    scheduler = cls(cls.Config())
    tree = SearchTree()
    tree.add_agent("a0", None)

    def state(budget: Budget, usage: Usage) -> SearchState:
        return SearchState(tree, ("t0",), budget, usage, 0, 0, 1)

    assert scheduler.tau(state(Budget(evaluations=800), Usage(evaluations=600))) == 4.0  # B / b
    assert scheduler.tau(state(Budget(wall_time_s=100.0), Usage(wall_time_s=75.0))) == 4.0
    both = state(Budget(evaluations=800, tokens=1000), Usage(evaluations=200, tokens=900))
    assert budget_left(both) == pytest.approx(0.1) and scheduler.tau(both) == pytest.approx(10.0)
    assert budget_left(state(Budget(), Usage())) is None and scheduler.tau(state(Budget(), Usage())) == 1.0


@pytest.mark.parametrize("family", ["grouped", "deceptive"])
def test_grouped_families_give_designs_a_quality_per_task_group(family: str) -> None:
    from metasearch.sim.bench import FAMILIES

    landscape = FAMILIES[family](np.random.default_rng(5))
    rng = np.random.default_rng(0)
    state = landscape.root(rng)
    for _ in range(30):
        state = landscape.child(state, rng) or state
    groups = len(state.skills)
    per_task = landscape.task_qualities(state, 12)
    assert np.allclose(per_task[:groups], state.skills) and np.allclose(
        per_task[groups : 2 * groups], per_task[:groups]
    )
    cls = SCHEDULERS.resolve("hgm")
    result = simulate(landscape, cls(cls.Config()), budget=60, workers=4, n_tasks=12, seed=5)
    assert result.evaluations == 60 and 0 < result.final_quality <= 1


def test_heldout_tasks_leave_the_search_unchanged() -> None:
    """Held-out tasks come from their own random stream: the search, its truth and its final pick are
    those of a run without them; every agent gets a held-out quality."""
    cls = SCHEDULERS.resolve("hgm-paper")
    runs = [
        simulate(
            factory(np.random.default_rng([4, 0])),
            cls(cls.Config()),
            budget=120,
            workers=4,
            n_tasks=12,
            seed=4,
            heldout_tasks=held,
        )
        for factory in (default_family, grouped_family)
        for held in (0, 48)
    ]
    for plain, held in (runs[:2], runs[2:]):
        assert plain.truth == held.truth and plain.final == held.final
        assert list(plain.tree.view("parent")) == list(held.tree.view("parent"))
        assert plain.heldout == {} and set(held.heldout) == set(held.truth)
        assert all(0 < v < 1 for v in held.heldout.values())
        assert held.final_heldout == held.heldout[held.final]


def test_heldout_tasks_follow_the_landscape_per_task() -> None:
    """Without task difficulty a scalar-quality design is worth the same on held-out tasks; a landscape
    with per-task qualities gives held-out task j the quality of task n + j."""
    cls = SCHEDULERS.resolve("hgm-paper")
    plain = simulate(
        default_family(np.random.default_rng(2)),
        cls(cls.Config()),
        budget=60,
        workers=2,
        n_tasks=10,
        seed=2,
        realism=Realism.off(),
        heldout_tasks=20,
    )
    assert plain.heldout == pytest.approx(plain.truth)
    alternating = simulate(
        Alternating(),
        cls(cls.Config()),
        budget=30,
        workers=2,
        n_tasks=10,
        seed=2,
        realism=Realism.off(),
        heldout_tasks=3,
    )
    assert alternating.truth["a0"] == pytest.approx(0.4)  # tasks 0..9: five at 0.2, five at 0.6
    assert alternating.heldout["a0"] == pytest.approx((0.2 + 0.6 + 0.2) / 3)  # tasks 10, 11, 12


class Alternating:
    """Every design solves even tasks with probability 0.2 and odd ones with 0.6."""

    def root(self, rng: np.random.Generator) -> int:
        return 0

    def child(self, state: int, rng: np.random.Generator) -> int:
        return state + 1

    def quality(self, state: int) -> float:
        return 0.4

    def task_qualities(self, state: int, n_tasks: int) -> np.ndarray:
        return np.where(np.arange(n_tasks) % 2 == 0, 0.2, 0.6)


def test_bench_reports_heldout_quality(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--seeds", "3", "--budget", "60", "--workers", "2", "--tasks", "10", "--heldout-tasks", "20"]
    assert run([*argv, "--schedulers", "hgm-paper,greedy", "--families", "grouped", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    for key in ("heldout_mean", "heldout_ci95", "gap_mean", "gap_ci95", "heldout_diff_mean"):
        assert key in rows[1]
    assert rows[1]["gap_mean"] == pytest.approx(rows[1]["final_quality_mean"] - rows[1]["heldout_mean"])
    assert rows[0]["heldout_diff_mean"] == 0.0


def test_first_seed_runs_fresh_seeds() -> None:
    variants = {"hgm-paper": ("hgm-paper", {})}
    [row] = compare(variants, family="default", seeds=1, budget=40, workers=2, n_tasks=8, first_seed=3)
    case = Case("hgm-paper", "hgm-paper", (), "default", 3, 40, 2, 8, True)
    assert row["final_quality_mean"] == run_case(case)["final"]
