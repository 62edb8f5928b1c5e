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
  asynchronous schedule does not commit early to one lineage; ``auto`` is HGM's min(5, floor(workers ** alpha)).
* ``cool_down``: tau = B / b (B the evaluation budget, b what is left) multiplies both Beta parameters,
  keeping posterior means and shrinking their spread, so choices grow greedier as the budget runs out.

Defaults: the paper's (``hgm-paper`` below), because no addition measured better on every landscape family
of ``metasearch bench schedulers`` (docs/benchmarks.md). Our additions, off by default:
``pending_aware`` counts expansions already in flight under a parent as virtual failures of its clade
(so parallel workers spread out), ``count_failed_expansions`` counts a parent's failed expansions as
failures of its clade (a parent whose children never compile is not productive), and
``eval_virtual_loss`` counts an agent's evaluations in flight as virtual failures when choosing what to
evaluate (so eight workers do not all pile onto one lucky newcomer before its first result is back), and
``cost_exponent`` prefers the cheaper of equally promising evaluations (an agent whose evaluations take
twice the mean time needs a draw 2 ** cost_exponent times higher). Two diversity options act on the parent
choice only, comparing agents' per-task results on the tasks they share (``diversity.py``): ``novelty``
adds ``novelty`` x (the candidate's mean distance to the other agents' per-task scores) to its clade draw,
and ``pareto_parents`` draws only among parents no agent dominates task by task (all when none is left).
Once more than 256 agents have results, both compare with a random sample of 256 of them and consider
only the 64 highest parent draws, so a decision's work stays bounded (``diversity.choose_at_scale``).
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from metasearch.schedulers import diversity
from metasearch.schedulers.base import (
    BaseScheduler,
    SchedulerConfig,
    SearchState,
    budget_left,
    open_agents,
    random_unseen_task,
    thompson_argmax,
)
from metasearch.types import Expand, Job

NonNegative = Annotated[int, Field(ge=0)]


class HGMConfig(SchedulerConfig):
    cool_down: bool = True
    """tau = B / b on both Beta parameters (greedier as the budget runs out)."""
    initial_expansions: NonNegative | Literal["auto"] = "auto"
    """Expansions of the seeds before anything else; ``auto``: min(5, floor(workers ** alpha))."""
    min_parent_mean: float = Field(0.0, ge=0, lt=1)
    pending_aware: bool = False
    count_failed_expansions: bool = False
    eval_virtual_loss: bool = False
    cost_exponent: float = Field(0.0, ge=0)
    """> 0: divide an evaluation candidate's Thompson draw by (its mean evaluation time / the mean) ** this."""
    novelty: float = Field(0.0, ge=0)
    """> 0: a parent's clade draw plus this x its mean per-task distance to the other agents (0..1)."""
    pareto_parents: bool = False
    """Draw parents only among those on the per-task Pareto front of the archive (all if it is empty)."""


class HGMScheduler(BaseScheduler):
    Config = HGMConfig
    config: HGMConfig

    def tau(self, state: SearchState) -> float:
        """B / b on the evaluation budget as HGM has it; with other limits too (wall time, tokens, cost), the
        one nearest its end decides: 1 / (the fraction of it left), never above B when B is set."""
        if not self.config.cool_down:
            return 1.0
        left = budget_left(state)
        if left is None:
            return 1.0
        cap = float(state.budget.evaluations) if state.budget.evaluations else 1e6
        return min(cap, 1.0 / max(left, 1e-6))

    def initial_expansions(self, state: SearchState) -> int:
        if self.config.initial_expansions == "auto":
            return min(5, math.floor(max(1, state.workers) ** self.config.alpha))
        return self.config.initial_expansions

    def next_job(self, state: SearchState, rng: np.random.Generator) -> Job | None:
        tree = state.tree
        if len(tree) == 0:
            return None
        if self.can_expand(state) and state.usage.expansions < self.initial_expansions(state):
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
        seed = state.tree.view("parent") < 0  # a seed that never scored is still the search's starting point
        return np.flatnonzero((n > 0) & ((mean > self.config.min_parent_mean) | seed))

    def choose_parent(self, state: SearchState, parents: np.ndarray, rng: np.random.Generator) -> int:
        tree = state.tree
        diverse = self.config.pareto_parents or self.config.novelty > 0
        if diverse and diversity.at_scale(tree):  # bounded work: a sample of the archive, the top draws
            s, f = self.clade_counts(state, parents)
            tau = self.tau(state)
            draws = rng.beta(tau * (1.0 + s), tau * (1.0 + f))
            pick = diversity.choose_at_scale(
                tree, state.tasks, parents, draws, self.config.novelty, self.config.pareto_parents, rng
            )
            return int(parents[pick])
        if self.config.pareto_parents:
            front = diversity.pareto_front(tree, state.tasks, parents)
            parents = front if len(front) else parents
        s, f = self.clade_counts(state, parents)
        if self.config.novelty <= 0:
            return int(parents[thompson_argmax(s, f, rng, self.tau(state))])
        tau = self.tau(state)
        draws = rng.beta(tau * (1.0 + s), tau * (1.0 + f))
        draws = draws + self.config.novelty * diversity.novelty(tree, state.tasks, parents)
        return int(parents[int(np.argmax(draws))])

    def clade_counts(self, state: SearchState, parents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(successes, failures) of each parent's clade, with the virtual failures the options add."""
        tree = state.tree
        s = tree.view("clade_s")[parents]
        f = tree.view("clade_n")[parents] - s
        if self.config.pending_aware:
            f = f + tree.view("pending_expansions")[parents]
        if self.config.count_failed_expansions:
            f = f + tree.view("failed")[parents]
        return s, f

    def choose_agent(self, state: SearchState, candidates: np.ndarray, rng: np.random.Generator) -> int:
        tree = state.tree
        s = tree.view("own_s")[candidates]
        f = tree.view("own_n")[candidates] - s
        if self.config.eval_virtual_loss:
            f = f + tree.view("pending_evals")[candidates]
        if self.config.cost_exponent <= 0:
            return int(candidates[thompson_argmax(s, f, rng, self.tau(state))])
        tau = self.tau(state)
        draws = rng.beta(tau * (1.0 + s), tau * (1.0 + f))
        return int(candidates[int(np.argmax(draws / self.relative_cost(state, candidates)))])

    def relative_cost(self, state: SearchState, candidates: np.ndarray) -> np.ndarray:
        """(mean evaluation seconds of each candidate / mean over all results) ** cost_exponent; 1 if unknown."""
        tree = state.tree
        n, t = tree.view("own_n"), tree.view("own_time")
        total_n = float(n.sum())
        if total_n == 0 or float(t.sum()) <= 0:
            return np.ones(len(candidates))
        mean = float(t.sum()) / total_n
        nc = n[candidates]
        per = np.divide(t[candidates], nc, out=np.full(len(candidates), mean), where=nc > 0)
        return np.asarray((np.maximum(per, 1e-9) / mean) ** self.config.cost_exponent)


class HGMPaperConfig(HGMConfig):
    """HGM's policy as published; each default is the paper's (see ``HGMPaperScheduler``)."""

    alpha: float = Field(0.6, gt=0, le=1)
    cool_down: bool = True
    initial_expansions: NonNegative | Literal["auto"] = "auto"
    min_parent_mean: float = Field(0.0, ge=0, lt=1)
    pending_aware: bool = False
    count_failed_expansions: bool = False
    eval_virtual_loss: bool = False
    cost_exponent: float = Field(0.0, ge=0)
    novelty: float = Field(0.0, ge=0)
    pareto_parents: bool = False


class HGMPaperScheduler(HGMScheduler):
    """``hgm-paper``: the Huxley-Gödel Machine exactly as published, the baseline every variant is judged by.

    Sections refer to arXiv 2510.21614 (ICLR 2026 camera-ready) as summarised in our research notes
    (research/hgm.md, which also records what the public code ``metauto-ai/HGM`` does):

    * alpha = 0.6 in the UCB-Air expand rule ``N ** alpha >= agents excluding seeds + expansions in
      flight`` (Sec. 3.2, Algorithm 1; Sec. 4 settings; ``optimization.alpha`` in the code).
    * tau = B / b cool-down on both Beta parameters of both Thompson samplers (Sec. 3.2: "in all
      experiments"; the code's ``cool_down`` with beta = 1).
    * min(5, floor(workers ** alpha)) initial expansions, all of the seed, started in parallel before any
      other job (Sec. 3.2 / Appendix B, HGM-Async: avoids an early bias of the asynchronous schedule).
    * The seed is evaluated on every task first, free of budget (the code's ``initial_*`` cache): the
      Study does this with ``seed_evaluations: all``, the simulator with ``seed_free`` (both defaults).
    * The budget counts evaluations *started* (in flight included) and N excludes the seed's free ones
      (the code increments ``n_task_evals`` at dispatch); expansions are not charged.
    * No virtual loss: in-flight work is invisible to both Thompson samplers (the code never reads
      ``n_pending_measures``); failed expansions add no node and are no evidence against the parent.
    * Parents: agents with at least one finished evaluation and a mean above 0 (Algorithm 1's
      "expandable"; the code's filter). Evaluation: Thompson on own counts, then a random unseen task.
    * Final agent: highest 1st percentile of Beta(1 + s, 1 + f) (Sec. 3, best-belief agent, epsilon = 1 %).

    Remaining differences: (1) the budget may not overshoot here (the code can start up to workers - 1
    extra evaluations because its check and increment are not atomic); (2) when no agent has an unseen task
    left we expand even if ``N ** alpha`` says evaluate, where the code would idle; (3) our final selection
    needs ``min_trials`` (3) evaluations before an agent competes (the paper takes the argmax over all);
    (4) the code's aliasing bug that appends clade outcomes to a node's own list is not reproduced; (5) the
    code sleeps U(0, 1) s before each decision, a jitter the simulator does not add; (6) the code's retry of
    a failed expansion (``max_try``) is 1, so none, as here.
    """

    Config = HGMPaperConfig
    config: HGMPaperConfig
