"""The model bandit: tries each model first, then prefers the larger gain per token (failures earn 0,
worse children no less), keeps exploring, spreads concurrent choices, and is a pure function of its
records and seed."""

from __future__ import annotations

import numpy as np

from metasearch.schedulers.model_choice import MIN_PULLS, arm_stats, choose
from metasearch.types import Pull

MODELS = ["small", "large"]


def pulls_of(model: str, n: int, gain: float | None, cost: float) -> list[Pull]:
    return [Pull(model, cost, gain) for _ in range(n)]


def test_first_uniform_and_a_single_model() -> None:
    assert choose(["only"], [], rule="bandit", seed=0, key="j") == "only"
    assert choose(MODELS, pulls_of("large", 9, 0.5, 10), rule="first", seed=0, key="j") == "small"
    picks = [choose(MODELS, [], rule="uniform", seed=3, key=f"job-{i}") for i in range(2000)]
    assert picks == [choose(MODELS, [], rule="uniform", seed=3, key=f"job-{i}") for i in range(2000)]
    assert 0.45 < picks.count("small") / len(picks) < 0.55
    assert picks != [choose(MODELS, [], rule="uniform", seed=4, key=f"job-{i}") for i in range(2000)]


def test_each_model_is_tried_first_in_order() -> None:
    seen: list[Pull] = []
    for i in range(2 * MIN_PULLS):
        model = choose(MODELS, seen, rule="bandit", seed=0, key=i)
        seen.append(Pull(model, 100.0))  # still running: no gain known yet
    assert [p.model for p in seen] == ["small", "large"] * MIN_PULLS


def test_prefers_the_larger_gain_per_token() -> None:
    # the same gain, five times cheaper
    cheap = pulls_of("small", 20, 0.05, 1_000) + pulls_of("large", 20, 0.05, 5_000)
    assert choose(MODELS, cheap, rule="bandit", seed=0, key="a") == "small"
    # the large model earns enough more to pay for its tokens
    better = pulls_of("small", 20, 0.01, 1_000) + pulls_of("large", 20, 0.2, 2_000)
    assert choose(MODELS, better, rule="bandit", seed=0, key="a") == "large"


def test_failures_earn_nothing_and_worse_children_no_less() -> None:
    failing = pulls_of("small", 20, 0.0, 1_000) + pulls_of("large", 20, 0.05, 2_000)
    assert choose(MODELS, failing, rule="bandit", seed=0, key="a") == "large"
    worse = pulls_of("small", 20, -0.5, 1_000) + pulls_of("large", 20, 0.0, 1_000)
    stats = arm_stats(MODELS, worse)
    assert stats["small"].mean_reward == stats["large"].mean_reward == 0.0


def test_keeps_exploring_and_learns_the_better_model() -> None:
    """Against two simulated models (the large one earns half as much again per token, with noise), the
    bandit ends up writing most children with it but keeps trying the other."""
    rng = np.random.default_rng(0)
    truth = {"small": (0.05, 1_000.0), "large": (0.15, 2_000.0)}
    seen: list[Pull] = []
    for i in range(300):
        model = choose(MODELS, seen, rule="bandit", seed=1, key=i)
        mean, cost = truth[model]
        failed = rng.random() < 0.3
        seen.append(Pull(model, cost, 0.0 if failed else float(rng.normal(mean, 0.05))))
    counts = {m: sum(p.model == m for p in seen) for m in MODELS}
    assert counts["large"] > 2 * counts["small"], counts
    assert counts["small"] > MIN_PULLS, counts


def test_running_expansions_spread_concurrent_choices() -> None:
    done = pulls_of("small", 10, 0.05, 1_000) + pulls_of("large", 10, 0.05, 1_000)
    first = choose(MODELS, done, rule="bandit", seed=0, key="a")
    other = next(m for m in MODELS if m != first)
    running = done + pulls_of(first, 10, None, 1_000)
    assert choose(MODELS, running, rule="bandit", seed=0, key="b") == other


def test_a_pure_function_of_records_and_seed() -> None:
    records = pulls_of("small", 5, 0.1, 900) + pulls_of("large", 4, None, 3_000) + [Pull("gone", 5.0, 1.0)]
    picks = {choose(MODELS, list(records), rule="bandit", seed=7, key="k") for _ in range(20)}
    assert len(picks) == 1  # a model no longer configured is ignored, nothing is random
