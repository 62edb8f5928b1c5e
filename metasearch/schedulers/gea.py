"""``gea``: Group-Evolving Agents' parent selection (arXiv 2602.04837), on DGM's archive and staged evaluation.

What GEA does, by the paper's method sections (research/anchors-2026-11.md has the summary):

* "Parent Group Selection" (the Performance-Novelty criterion): every agent has a task-success vector z_i;
  the distance of two agents is the cosine distance 1 - z_i.z_j / (|z_i| |z_j| + eps); an agent's novelty
  nov(i) is its mean distance to its M most similar agents in the archive; its score is
  performance x novelty; the K best-scoring agents form the parent group. Here: z_i holds the agent's
  scores, two agents are compared on the tasks both have a result for (``diversity.cosine_novelty``),
  performance is the own mean over every task evaluated (DGM's score), and an agent that shares no task
  with any other counts as novelty 1.
* "Open-Ended Group Evolution": the parent group jointly produces an offspring group of the same size.
  Here each expansion takes the next member of the current top K in rank order (expansion number mod K),
  so each member of the group gets a child per K expansions.
* Experimental setup: K = 2 (``group_size``), M = 4 (``neighbours``).
* Archive, evaluation and final agent: DGM's, GEA's baseline and code base: a child enters the archive
  after DGM's first evaluation stage, evaluation is staged 10 -> 50 tasks, and the final agent is the best
  mean among the most evaluated (``dgm.py``, ``StagedScheduler``).

Remaining differences: (1) GEA writes the offspring from the whole group's pooled experience (traces,
patches, outcomes), which is the proposer's part and not reproducible by a scheduler: here a child has
one parent; (2) GEA is generational (choose K, wait for K children); here a freed worker takes the next
job at once and the group is recomputed before every expansion; (3) the paper's probe tasks are the
study's tasks here; (4) that GEA keeps DGM's archive rule and staged evaluation is our reading of its
DGM-derived code base, not a statement of the paper.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from metasearch.schedulers import diversity
from metasearch.schedulers.base import SearchState
from metasearch.schedulers.dgm import StagedConfig, StagedScheduler


class GEAConfig(StagedConfig):
    group_size: int = Field(2, ge=1)
    """K: the parent group is the K archive members with the highest performance x novelty."""
    neighbours: int = Field(4, ge=1)
    """M: novelty is the mean cosine distance to this many most similar archive members."""


class GEAScheduler(StagedScheduler):
    Config = GEAConfig
    config: GEAConfig

    def parent_group(self, state: SearchState, members: np.ndarray) -> np.ndarray:
        """The top ``group_size`` archive members by own mean x novelty (ties to the older agent)."""
        tree = state.tree
        mean = tree.view("own_s")[members] / tree.view("own_n")[members]
        novelty = diversity.cosine_novelty(tree, state.tasks, members, self.config.neighbours)
        order = np.lexsort((members, -(mean * novelty)))
        return members[order[: self.config.group_size]]

    def choose_parent(self, state: SearchState, members: np.ndarray, rng: np.random.Generator) -> int:
        group = self.parent_group(state, members)
        return int(group[state.usage.expansions % len(group)])
