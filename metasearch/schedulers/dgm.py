"""``dgm``: the Darwin Gödel Machine's archive policy (arXiv 2505.22954), made asynchronous.

What DGM does (paper Sec. 3 and Appendix A; ``jennyzzt/dgm`` ``DGM_outer.py``, see research/peers.md §1.2):

* Archive: a child enters the archive only if it "compiles" and passes the first evaluation stage
  (``is_compiled_self_improve``: it was evaluated on the whole first stage and produced at least one
  non-empty patch). Here: it finished its ``stage1`` evaluations and scored above 0 on at least one of them
  (``archive: compiled``; ``archive: all`` keeps every child). Seeds are always in the archive.
* Parent: sampled (with replacement) with probability proportional to
  ``sigmoid(sharpness (score - 0.5)) / (1 + archived children)``, score = the own mean over every task the
  agent was evaluated on, sharpness lambda = 10 (``score_child_prop``, the default selection).
* Staged evaluation: a new agent first gets the first ``stage1`` tasks (10) in the study's task order; if
  its mean there reaches ``promote_at`` (40 %), it gets ``stage2`` (50) more. Agents never go past their stage.
* Final agent: the highest empirical mean among the agents with the most complete evaluation (``final:
  mean``, ``min_trials: 60``), as DGM reports its best archive member.

Remaining differences: DGM is generational (choose ``selfimprove_size`` parents, wait for the whole
generation); here a freed worker takes the next job at once: it finishes staged evaluations first (oldest
agent first) and expands when none is left to dispatch. The "non-empty patch" check becomes "a score above
0", since the search tree does not see empty patches. DGM's third stage (200 tasks for agents at the
second-best archive score) is not reproduced. The study's budget counts evaluations, not generations.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from metasearch.schedulers.base import BaseScheduler, SchedulerConfig, SearchState
from metasearch.schedulers.final import FinalMethod
from metasearch.types import Evaluate, Expand, Job


class StagedConfig(SchedulerConfig):
    """DGM's archive and staged evaluation, shared with ``gea`` (which DGM's protocol also runs)."""

    stage1: int = Field(10, ge=1)
    stage2: int = Field(50, ge=0)
    promote_at: float = Field(0.4, ge=0, le=1)
    archive: Literal["compiled", "all"] = "compiled"
    final: FinalMethod = "mean"
    min_trials: int = Field(60, ge=1)


class DGMConfig(StagedConfig):
    sharpness: float = Field(10.0, gt=0)


class StagedScheduler(BaseScheduler):
    """Staged evaluations first (oldest agent first), then an expansion of a parent from the archive that
    ``choose_parent`` picks; subclasses choose the parent."""

    Config = StagedConfig
    config: StagedConfig

    def allowed(self, state: SearchState, i: int) -> int:
        """How many tasks agent ``i`` may be evaluated on at its current stage."""
        tree = state.tree
        n1 = min(self.config.stage1, len(state.tasks))
        s, n = float(tree.own_s[i]), int(tree.own_n[i])
        if n >= n1 and s / n >= self.config.promote_at:
            return min(len(state.tasks), n1 + self.config.stage2)
        return n1

    def archived(self, state: SearchState) -> np.ndarray:
        """Boolean mask of the agents in DGM's archive (seeds; children that passed stage 1)."""
        tree = state.tree
        seeds = tree.view("parent") < 0
        if self.config.archive == "all":
            return tree.view("own_n") > 0
        n1 = min(self.config.stage1, len(state.tasks))
        passed = (tree.view("own_n") >= n1) & (tree.view("own_s") > 0)
        return (seeds & (tree.view("own_n") > 0)) | passed

    def next_job(self, state: SearchState, rng: np.random.Generator) -> Job | None:
        tree = state.tree
        for i in range(len(tree)):  # oldest first
            if int(tree.n_seen[i]) < self.allowed(state, i):
                agent_id = tree.ids[i]
                task = next(t for t in state.tasks[: self.allowed(state, i)] if t not in tree.seen[i])
                return Evaluate(agent_id=agent_id, task_id=task)
        if not self.can_expand(state):
            return None
        members = np.flatnonzero(self.archived(state))
        if len(members) == 0:
            return None
        return Expand(parent_id=tree.ids[self.choose_parent(state, members, rng)])

    def choose_parent(self, state: SearchState, members: np.ndarray, rng: np.random.Generator) -> int:
        """The index of the archive member (``members``, non-empty) to expand."""
        raise NotImplementedError


class DGMScheduler(StagedScheduler):
    Config = DGMConfig
    config: DGMConfig

    def choose_parent(self, state: SearchState, members: np.ndarray, rng: np.random.Generator) -> int:
        tree = state.tree
        parent = tree.view("parent")
        archived = self.archived(state)
        children = np.bincount(parent[archived & (parent >= 0)], minlength=len(tree))
        mean = tree.view("own_s")[members] / tree.view("own_n")[members]
        weight = 1.0 / (1.0 + np.exp(-self.config.sharpness * (mean - 0.5))) / (1.0 + children[members])
        return int(rng.choice(members, p=weight / weight.sum()))
