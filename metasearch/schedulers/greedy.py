"""``greedy``: expand the agent with the best own mean; evaluate the least-evaluated open agent.

A baseline: it has the same expand/evaluate balance as ``hgm`` but no clade statistics and no sampling
(ties are broken at random).
"""

from __future__ import annotations

import numpy as np

from metasearch.schedulers.base import BaseScheduler, SearchState, open_agents, random_unseen_task
from metasearch.types import Expand, Job


class GreedyScheduler(BaseScheduler):
    def next_job(self, state: SearchState, rng: np.random.Generator) -> Job | None:
        tree = state.tree
        n = tree.view("own_n")
        candidates = open_agents(state)
        evaluated = np.flatnonzero(n > 0)
        expand = self.wants_expansion(state) or (len(candidates) == 0 and self.can_expand(state))
        if expand and len(evaluated):
            mean = tree.view("own_s")[evaluated] / n[evaluated]
            best = evaluated[mean == mean.max()]
            return Expand(parent_id=tree.ids[int(rng.choice(best))])
        if len(candidates):
            fewest = candidates[n[candidates] == n[candidates].min()]
            return random_unseen_task(state, int(rng.choice(fewest)), rng)
        return None
