"""Token and cost accounting shared by the client and the gateways: per call, per job and per study.

One ``TokenMeter`` per study. Every call reserves its worst case before it is forwarded and settles
its actual usage after, so the job's and the study's spend never pass their caps however many calls are in
flight: the worst case is an upper bound of the prompt (``prompt_bound``) plus the completion tokens the call
may produce, and the caller sends that completion cap as the request's ``max_tokens``. A call the remaining
room cannot hold is refused (``BudgetExhausted``). Thread-safe: many workers' calls are metered at once.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# Tokens a chat template adds around each message (role markers) and once per request, bounded generously.
MESSAGE_OVERHEAD_TOKENS = 8
REQUEST_OVERHEAD_TOKENS = 8


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


def prompt_bound(request: dict[str, Any]) -> int:
    """An upper bound of the prompt tokens of a chat or completion request: a token of a byte-level
    tokenizer covers at least one byte, plus the template's markers per message."""
    if "messages" in request:
        messages = request.get("messages") or []
        parts = [m.get("content") if isinstance(m, dict) else m for m in messages]
        overhead = MESSAGE_OVERHEAD_TOKENS * len(messages)
    else:
        prompt = request.get("prompt")
        parts, overhead = (prompt if isinstance(prompt, list) else [prompt]), 0
    size = sum(len((p if isinstance(p, str) else json.dumps(p)).encode()) for p in parts if p is not None)
    if request.get("tools"):  # tool schemas are part of the prompt
        size += len(json.dumps(request["tools"]).encode())
    return size + overhead + REQUEST_OVERHEAD_TOKENS


@dataclass(frozen=True)
class Hold:
    """Room reserved for one call: ``tokens`` in all, of which ``max_completion`` (None: no cap) may be
    completion tokens. Settled (or released) exactly once."""

    job_id: str
    tokens: int
    max_completion: int | None
    key: int = 0


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
    held: int = 0  # tokens reserved by calls in flight, study-wide
    job_held: dict[str, int] = field(default_factory=dict)
    job_limits: dict[str, int] = field(default_factory=dict)  # per-job caps tighter than ``job_limit``
    _open: set[int] = field(default_factory=set, repr=False)  # holds not yet settled or released
    _next_key: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def limit_job(self, job_id: str, tokens: int | None) -> None:
        """Cap one job tighter than ``job_limit`` (e.g. a proposer's ``max_tokens_per_job``)."""
        if tokens is not None:
            with self._lock:
                self.job_limits[job_id] = min(tokens, self.job_limits.get(job_id, tokens))

    def _job_limit(self, job_id: str) -> int | None:
        limits = [x for x in (self.job_limit, self.job_limits.get(job_id)) if x is not None]
        return min(limits) if limits else None

    def check(self, job_id: str) -> None:
        """Raise BudgetExhausted when the job or the study has no room left for another call."""
        with self._lock:
            self._room(job_id, 1)

    def _room(self, job_id: str, need: int) -> int | None:
        """Tokens still free for ``job_id`` (None: unlimited); raises when fewer than ``need``."""
        rooms: list[int] = []
        if self.study_limit is not None:
            used = self.study_used_before + self.study.tokens
            room = self.study_limit - used - self.held
            if room < need:
                raise BudgetExhausted("study", used + self.held, self.study_limit)
            rooms.append(room)
        limit = self._job_limit(job_id)
        if limit is not None:
            used = self.jobs.get(job_id, Tally()).tokens
            room = limit - used - self.job_held.get(job_id, 0)
            if room < need:
                raise BudgetExhausted("job", used + self.job_held.get(job_id, 0), limit)
            rooms.append(room)
        return min(rooms) if rooms else None

    def reserve(self, job_id: str, prompt_tokens: int, max_completion: int | None = None) -> Hold:
        """Reserve a call's worst case (``prompt_tokens`` is an upper bound, see ``prompt_bound``) and at
        least one completion token; the completion cap is clipped to the room left. Raises
        BudgetExhausted when the room cannot hold it."""
        with self._lock:
            room = self._room(job_id, prompt_tokens + 1)
            if room is None:  # no cap applies: nothing to hold
                return Hold(job_id, 0, max_completion)
            free = room - prompt_tokens
            completion = free if max_completion is None else min(max_completion, free)
            self._next_key += 1
            hold = Hold(job_id, prompt_tokens + completion, completion, self._next_key)
            self._open.add(hold.key)
            self.held += hold.tokens
            self.job_held[job_id] = self.job_held.get(job_id, 0) + hold.tokens
            return hold

    def release(self, hold: Hold) -> None:
        """Give back a reservation whose call spent nothing (refused, failed upstream)."""
        with self._lock:
            self._release(hold)

    def _release(self, hold: Hold) -> None:
        if hold.key not in self._open:  # settled or released already (or held nothing)
            return
        self._open.discard(hold.key)
        self.held -= hold.tokens
        left = self.job_held.get(hold.job_id, 0) - hold.tokens
        if left > 0:
            self.job_held[hold.job_id] = left
        else:
            self.job_held.pop(hold.job_id, None)

    def settle(
        self, hold: Hold, prompt_tokens: int, completion_tokens: int, *, prices: Prices | None = None
    ) -> float:
        """Replace the reservation by what the call spent; returns its cost."""
        return self.charge(hold.job_id, prompt_tokens, completion_tokens, hold=hold, prices=prices)

    def charge(
        self,
        job_id: str,
        prompt_tokens: int,
        completion_tokens: int,
        *,
        hold: Hold | None = None,
        prices: Prices | None = None,
    ) -> float:
        """Record one call (releasing its ``hold``); returns its cost at ``prices`` (the model's, when the
        study has several) or the meter's own."""
        cost = (prices or self.prices).cost(prompt_tokens, completion_tokens)
        with self._lock:
            if hold is not None:
                self._release(hold)
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
