"""The token meter of a job on a Ray worker: the study's ``TokenMeter`` on the head, reached through Ray.

The study's host actor (``metasearch.cluster.ray_host``) owns the one ``TokenMeter`` of a study run on Ray;
``LedgerMeter`` forwards the calls a gateway and an LLM client make to it, so ``budget.tokens`` and
``llm.max_tokens_per_job`` hold across nodes. Ray is imported only when a call is forwarded (it is an
optional dependency).
"""

from __future__ import annotations

from typing import Any

from metasearch.llm.usage import BudgetExhausted, Hold, Prices, Tally

HOST_TIMEOUT_S = 120.0


class LedgerMeter:
    """The ``TokenMeter`` calls of a gateway and an LLM client, forwarded to the study's host actor."""

    def __init__(self, host: Any, prices: Prices) -> None:
        self.host = host
        self.prices = prices

    def _get(self, ref: Any) -> Any:
        import ray

        return ray.get(ref, timeout=HOST_TIMEOUT_S)

    def reserve(self, job_id: str, prompt_tokens: int, max_completion: int | None = None) -> Hold:
        got = self._get(self.host.reserve.remote(job_id, prompt_tokens, max_completion))
        if isinstance(got, tuple):
            raise BudgetExhausted(*got)
        hold: Hold = got
        return hold

    def check(self, job_id: str) -> None:
        self.release(self.reserve(job_id, 0, 0))

    def release(self, hold: Hold) -> None:
        self._get(self.host.release.remote(hold))

    def settle(
        self, hold: Hold, prompt_tokens: int, completion_tokens: int, *, prices: Prices | None = None
    ) -> float:
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
        call = self.host.charge.remote(job_id, prompt_tokens, completion_tokens, hold, prices or self.prices)
        cost: float = self._get(call)
        return cost

    def limit_job(self, job_id: str, tokens: int | None) -> None:
        if tokens is not None:
            self._get(self.host.limit_job.remote(job_id, tokens))

    def job(self, job_id: str) -> Tally:
        tally: Tally = self._get(self.host.job.remote(job_id))
        return tally

    @property
    def study_exhausted(self) -> bool:
        return bool(self._get(self.host.study_exhausted.remote()))
