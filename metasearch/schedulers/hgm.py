"""``hgm``: the Huxley-Gödel Machine policy (arXiv 2510.21614), written from the paper.

* Expand or evaluate: expand when ``N ** alpha >= agents excluding seeds + expansions in flight`` (N =
  evaluations started, seeds' initial evaluations excluded), if an eligible parent exists; evaluate
  otherwise. When no agent has an unseen task left, expand whenever the budget allows.
* Which parent: Thompson sampling on clade counts, Beta(tau (1 + clade successes), tau (1 + clade failures)).
  Eligible parents have at least one finished evaluation and an own mean above ``min_parent_mean``
  (0 by default, as in HGM: a design that never scored is not worth copying). Seeds stay eligible.
* Which evaluation: Thompson sampling on the agent's own counts among agents with unseen tasks (a new agent
  starts at Beta(1, 1)), then a uniformly random unseen task.
* ``initial_expansions``: the first expansions all go to the seeds in parallel, as HGM does, so the
  asynchronous schedule does not commit early to one lineage.
* ``cool_down``: tau = B / b (B the evaluation budget, b what is left) multiplies both Beta parameters,
  keeping posterior means and shrinking their spread, so choices grow greedier as the budget runs out.

Our additions, off by default and measured in ``metasearch bench schedulers``:
``pending_aware`` counts expansions already in flight under a parent as virtual failures of its clade
(so parallel workers spread out), and ``count_failed_expansions`` counts a parent's failed expansions as
failures of its clade (a parent whose children never compile is not productive).
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from metasearch.schedulers.base import (
    BaseScheduler,
    SchedulerConfig,
    SearchState,
    open_agents,
    random_unseen_task,
    thompson_argmax,
)
from metasearch.types import Expand, Job


class HGMConfig(SchedulerConfig):
    cool_down: bool = False
    initial_expansions: int = Field(2, ge=0)
    min_parent_mean: float = Field(0.0, ge=0, lt=1)
    pending_aware: bool = False
    count_failed_expansions: bool = False


class HGMScheduler(BaseScheduler):
    Config = HGMConfig
    config: HGMConfig

    def tau(self, state: SearchState) -> float:
        budget = state.budget.evaluations
        if not self.config.cool_down or not budget:
            return 1.0
        return float(budget / max(1, budget - state.usage.evaluations))

    def next_job(self, state: SearchState, rng: np.random.Generator) -> Job | None:
        tree = state.tree
        if len(tree) == 0:
            return None
        if self.can_expand(state) and state.usage.expansions < self.config.initial_expansions:
            roots = tree.roots()
            return Expand(parent_id=tree.ids[roots[state.usage.expansions % len(roots)]])
        candidates = open_agents(state)
        parents = self.eligible_parents(state)
        expand = self.wants_expansion(state) or (len(candidates) == 0 and self.can_expand(state))
        if expand and len(parents):
            return Expand(parent_id=tree.ids[self.choose_parent(state, parents, rng)])
        if len(candidates):
            return random_unseen_task(state, self.choose_agent(state, candidates, rng), rng)
        return None

    def eligible_parents(self, state: SearchState) -> np.ndarray:
        n = state.tree.view("own_n")
        s = state.tree.view("own_s")
        mean = np.divide(s, n, out=np.zeros_like(s), where=n > 0)
        return np.flatnonzero((n > 0) & (mean > self.config.min_parent_mean))

    def choose_parent(self, state: SearchState, parents: np.ndarray, rng: np.random.Generator) -> int:
        tree = state.tree
        s = tree.view("clade_s")[parents]
        f = tree.view("clade_n")[parents] - s
        if self.config.pending_aware:
            f = f + tree.view("pending_expansions")[parents]
        if self.config.count_failed_expansions:
            f = f + tree.view("failed")[parents]
        return int(parents[thompson_argmax(s, f, rng, self.tau(state))])

    def choose_agent(self, state: SearchState, candidates: np.ndarray, rng: np.random.Generator) -> int:
        tree = state.tree
        s = tree.view("own_s")[candidates]
        f = tree.view("own_n")[candidates] - s
        return int(candidates[thompson_argmax(s, f, rng, self.tau(state))])
