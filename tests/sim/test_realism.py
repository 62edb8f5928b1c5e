"""Each realism switch of the simulator changes what a run looks like, in the direction documented."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from metasearch.registry import SCHEDULERS
from metasearch.sim import default_family, simulate
from metasearch.sim.engine import SimResult
from metasearch.sim.landscape import DisagreementLandscape, Kinded, disagreement_family
from metasearch.sim.realism import Realism, solve_probabilities

OFF = Realism.off()


def run(realism: Realism, seed: int = 0, budget: int = 200, name: str = "hgm") -> SimResult:
    cls = SCHEDULERS.resolve(name)
    return simulate(
        default_family(np.random.default_rng([seed, 0])),
        cls(cls.Config()),
        budget=budget,
        workers=4,
        n_tasks=30,
        seed=seed,
        realism=realism,
    )


def test_seed_free_evaluates_the_seed_on_every_task_outside_the_budget() -> None:
    on, off = run(replace(OFF, seed_free=True)), run(OFF)
    assert on.tree.own("a0")[1] == 30 and on.evaluations == off.evaluations == 200
    assert sum(on.tree.own(a)[1] for a in on.tree.ids) == 230
    assert sum(off.tree.own(a)[1] for a in off.tree.ids) == 200


def test_task_difficulty_makes_some_tasks_never_and_some_always_solved() -> None:
    realism = replace(OFF, task_spread=1.0, easy_tasks=0.3, never_tasks=0.3)
    easiness = realism.task_easiness(200, np.random.default_rng(0))
    p = solve_probabilities(0.3, easiness)
    assert (p == 0).mean() > 0.2 and (p > 0.9).mean() > 0.2
    assert np.all(solve_probabilities(0.3, OFF.task_easiness(200, np.random.default_rng(0))) == 0.3)


def test_durations_depend_on_the_outcome() -> None:
    slow_success = replace(OFF, durations=True, eval_time_success=20.0, eval_time_failure=1.0)
    slow_failure = replace(OFF, durations=True, eval_time_success=1.0, eval_time_failure=20.0)
    # the same run (same seed) takes longer when the frequent outcome (failure, quality < 0.5) is slow
    assert run(slow_failure).extra["wall_time"] > run(slow_success).extra["wall_time"]


def test_infrastructure_failures_cost_time_not_budget() -> None:
    flaky = run(replace(OFF, infra_failure_rate=0.2))
    assert flaky.extra["infra_failures"] > 10 and flaky.evaluations == 200
    assert sum(flaky.tree.own(a)[1] for a in flaky.tree.ids) == 200  # every pair once, none lost
    assert run(OFF).extra["infra_failures"] == 0


def test_expansions_cost_tokens() -> None:
    assert run(replace(OFF, expansion_tokens=1000.0)).extra["tokens"] > 0 == run(OFF).extra["tokens"]


def test_realism_from_dict_names_an_unknown_key() -> None:
    assert Realism.from_dict({"seed_free": False}).seed_free is False
    with pytest.raises(ValueError, match="seed_fre"):
        Realism.from_dict({"seed_fre": False})


def test_disagreement_landscape_rewards_the_worse_looking_child() -> None:
    land = DisagreementLandscape(0.2, 0.02, 0.12, 0.05, 0.5, 0.0, 0.0, 0.0)
    rng = np.random.default_rng(0)
    kids = [land.child(Kinded(0.3, False), rng) for _ in range(50)]
    sprint = next(k for k in kids if k is not None and k.sprint)
    climb = next(k for k in kids if k is not None and not k.sprint)
    assert sprint.quality > climb.quality  # the sprinter looks better now ...

    def best_descendant(state: Kinded, depth: int) -> float:
        for _ in range(depth):
            nxt = land.child(state, rng)
            assert nxt is not None
            state = nxt if state.sprint or not nxt.sprint else state
        return state.quality

    assert best_descendant(climb, 8) > best_descendant(sprint, 8)  # ... its lineage is worse
    assert isinstance(disagreement_family(np.random.default_rng(1)), DisagreementLandscape)
