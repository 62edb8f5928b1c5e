"""What makes a simulated run look like a real one; every effect has its own switch.

``Realism()`` turns everything on (what ``metasearch bench schedulers`` uses); ``Realism.off()`` is the
old, kinder simulator (every evaluation the same Bernoulli of the design's quality, exponential durations,
no failures but the landscape's, no free seed evaluation), kept to show what each effect changes.

* ``seed_free``: the seed is evaluated on every task first, free of budget, as a real study does
  (``seed_evaluations: all``) and as HGM does; the scheduler is not asked until those are dispatched.
* ``task_spread``: tasks differ in difficulty. Design quality q is turned into a per-task solve
  probability ``sigmoid(logit(q) + e_t)``: a fraction ``easy_tasks`` of tasks has e_t = +5 (nearly always
  solved), ``never_tasks`` are never solved, the rest draw e_t ~ N(0, task_spread) (SWE-bench looks like
  this). A design's true quality is its mean solve probability over the study's tasks.
* ``durations``: an evaluation lasts ``eval_time_success`` or ``eval_time_failure`` on average (a solved
  task runs its tests to the end, a failed one often stops early), log-normal with ``duration_sigma``, times
  a per-design speed factor (log-normal, ``design_speed_sigma``: some designs take more turns).
  Expansions last ``expansion_time`` (log-normal) and a failed one stops after ``failed_expansion_time``
  of it. Off: exponential with the landscape's means.
* ``infra_failure_rate``: a job dies for an infrastructure reason (a container that did not start, a
  lost daemon) after ``infra_time`` of its duration; it counts no result and no budget and its pair goes
  back to the queue (the Study's ``release``), so only time is lost.
* ``expansion_tokens``: the mean tokens an expansion spends (log-normal), reported as cost.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Realism:
    seed_free: bool = True
    task_spread: float = 1.5
    easy_tasks: float = 0.1
    never_tasks: float = 0.15
    durations: bool = True
    eval_time_success: float = 1.5
    eval_time_failure: float = 1.0
    duration_sigma: float = 0.5
    design_speed_sigma: float = 0.3
    expansion_time: float = 5.0
    failed_expansion_time: float = 0.4
    infra_failure_rate: float = 0.03
    infra_time: float = 0.2
    expansion_tokens: float = 200_000.0

    @classmethod
    def off(cls) -> Realism:
        return cls(
            seed_free=False,
            task_spread=0.0,
            easy_tasks=0.0,
            never_tasks=0.0,
            durations=False,
            infra_failure_rate=0.0,
            expansion_tokens=0.0,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Realism:
        """From a mapping with these field names; an unknown key is an error naming it."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"realism: unknown key(s) {unknown}; allowed: {sorted(known)}")
        return replace(cls(), **data)

    @property
    def heterogeneous(self) -> bool:
        return self.task_spread > 0 or self.easy_tasks > 0 or self.never_tasks > 0

    def task_easiness(self, n_tasks: int, rng: np.random.Generator) -> np.ndarray:
        """Per-task offsets e_t on the logit scale (+inf: always solved, -inf: never)."""
        if not self.heterogeneous:
            return np.zeros(n_tasks)
        e = rng.normal(0.0, self.task_spread, n_tasks)
        kind = rng.random(n_tasks)
        e[kind < self.easy_tasks] = 5.0
        e[kind > 1.0 - self.never_tasks] = -np.inf
        return e


def solve_probabilities(quality: float | np.ndarray, easiness: np.ndarray) -> np.ndarray:
    """Per-task solve probabilities of a design of latent quality ``quality`` in (0, 1): one number, or one
    per task (a landscape whose designs are better at some tasks than at others)."""
    if not np.any(easiness):
        return np.broadcast_to(np.asarray(quality, dtype=float), (len(easiness),)).copy()
    q = np.clip(quality, 1e-6, 1 - 1e-6)
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-(np.log(q / (1 - q)) + easiness)))
