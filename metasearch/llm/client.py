"""``LLMClient``: chat completions from any OpenAI-compatible endpoint, with retries and accounting.

Retries (429, 5xx, timeouts, refused connections) use the ``openai`` package's exponential backoff with
jitter; when they run out the call raises ``InfrastructureError`` (retryable: the study re-queues the job
and stops if the endpoint stays down). A 4xx other than 429 is the request's fault and raises ``LLMError``.
Each call reserves its worst case in the meter first (see ``usage``), so budgets hold under concurrency.
Replies are bounded (``max_tokens`` on the request, ``max_reply_chars`` on what we keep) and a reply
without choices is an ``LLMError``, never a crash. One client is shared by all workers: the SDK's HTTP pool
allows 1,000 concurrent requests, so calls are never serialised.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import Any

import httpx
import openai

from metasearch.errors import ConfigError, InfrastructureError, MetasearchError
from metasearch.llm.config import LLMSection
from metasearch.llm.usage import Hold, Prices, TokenMeter, prompt_bound

log = logging.getLogger(__name__)


class LLMError(MetasearchError):
    """The endpoint refused the request or answered with something unusable (not an outage)."""


@dataclass(frozen=True)
class ChatResult:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    model: str
    latency_s: float
    finish_reason: str | None = None


class LLMClient:
    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 300.0,
        max_retries: int = 4,
        max_tokens: int | None = 4096,
        max_reply_chars: int = 200_000,
        meter: TokenMeter | None = None,
        prices: Prices | None = None,
        trace: bool = False,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.max_tokens = max_tokens
        self.max_reply_chars = max_reply_chars
        self.meter = meter
        self.prices = prices or (meter.prices if meter is not None else Prices())
        self._client = openai.OpenAI(
            base_url=self.base_url,
            api_key=api_key or "EMPTY",  # local servers ignore it; the SDK insists on one
            timeout=timeout_s,
            max_retries=max_retries,  # its default pool allows 1,000 concurrent connections
        )
        self._model = model
        self._context: int | None = None
        self._tokenize: bool | None = None
        self.trace = trace  # spans go to mlflow's active tracking URI and experiment

    @classmethod
    def from_section(
        cls, section: LLMSection, *, base_url: str | None = None, meter: TokenMeter | None = None
    ) -> LLMClient:
        """Build from the ``llm`` config section; ``base_url`` overrides it (a managed server's URL)."""
        url = base_url or section.base_url or os.environ.get("OPENAI_BASE_URL")
        if not url:
            raise ConfigError("llm.base_url: no OpenAI-compatible endpoint configured (or set llm.serve)")
        key = os.environ.get(section.api_key_env) if section.api_key_env else None
        return cls(
            url,
            model=section.model,
            api_key=key,
            timeout_s=section.timeout_s,
            max_retries=section.max_retries,
            max_tokens=section.max_tokens,
            meter=meter,
            prices=Prices(section.price_input_per_mtok, section.price_output_per_mtok),
            trace=section.trace,
        )

    @property
    def model(self) -> str:
        """The configured model, or the endpoint's first listed one."""
        if self._model is None:
            try:
                models = [m.id for m in self._client.models.list().data]
            except openai.APIError as exc:
                raise _as_error(exc, self.base_url) from exc
            if not models:
                raise LLMError(f"{self.base_url}: the endpoint lists no models; set llm.model")
            self._model = models[0]
        return self._model

    def served_models(self) -> list[dict[str, Any]]:
        """What the endpoint lists at ``GET /v1/models``: each model's ``id`` and, where reported, ``root``
        (vLLM: the weights it loaded) and ``owned_by``."""
        try:
            models = self._client.models.list().data
        except openai.APIError as exc:
            raise _as_error(exc, self.base_url) from exc
        out = []
        for m in models:
            extra = getattr(m, "model_extra", None) or {}
            entry = {
                "id": m.id,
                "owned_by": getattr(m, "owned_by", None),
                "root": extra.get("root"),
                "max_model_len": extra.get("max_model_len"),
            }
            out.append({k: v for k, v in entry.items() if v is not None})
        return out

    def context_tokens(self) -> int | None:
        """The served context length (``max_model_len`` at ``/v1/models``, as vLLM reports it), cached; None
        when the endpoint does not say."""
        if self._context is None:
            entry = next((m for m in self.served_models() if m["id"] == self.model), None)
            value = entry.get("max_model_len") if entry else None
            self._context = int(value) if isinstance(value, int) and value > 0 else 0
        return self._context or None

    def count_tokens(self, messages: list[dict[str, str]]) -> int | None:
        """The prompt's tokens as the server counts them, chat template included (vLLM's ``/tokenize``);
        None when the endpoint has no such route."""
        if self._tokenize is False:
            return None
        url = self.base_url.removesuffix("/v1") + "/tokenize"
        try:
            reply = httpx.post(url, json={"model": self.model, "messages": messages}, timeout=60)
            count = reply.json().get("count") if reply.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            count = None
        if not isinstance(count, int):
            self._tokenize = False  # not a vLLM server: estimate from characters from now on
            return None
        return count

    def chat(self, messages: list[dict[str, str]], *, job_id: str | None = None, **kw: Any) -> ChatResult:
        """One chat completion. ``kw`` goes to the endpoint (temperature, stop, ...)."""
        if not self.trace:
            return self._chat(messages, job_id, kw)
        import mlflow
        from mlflow.entities import SpanType

        with mlflow.start_span(name="chat", span_type=SpanType.CHAT_MODEL) as span:
            span.set_inputs({"messages": messages, **kw})
            span.set_attributes({"metasearch.job_id": job_id or "", "endpoint": self.base_url})
            result = self._chat(messages, job_id, kw)
            span.set_outputs({"text": result.text, "finish_reason": result.finish_reason})
            span.set_attributes(
                {
                    "model": result.model,
                    "prompt_tokens": result.prompt_tokens,
                    "completion_tokens": result.completion_tokens,
                    "cost_usd": result.cost_usd,
                    "latency_s": result.latency_s,
                }
            )
            return result

    def _chat(self, messages: list[dict[str, str]], job_id: str | None, kw: dict[str, Any]) -> ChatResult:
        if self.max_tokens is not None:
            kw.setdefault("max_tokens", self.max_tokens)
        hold: Hold | None = None
        if self.meter is not None:  # reserve the worst case; the completion cap is clipped to the room left
            request = {"messages": messages, **kw}
            hold = self.meter.reserve(job_id or "host", prompt_bound(request), kw.get("max_tokens"))
            if hold.max_completion is not None:
                kw["max_tokens"] = hold.max_completion
        started = time.monotonic()
        try:
            reply = self._client.chat.completions.create(model=self.model, messages=messages, **kw)  # type: ignore[arg-type]
        except openai.APIError as exc:
            self._release(hold)
            raise _as_error(exc, self.base_url) from exc
        except (ValueError, TypeError) as exc:  # a body that is not the JSON the SDK expects
            self._release(hold)
            raise LLMError(f"{self.base_url}: unreadable reply: {str(exc)[:300]}") from exc
        except BaseException:
            self._release(hold)
            raise
        latency = time.monotonic() - started
        choices = getattr(reply, "choices", None)
        if not choices:
            self._release(hold)
            raise LLMError(f"{self.base_url}: reply without choices: {str(reply)[:300]}")
        text = choices[0].message.content or ""
        if len(text) > self.max_reply_chars:
            text = text[: self.max_reply_chars] + "\n[... reply truncated by metasearch ...]"
        usage = reply.usage
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion = int(getattr(usage, "completion_tokens", 0) or 0)
        if self.meter is not None:
            cost = self.meter.charge(job_id or "host", prompt, completion, hold=hold, prices=self.prices)
        else:
            cost = self.prices.cost(prompt, completion)
        return ChatResult(text, prompt, completion, cost, reply.model, latency, choices[0].finish_reason)

    def _release(self, hold: Hold | None) -> None:
        if hold is not None and self.meter is not None:
            self.meter.release(hold)

    def close(self) -> None:
        self._client.close()


def _as_error(exc: openai.APIError, url: str) -> MetasearchError:
    if isinstance(exc, openai.APIConnectionError):  # includes timeouts
        return InfrastructureError(f"LLM endpoint {url} unreachable after retries: {exc}")
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code == 429 or exc.status_code >= 500:
            return InfrastructureError(f"LLM endpoint {url} failing after retries: HTTP {exc.status_code}")
        return LLMError(f"LLM endpoint {url} refused the request: HTTP {exc.status_code}: {str(exc)[:300]}")
    return LLMError(f"LLM endpoint {url}: unusable reply: {str(exc)[:300]}")
