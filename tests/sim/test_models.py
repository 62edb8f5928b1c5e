"""Models in the simulator: each writes children of its own quality at its own token cost, a run stops at
its token budget, the bandit learns which model to use from the children's gains, and the benchmark prints
a paired table."""

from __future__ import annotations

import json

import numpy as np

from metasearch.registry import SCHEDULERS
from metasearch.schedulers.model_choice import MIN_PULLS
from metasearch.sim import default_family, simulate
from metasearch.sim.model_bench import run
from metasearch.sim.models import ModelArms, SimModel, distinct_models

GOOD = SimModel("good", gain=0.03, fail=0.1, tokens=50_000)
USELESS = SimModel("useless", gain=-0.05, fail=0.97, tokens=20_000)


def run_with(arms: ModelArms, seed: int = 1, tokens: float = 4e6) -> tuple[object, ModelArms]:
    cls = SCHEDULERS.resolve("hgm")
    result = simulate(
        default_family(np.random.default_rng([seed, 0])),
        cls(cls.Config()),
        budget=100_000,
        workers=4,
        n_tasks=20,
        seed=seed,
        models=arms,
        tokens=tokens,
    )
    return result, arms


def test_a_run_stops_at_its_token_budget() -> None:
    result, arms = run_with(ModelArms([GOOD], "first", seed=1))
    spent = result.extra["tokens"]  # type: ignore[attr-defined]
    assert 4e6 <= spent < 4e6 + 4 * 5 * GOOD.tokens  # no job starts after the budget; those in flight end
    assert arms.counts() == {"good": result.expansions}  # type: ignore[attr-defined]


def test_the_bandit_learns_to_leave_a_useless_model() -> None:
    shares = []
    for seed in range(3):
        _, arms = run_with(ModelArms([USELESS, GOOD], "bandit", seed=seed), seed=seed)
        counts = arms.counts()
        shares.append(counts["good"] / sum(counts.values()))
        assert counts["useless"] >= MIN_PULLS  # tried first
    assert min(shares) > 0.6 and sum(shares) / len(shares) > 0.75, shares


def test_a_run_is_repeatable() -> None:
    first, _ = run_with(ModelArms([USELESS, GOOD], "bandit", seed=5), seed=5)
    again, _ = run_with(ModelArms([USELESS, GOOD], "bandit", seed=5), seed=5)
    assert first.truth == again.truth and first.final == again.final  # type: ignore[attr-defined]


def test_the_distinct_family_has_one_useless_model() -> None:
    for seed in range(20):
        fails = sorted(m.fail for m in distinct_models(np.random.default_rng(seed)))
        assert fails[0] <= 0.3 and fails[1] >= 0.9


def test_the_benchmark_prints_paired_rows(capsys) -> None:  # type: ignore[no-untyped-def]
    assert run(["--seeds", "3", "--tokens", "1e6", "--models", "distinct", "--tasks", "10", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["rule"] for r in rows] == [
        "bandit",
        "uniform",
        "only:small",
        "only:large",
        rows[-1]["rule"],
    ]
    assert rows[-1]["rule"].startswith("best single (only:")
    assert all(r["tokens"] >= 1e6 for r in rows)
    assert rows[0]["bandit_minus_this_mean"] is None and rows[1]["bandit_minus_this_ci95"] is not None
