"""Several meta-agent models in the simulator: each writes children of its own quality at its own cost.

A ``SimModel`` shifts the quality of each child it writes by ``gain`` on top of the landscape's step, fails
an extra fraction ``fail`` of its expansions, and spends ``tokens`` per expansion on average (log-normal).
``ModelArms`` chooses the model of every expansion with a rule of ``metasearch.schedulers.model_choice`` from what the
run has observed: each child's score minus its parent's on the tasks both were graded on, 0 for a failed
expansion, exactly as a real study computes it from its journal. Landscapes whose designs are dataclasses
with a ``quality`` field (the default and disagreement families) take models.

``metasearch bench models`` compares, at the same token budget and on the same landscapes and seeds (paired),
the bandit with each model alone and with a uniform mix: ``model_bench.py``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from metasearch.schedulers.cmp import SearchTree
from metasearch.schedulers.model_choice import Rule, choose
from metasearch.types import Expand, Pull


@dataclass(frozen=True)
class SimModel:
    name: str
    gain: float
    """Added to the quality step of each child it writes (score units)."""
    fail: float
    """Probability that an expansion it writes fails, on top of the landscape's failures."""
    tokens: float
    """Mean tokens per expansion."""


@dataclass
class _Expansion:
    model: str
    parent: str
    cost: float
    child: str | None = None
    done: bool = False


class ModelArms:
    """The models of one simulated run and the rule that picks among them (``simulate(models=...)``)."""

    def __init__(self, models: list[SimModel], rule: Rule, seed: int) -> None:
        if not models:
            raise ValueError("no models")
        self.models = {m.name: m for m in models}
        self.rule = rule
        self.seed = seed
        self.jobs: dict[str, _Expansion] = {}
        self._count = 0  # expansions asked for: the choice's key (the schedulers' job ids are random)

    def pulls(self, tree: SearchTree) -> list[Pull]:
        """What the rule sees: every expansion so far, its gain once the child shares a graded task with
        its parent (lost expansions are left out, as a real study abandons them)."""
        out = []
        for e in self.jobs.values():
            if e.done and e.child is None:
                out.append(Pull(e.model, e.cost, 0.0))
            elif e.done and e.child is not None:
                out.append(Pull(e.model, e.cost, gain(tree, e.child, e.parent)))
            elif not e.done:
                out.append(Pull(e.model, e.cost))
        return out

    def expand(self, world: Any, job: Expand, tree: SearchTree) -> tuple[Any, float, float]:
        """(child state or None, duration, tokens) of an expansion written by the chosen model."""
        name = choose(list(self.models), self.pulls(tree), rule=self.rule, seed=self.seed, key=self._count)
        self._count += 1
        model = self.models[name]
        child, duration = world.expansion(job)
        if child is not None and world.rng.random() < model.fail:
            child = None
        if child is not None:
            quality = float(np.clip(child.quality + model.gain, 0.01, 0.99))
            child = dataclasses.replace(child, quality=quality)
        cost = model.tokens * float(np.exp(world.rng.normal(-0.125, 0.5)))
        self.jobs[job.job_id] = _Expansion(name, job.parent_id, cost)
        return child, duration, cost

    def finished(self, job: Expand, agent_id: str | None, *, lost: bool = False) -> None:
        if lost:
            self.jobs.pop(job.job_id, None)
            return
        entry = self.jobs[job.job_id]
        entry.child, entry.done = agent_id, True

    def counts(self) -> dict[str, int]:
        """Expansions each model wrote."""
        out = dict.fromkeys(self.models, 0)
        for e in self.jobs.values():
            out[e.model] += 1
        return out


def gain(tree: SearchTree, child: str, parent: str) -> float | None:
    """The child's mean score minus its parent's over the tasks both have a result on; None if none."""
    mine, theirs = tree.task_scores(child), tree.task_scores(parent)
    shared = [t for t in mine if t in theirs]
    if not shared:
        return None
    return sum(mine[t] - theirs[t] for t in shared) / len(shared)


def similar_models(rng: np.random.Generator) -> list[SimModel]:
    """Two models, drawn per run, alike on average once cost is counted: a small one that costs 2-3 times
    less per expansion, fails more often and writes worse children, and a large one. Which of them earns
    more per token differs from run to run; each is the better one about half the time."""
    return [
        SimModel(
            "small",
            gain=float(rng.uniform(-0.05, 0.01)),
            fail=float(rng.uniform(0.2, 0.95)),
            tokens=float(rng.uniform(30_000, 80_000)),
        ),
        SimModel(
            "large",
            gain=float(rng.uniform(-0.02, 0.04)),
            fail=float(rng.uniform(0.05, 0.5)),
            tokens=float(rng.uniform(80_000, 200_000)),
        ),
    ]


def distinct_models(rng: np.random.Generator) -> list[SimModel]:
    """Two models of which one, drawn per run, is of no use to this search: nearly all of its expansions
    fail and its children are worse than their parents (as the 135M and 270M models measured as the
    ``llm`` meta-agent in docs/local-models.md, which admitted no child). The other fails 5-30% of the
    time and writes children a little better. The small one costs 2-3 times less per expansion."""
    weak = int(rng.integers(2))
    out = []
    for i, (name, low, high) in enumerate((("small", 30_000, 80_000), ("large", 80_000, 200_000))):
        if i == weak:
            gain, fail = float(rng.uniform(-0.05, -0.01)), float(rng.uniform(0.9, 1.0))
        else:
            gain, fail = float(rng.uniform(0.0, 0.03)), float(rng.uniform(0.05, 0.3))
        out.append(SimModel(name, gain=gain, fail=fail, tokens=float(rng.uniform(low, high))))
    return out


MODEL_FAMILIES = {"similar": similar_models, "distinct": distinct_models}
