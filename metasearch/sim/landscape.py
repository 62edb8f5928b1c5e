"""Landscapes: where self-improvement leads, with the true quality of every design known.

``Landscape`` is the protocol any user can implement (``metasearch bench schedulers --landscape
module:factory`` takes any ``factory(rng) -> Landscape``).

The default family, ``LineageLandscape``, models the *metaproductivity-performance mismatch*: a design
has a visible quality q (its true success probability) and a hidden, heritable improvement rate m. A
child inherits m with drift (m' = m + N(0, sigma_m)) and moves its quality by a step drawn around m'
(q' = q + N(m', sigma_q), clipped to [0.01, 0.99]). A design's own quality therefore says little about
how good its descendants will become: a strong design can sit at the end of a lineage that has stopped
improving, a weak one can start a lineage that climbs. Expansions fail with a probability that grows
as the lineage drifts downward (broken code tends to beget broken code). Each family member draws its
own root quality, rates and noise levels, so the benchmark averages over many landscapes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np


class Landscape(Protocol):
    def root(self, rng: np.random.Generator) -> Any: ...

    def child(self, state: Any, rng: np.random.Generator) -> Any | None:
        """A child design of ``state``, or None for a failed expansion."""
        ...

    def quality(self, state: Any) -> float:
        """True probability that the design solves a task."""
        ...


@dataclass(frozen=True)
class Design:
    quality: float
    rate: float


@dataclass(frozen=True)
class LineageLandscape:
    root_quality: float
    root_rate: float
    sigma_rate: float
    sigma_step: float
    fail_base: float
    expansion_time: float = 5.0
    evaluation_time: float = 1.0

    def root(self, rng: np.random.Generator) -> Design:
        return Design(self.root_quality, self.root_rate)

    def child(self, state: Design, rng: np.random.Generator) -> Design | None:
        rate = state.rate + rng.normal(0.0, self.sigma_rate)
        fail = min(0.9, self.fail_base + max(0.0, -rate) * 2.0)
        if rng.random() < fail:
            return None
        quality = float(np.clip(state.quality + rng.normal(rate, self.sigma_step), 0.01, 0.99))
        return Design(quality, rate)

    def quality(self, state: Design) -> float:
        return state.quality

    def expansion_duration(self, rng: np.random.Generator) -> float:
        return float(rng.exponential(self.expansion_time))

    def evaluation_duration(self, rng: np.random.Generator) -> float:
        return float(rng.exponential(self.evaluation_time))


def default_family(rng: np.random.Generator) -> LineageLandscape:
    """One member of the default family; every parameter drawn from a broad, fixed prior."""
    return LineageLandscape(
        root_quality=float(rng.uniform(0.1, 0.4)),
        root_rate=float(rng.normal(-0.01, 0.02)),
        sigma_rate=float(rng.uniform(0.01, 0.04)),
        sigma_step=float(rng.uniform(0.03, 0.08)),
        fail_base=float(rng.uniform(0.05, 0.3)),
    )


@dataclass(frozen=True)
class Kinded:
    quality: float
    sprint: bool  # a one-off gain whose own descendants only get worse


@dataclass(frozen=True)
class DisagreementLandscape:
    """Own score and metaproductivity disagree on purpose.

    A "climber" design has children that improve slowly but steadily (``climb`` per generation). With
    probability ``sprint_share`` a climber's child is instead a "sprinter": an immediate gain of ``jump``
    (it scores better than all its climbing siblings) whose own children lose ``decay`` per generation and
    fail more often (a local trick that breaks whatever builds on it). A scheduler that expands the best
    own score keeps expanding sprinters; one that follows clade statistics keeps climbing.
    """

    root_quality: float
    climb: float
    jump: float
    decay: float
    sprint_share: float
    sigma_step: float
    fail_climb: float
    fail_sprint: float

    def root(self, rng: np.random.Generator) -> Kinded:
        return Kinded(self.root_quality, False)

    def child(self, state: Kinded, rng: np.random.Generator) -> Kinded | None:
        if rng.random() < (self.fail_sprint if state.sprint else self.fail_climb):
            return None
        if state.sprint:
            step, sprint = -self.decay, True
        elif rng.random() < self.sprint_share:
            step, sprint = self.jump, True
        else:
            step, sprint = self.climb, False
        quality = float(np.clip(state.quality + rng.normal(step, self.sigma_step), 0.01, 0.99))
        return Kinded(quality, sprint)

    def quality(self, state: Kinded) -> float:
        return state.quality


def disagreement_family(rng: np.random.Generator) -> DisagreementLandscape:
    """One member of the disagreement family (``--landscape disagreement``)."""
    return DisagreementLandscape(
        root_quality=float(rng.uniform(0.1, 0.3)),
        climb=float(rng.uniform(0.01, 0.03)),
        jump=float(rng.uniform(0.08, 0.15)),
        decay=float(rng.uniform(0.02, 0.06)),
        sprint_share=float(rng.uniform(0.3, 0.6)),
        sigma_step=float(rng.uniform(0.02, 0.05)),
        fail_climb=float(rng.uniform(0.05, 0.2)),
        fail_sprint=float(rng.uniform(0.2, 0.4)),
    )
