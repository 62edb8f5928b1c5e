"""``random``: uniform parent, uniform (agent, task); the same expand/evaluate balance as ``hgm``."""

from __future__ import annotations

import numpy as np

from metasearch.schedulers.base import BaseScheduler, SearchState, open_agents, random_unseen_task
from metasearch.types import Expand, Job


class RandomScheduler(BaseScheduler):
    def next_job(self, state: SearchState, rng: np.random.Generator) -> Job | None:
        tree = state.tree
        candidates = open_agents(state)
        expand = self.wants_expansion(state) or (len(candidates) == 0 and self.can_expand(state))
        if expand and len(tree):
            return Expand(parent_id=tree.ids[int(rng.integers(len(tree)))])
        if len(candidates):
            return random_unseen_task(state, int(rng.choice(candidates)), rng)
        return None
