"""The Scheduler interface and what every scheduler shares.

A scheduler is a pure function of a ``SearchState`` and a seeded numpy Generator: given the same state
and generator state it makes the same choice. It never mutates the state; the Study reserves the job it
returns. ``None`` means "nothing worth starting now" (back-pressure: the Study waits for results).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from metasearch.schedulers.cmp import SearchTree
from metasearch.schedulers.final import FinalMethod, select_final
from metasearch.types import Budget, Evaluate, Job, Usage


@dataclass(frozen=True)
class SearchState:
    """A read-only view handed to ``next_job``; valid only during the call (O(1) to build)."""

    tree: SearchTree
    tasks: tuple[str, ...]
    budget: Budget
    usage: Usage  # evaluations / expansions started so far (finished + in flight)
    expansions_in_flight: int
    evaluations_in_flight: int
    workers: int = 1  # concurrent jobs the study runs (HGM sizes its initial expansions by it)


class Scheduler(Protocol):
    def next_job(self, state: SearchState, rng: np.random.Generator) -> Job | None: ...

    def select_final(self, state: SearchState) -> str | None: ...


class SchedulerConfig(BaseModel):
    """Options every scheduler has: the expand/evaluate balance and final selection."""

    model_config = ConfigDict(extra="forbid")
    alpha: float = Field(0.6, gt=0, le=1)
    """Expand when evaluations_started ** alpha >= non-seed agents + expansions in flight (UCB-Air)."""
    final: FinalMethod = "lower_percentile"
    epsilon: float = Field(0.01, gt=0, lt=0.5)
    min_trials: int = Field(3, ge=1)
    prior_trials: float = Field(10.0, gt=0)
    """``final: clade_prior``: how many evaluations the parent's clade mean is worth as a prior."""
    top_k: int = Field(5, ge=1)
    """``final: clade_top_k``: how many agents, by the lower percentile, compete on their clade mean."""


class BaseScheduler:
    """Shared machinery; subclasses choose the parent and the agent to evaluate."""

    Config = SchedulerConfig

    def __init__(self, config: SchedulerConfig) -> None:
        self.config = config

    def select_final(self, state: SearchState) -> str | None:
        return select_final(
            state.tree,
            method=self.config.final,
            epsilon=self.config.epsilon,
            min_trials=self.config.min_trials,
            prior_trials=self.config.prior_trials,
            top_k=self.config.top_k,
        )

    def wants_expansion(self, state: SearchState) -> bool:
        """The UCB-Air rule of HGM, plus the expansion budget."""
        if state.budget.expansions is not None and state.usage.expansions >= state.budget.expansions:
            return False
        tree = state.tree
        non_seed = len(tree) - int(np.count_nonzero(tree.view("parent") < 0))
        return bool(state.usage.evaluations**self.config.alpha >= non_seed + state.expansions_in_flight)

    def can_expand(self, state: SearchState) -> bool:
        return state.budget.expansions is None or state.usage.expansions < state.budget.expansions


def open_agents(state: SearchState) -> np.ndarray:
    """Indices of agents that still have tasks never dispatched to them."""
    return np.flatnonzero(state.tree.view("n_seen") < len(state.tasks))


def random_unseen_task(state: SearchState, agent: int, rng: np.random.Generator) -> Evaluate:
    agent_id = state.tree.ids[agent]
    unseen = state.tree.unseen_tasks(agent_id, state.tasks)
    return Evaluate(agent_id=agent_id, task_id=unseen[int(rng.integers(len(unseen)))])


def budget_left(state: SearchState) -> float | None:
    """The smallest fraction left of any limit the study has (evaluations, wall time, tokens, cost), at
    least one evaluation's worth for an evaluation budget; None when nothing is limited."""
    budget, usage = state.budget, state.usage
    fractions = []
    if budget.evaluations:
        fractions.append(max(1, budget.evaluations - usage.evaluations) / budget.evaluations)
    for limit, used in (
        (budget.wall_time_s, usage.wall_time_s),
        (budget.tokens, usage.tokens),
        (budget.cost_usd, usage.cost_usd),
    ):
        if limit:
            fractions.append(max(0.0, limit - used) / limit)
    return min(fractions) if fractions else None


def thompson_argmax(
    successes: np.ndarray, failures: np.ndarray, rng: np.random.Generator, tau: float = 1.0
) -> int:
    """Index of the largest draw from Beta(tau (1 + s), tau (1 + f)) (ties broken by the draw itself)."""
    draws = rng.beta(tau * (1.0 + successes), tau * (1.0 + failures))
    return int(np.argmax(draws))
