"""``dgm``: the Darwin Gödel Machine's archive policy, made asynchronous.

* Parent: probability proportional to ``sigmoid(k (mean - 0.5)) / (1 + children)`` over agents with at
  least one finished evaluation (own mean as the score, k = 10 as in DGM).
* Staged evaluation: a new agent first gets the first ``stage1`` tasks (in the study's task order); if
  its mean there reaches ``promote_at`` (40 %), it gets ``stage2`` more. Agents never go past their stage.
* Balance: finish staged evaluations first (oldest agent first); expand when none is left to dispatch, or
  when the HGM rule (``N ** alpha``) asks for it and the pending staged work is only in flight.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from metasearch.schedulers.base import BaseScheduler, SchedulerConfig, SearchState
from metasearch.types import Evaluate, Expand, Job


class DGMConfig(SchedulerConfig):
    stage1: int = Field(10, ge=1)
    stage2: int = Field(50, ge=0)
    promote_at: float = Field(0.4, ge=0, le=1)
    sharpness: float = Field(10.0, gt=0)


class DGMScheduler(BaseScheduler):
    Config = DGMConfig
    config: DGMConfig

    def allowed(self, state: SearchState, i: int) -> int:
        """How many tasks agent ``i`` may be evaluated on at its current stage."""
        tree = state.tree
        n1 = min(self.config.stage1, len(state.tasks))
        s, n = float(tree.own_s[i]), int(tree.own_n[i])
        if n >= n1 and s / n >= self.config.promote_at:
            return min(len(state.tasks), n1 + self.config.stage2)
        return n1

    def next_job(self, state: SearchState, rng: np.random.Generator) -> Job | None:
        tree = state.tree
        for i in range(len(tree)):  # oldest first
            if int(tree.n_seen[i]) < self.allowed(state, i):
                agent_id = tree.ids[i]
                task = next(t for t in state.tasks[: self.allowed(state, i)] if t not in tree.seen[i])
                return Evaluate(agent_id=agent_id, task_id=task)
        if not self.can_expand(state):
            return None
        n = tree.view("own_n")
        scored = np.flatnonzero(n > 0)
        if len(scored) == 0:
            return None
        mean = tree.view("own_s")[scored] / n[scored]
        weight = (
            1.0
            / (1.0 + np.exp(-self.config.sharpness * (mean - 0.5)))
            / (1.0 + tree.view("n_children")[scored])
        )
        return Expand(parent_id=tree.ids[int(rng.choice(scored, p=weight / weight.sum()))])
