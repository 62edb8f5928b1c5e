"""Which model writes the next child: a bandit on what each model's children earned per token spent.

A pure function of the expansions so far (``types.Pull`` records, rebuilt from the journal by
``archive.tally.ModelLedger.pulls``), the rule, the study's seed and the job's key: a resumed study, or the
simulator, given the same records makes the same choice.

The reward of one expansion is its *gain*: the child's score minus its parent's on the tasks both were
graded on, and 0 for a failed expansion. Only the positive part counts: a child worse than its parent is
worth as little to the search as a failed expansion (the scheduler stops building on it), not less. The
``bandit`` rule (UCB1 on gain per cost) takes the model with the largest

    (mean reward + explore * spread * sqrt(2 ln N / n)) / mean cost per expansion

where n counts the model's expansions (running ones too, so that concurrent choices spread), N all of
them, and the spread is the standard deviation of the model's own rewards, shrunk toward that of all
models' rewards (so that the bonus is on the data's scale, and a model whose expansions all fail stops
earning one). The cost is tokens, or USD when every model has a price. A model whose gains are all unknown yet counts the pooled mean. Models with fewer than
``MIN_PULLS`` expansions are tried first, in order. ``uniform`` draws every model with the same chance
(seeded by the study's seed and the job's key); ``first`` always takes the first.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from metasearch.types import Pull

Rule = Literal["bandit", "uniform", "first"]
MIN_PULLS = 4
EXPLORE = 1.0
"""Lower values did as well in ``metasearch bench models`` but, with two models, left the better one for
good after its first tries failed in one run of five to eight."""
PRIOR_SD = 0.05
"""Spread of a reward (score units) assumed before the models' rewards show their own."""
PRIOR_N = 2
"""A model's own spread counts as if it had this many more rewards at the pooled spread."""


@dataclass(frozen=True)
class ArmStats:
    """What the bandit knows of one model."""

    pulls: int  # expansions chosen, running ones included
    observed: int  # expansions whose gain is known
    mean_reward: float  # mean positive part of the gain over the observed ones
    mean_cost: float  # mean cost per expansion over those with a cost (0.0: none yet)
    sum_sq: float = 0.0  # sum of squared deviations of those rewards from their mean


def arm_stats(models: Sequence[str], pulls: Sequence[Pull]) -> dict[str, ArmStats]:
    out: dict[str, ArmStats] = {}
    for name in models:
        mine = [p for p in pulls if p.model == name]
        rewards = [max(0.0, p.gain) for p in mine if p.gain is not None]
        costs = [p.cost for p in mine if p.cost > 0]
        mean = sum(rewards) / len(rewards) if rewards else 0.0
        out[name] = ArmStats(
            pulls=len(mine),
            observed=len(rewards),
            mean_reward=mean,
            mean_cost=sum(costs) / len(costs) if costs else 0.0,
            sum_sq=sum((r - mean) ** 2 for r in rewards),
        )
    return out


def pooled(pulls: Sequence[Pull]) -> tuple[float, float]:
    """Mean and spread of one expansion's reward over all models; the spread shrunk toward ``PRIOR_SD``."""
    rewards = [max(0.0, p.gain) for p in pulls if p.gain is not None]
    n = len(rewards)
    mean = sum(rewards) / n if n else 0.0
    if n < 2:
        return mean, PRIOR_SD
    var = sum((r - mean) ** 2 for r in rewards) / (n - 1)
    return mean, math.sqrt((var * (n - 1) + PRIOR_SD**2) / n)


def key_rng(seed: int, key: str | int) -> np.random.Generator:
    """A generator fixed by the study's seed and the job's key (a job id, or the simulator's counter)."""
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big"))


def choose(
    models: Sequence[str],
    pulls: Sequence[Pull],
    *,
    rule: Rule,
    seed: int,
    key: str | int,
    explore: float = EXPLORE,
) -> str:
    """The model for the expansion ``key``. ``pulls`` are every earlier expansion that chose a model
    (running ones too, with ``gain`` None); pulls of models not in ``models`` are ignored. Raises
    ValueError without models."""
    if not models:
        raise ValueError("no models to choose from")
    if rule == "first" or len(models) == 1:
        return models[0]
    if rule == "uniform":
        return models[int(key_rng(seed, key).integers(len(models)))]
    pulls = [p for p in pulls if p.model in models]
    stats = arm_stats(models, pulls)
    fewest = min(s.pulls for s in stats.values())
    if fewest < MIN_PULLS:
        return next(m for m in models if stats[m].pulls == fewest)
    return max(models, key=lambda m: index(stats, pulls, explore)[m])


def index(stats: Mapping[str, ArmStats], pulls: Sequence[Pull], explore: float = EXPLORE) -> dict[str, float]:
    """Each model's upper confidence bound of reward per cost (see the module's docstring)."""
    mean_all, spread_all = pooled(pulls)
    total = sum(s.pulls for s in stats.values())
    known = [s.mean_cost for s in stats.values() if s.mean_cost > 0]
    floor = min(known) if known else 1.0  # a model that has spent nothing yet costs the cheapest's
    out = {}
    for name, s in stats.items():
        mean = s.mean_reward if s.observed else mean_all
        spread = math.sqrt((s.sum_sq + PRIOR_N * spread_all**2) / (max(s.observed - 1, 0) + PRIOR_N))
        bonus = explore * spread * math.sqrt(2 * math.log(max(total, 2)) / max(s.pulls, 1))
        out[name] = (mean + bonus) / (s.mean_cost if s.mean_cost > 0 else floor)
    return out
