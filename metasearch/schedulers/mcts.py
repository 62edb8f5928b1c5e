"""``mcts``: tree search over the archive with progressive widening.

Expansion: descend from a virtual root over the seeds. At an agent v whose clade holds S(v) designs (one
more each time a descent passed through v and expanded below it), expand v when
``children(v) + expansions in flight at v < k * S(v) ** widening`` (progressive widening); otherwise
descend to the child with the best UCB1 score on clade values,
``clade_mean(c) + c_uct * sqrt(ln(N(v) + 1) / (N(c) + 1))`` (or a Thompson draw from the clade's Beta
posterior with ``selection: thompson``). A leaf is expanded. Only agents with a finished evaluation are
expanded; an unevaluated child is not descended into.
Evaluation and the evaluate/expand balance are those of ``hgm``.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from metasearch.schedulers.base import SearchState
from metasearch.schedulers.hgm import HGMConfig, HGMScheduler


class MCTSConfig(HGMConfig):
    selection: Literal["ucb", "thompson"] = "ucb"
    c_uct: float = Field(0.7, ge=0)
    widening_k: float = Field(1.0, gt=0)
    widening: float = Field(0.5, gt=0, le=1)


class MCTSScheduler(HGMScheduler):
    Config = MCTSConfig
    config: MCTSConfig

    def choose_parent(self, state: SearchState, parents: np.ndarray, rng: np.random.Generator) -> int:
        tree = state.tree
        eligible = set(int(p) for p in parents)
        level = [r for r in tree.roots() if r in eligible]
        if not level:  # no seed is eligible: fall back to HGM's clade Thompson sampling
            return super().choose_parent(state, parents, rng)
        visits_here = float(sum(tree.clade_n[r] for r in level))
        node = self._pick(state, level, visits_here, rng)
        while True:
            kids = [c for c in tree.children[node] if c in eligible]
            size = float(tree.clade_size[node])
            width = len(tree.children[node]) + int(tree.pending_expansions[node])
            if not kids or width < self.config.widening_k * size**self.config.widening:
                return node
            node = self._pick(state, kids, float(tree.clade_n[node]), rng)

    def _pick(
        self, state: SearchState, options: list[int], parent_visits: float, rng: np.random.Generator
    ) -> int:
        tree = state.tree
        idx = np.asarray(options)
        s, n = tree.clade_s[idx], tree.clade_n[idx]
        if self.config.selection == "thompson":
            draws = rng.beta(1 + s, 1 + n - s)
        else:
            mean = np.divide(s, n, out=np.zeros_like(s), where=n > 0)
            draws = (
                mean
                + self.config.c_uct * np.sqrt(np.log(parent_visits + 1) / (n + 1))
                + rng.uniform(0, 1e-9, len(idx))
            )
        return int(idx[int(np.argmax(draws))])
