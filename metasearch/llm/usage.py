"""Token and cost accounting shared by the client and the gateways: per call, per job and per study.

One ``TokenMeter`` per study. Budgets are checked before a call is forwarded (a call that starts under
budget may finish over it by at most its own size: we never cut a response in half) and enforced per job
and per study. Thread-safe: many workers' calls are metered at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field


class BudgetExhausted(Exception):
    """A token budget is spent. ``scope`` is ``"job"`` or ``"study"``."""

    def __init__(self, scope: str, used: int, limit: int) -> None:
        super().__init__(
            f"token budget exhausted for this {scope}: {used} of {limit} tokens used"
            + ("; the study stops (resume with a larger budget.tokens)" if scope == "study" else "")
        )
        self.scope = scope
        self.used = used
        self.limit = limit


@dataclass(frozen=True)
class Prices:
    """USD per million tokens; zero for a self-hosted model."""

    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_per_mtok + completion_tokens * self.output_per_mtok) / 1e6


@dataclass
class Tally:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class TokenMeter:
    """Counts tokens per job and for the study; ``on_charge(job_id, tokens, cost)`` is told of each call
    (the runner records it in the journal, so the study's ``budget.tokens`` sees it too)."""

    study_limit: int | None = None
    job_limit: int | None = None
    prices: Prices = field(default_factory=Prices)
    study_used_before: int = 0  # tokens a resumed study had already spent
    on_charge: Callable[[str, int, float], None] | None = None
    study: Tally = field(default_factory=Tally)
    jobs: dict[str, Tally] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def check(self, job_id: str) -> None:
        """Raise BudgetExhausted when the job or the study may not start another call."""
        with self._lock:
            used_study = self.study_used_before + self.study.tokens
            if self.study_limit is not None and used_study >= self.study_limit:
                raise BudgetExhausted("study", used_study, self.study_limit)
            job = self.jobs.get(job_id)
            if self.job_limit is not None and job is not None and job.tokens >= self.job_limit:
                raise BudgetExhausted("job", job.tokens, self.job_limit)

    def charge(self, job_id: str, prompt_tokens: int, completion_tokens: int) -> float:
        """Record one call; returns its cost."""
        cost = self.prices.cost(prompt_tokens, completion_tokens)
        with self._lock:
            for tally in (self.study, self.jobs.setdefault(job_id, Tally())):
                tally.calls += 1
                tally.prompt_tokens += prompt_tokens
                tally.completion_tokens += completion_tokens
                tally.cost_usd += cost
        if self.on_charge is not None:
            self.on_charge(job_id, prompt_tokens + completion_tokens, cost)
        return cost

    def job(self, job_id: str) -> Tally:
        with self._lock:
            tally = self.jobs.get(job_id, Tally())
            return Tally(tally.calls, tally.prompt_tokens, tally.completion_tokens, tally.cost_usd)

    @property
    def study_exhausted(self) -> bool:
        with self._lock:
            used = self.study_used_before + self.study.tokens
            return self.study_limit is not None and used >= self.study_limit
