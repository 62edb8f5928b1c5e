"""Landscapes whose tasks fall into groups that different lineages solve (``--families grouped,deceptive``).

Task k belongs to group ``k % groups``. A design has a latent quality per group and its lineage works on
one group at a time (``focus``: each child of the seed picks one; a child keeps its parent's, or with
probability ``switch`` picks anew). A child moves its focus group's quality by N(rate, sigma_step), never
past that group's cap, and every other group's by N(-forget, sigma_step / 2): specialising costs a little
elsewhere. The true quality is the mean over tasks, as everywhere in the simulator.

* ``grouped``: every group has its own rate and cap; the best design is a lineage that found the most
  rewarding group (or switched between groups), so per-task results tell lineages apart.
* ``deceptive``: group 0 climbs fast but caps low, the others climb slowly but high, and lineages rarely
  switch: the clade that looks best early leads to a trap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Skilled:
    skills: tuple[float, ...]  # latent quality per task group
    focus: int  # the group this lineage improves; -1 for the seed (each child picks one)


@dataclass(frozen=True)
class GroupedLandscape:
    root_quality: float
    rates: tuple[float, ...]
    caps: tuple[float, ...]
    forget: float
    switch: float
    sigma_step: float
    fail: float

    def root(self, rng: np.random.Generator) -> Skilled:
        return Skilled((self.root_quality,) * len(self.rates), -1)

    def child(self, state: Skilled, rng: np.random.Generator) -> Skilled | None:
        if rng.random() < self.fail:
            return None
        groups = len(self.rates)
        focus = state.focus
        if focus < 0 or rng.random() < self.switch:
            focus = int(rng.integers(groups))
        skills = np.asarray(state.skills)
        new = skills + rng.normal(-self.forget, self.sigma_step / 2, groups)
        gained = skills[focus] + rng.normal(self.rates[focus], self.sigma_step)
        new[focus] = min(gained, max(self.caps[focus], skills[focus]))
        return Skilled(tuple(float(x) for x in np.clip(new, 0.01, 0.99)), focus)

    def quality(self, state: Skilled) -> float:
        return float(np.mean(state.skills))

    def task_qualities(self, state: Skilled, n_tasks: int) -> np.ndarray:
        return np.asarray(state.skills)[np.arange(n_tasks) % len(state.skills)]


def grouped_family(rng: np.random.Generator) -> GroupedLandscape:
    """One member of the grouped-tasks family: 2 to 4 groups with their own rates and caps."""
    groups = int(rng.integers(2, 5))
    return GroupedLandscape(
        root_quality=float(rng.uniform(0.1, 0.3)),
        rates=tuple(float(x) for x in rng.uniform(0.0, 0.05, groups)),
        caps=tuple(float(x) for x in rng.uniform(0.4, 0.9, groups)),
        forget=float(rng.uniform(0.0, 0.01)),
        switch=float(rng.uniform(0.05, 0.2)),
        sigma_step=float(rng.uniform(0.02, 0.05)),
        fail=float(rng.uniform(0.05, 0.25)),
    )


def deceptive_family(rng: np.random.Generator) -> GroupedLandscape:
    """One member of the deceptive family: a fast, low peak (group 0) beside two slow, high ones."""
    root = float(rng.uniform(0.1, 0.3))
    return GroupedLandscape(
        root_quality=root,
        rates=(float(rng.uniform(0.06, 0.1)), *(float(x) for x in rng.uniform(0.02, 0.04, 2))),
        caps=(root + float(rng.uniform(0.08, 0.15)), *(float(x) for x in rng.uniform(0.7, 0.9, 2))),
        forget=float(rng.uniform(0.005, 0.015)),
        switch=float(rng.uniform(0.0, 0.05)),
        sigma_step=float(rng.uniform(0.02, 0.04)),
        fail=float(rng.uniform(0.05, 0.2)),
    )
