"""``LLMService``: a study's LLM access in one place (managed server, shared client, per-job gateways).

Built by ``launch`` when the config names an endpoint (``llm.base_url``, ``OPENAI_BASE_URL``) or a server
to manage (``llm.serve``). Every metered call is journaled as usage (``on_charge``), so the study's
``budget.tokens`` and ``budget.cost_usd`` count host-side meta-agent calls and sandboxed agents' calls alike.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from metasearch.errors import ConfigError
from metasearch.llm.client import LLMClient
from metasearch.llm.config import LLMSection, endpoint_configured
from metasearch.llm.gateway import Gateway
from metasearch.llm.ledger import LedgerMeter
from metasearch.llm.serve import VLLMServer
from metasearch.llm.usage import Prices, TokenMeter

log = logging.getLogger(__name__)


class LLMService:
    def __init__(
        self,
        section: LLMSection,
        *,
        study_dir: Path,
        study_tokens: int | None = None,
        used_tokens: int = 0,
        on_charge: Callable[[str, int, float], None] | None = None,
    ) -> None:
        if not endpoint_configured(section):
            raise ConfigError("llm.base_url: no OpenAI-compatible endpoint configured (or set llm.serve)")
        self.section = section
        self.study_dir = Path(study_dir)
        self.meter = TokenMeter(
            study_limit=study_tokens,
            job_limit=section.max_tokens_per_job,
            prices=Prices(section.price_input_per_mtok, section.price_output_per_mtok),
            study_used_before=used_tokens,
            on_charge=on_charge,
        )
        self.server: VLLMServer | None = None
        self._client: LLMClient | None = None
        self._http: httpx.Client | None = None
        self._lock = threading.Lock()

    def start(self) -> LLMService:
        """Start the managed server, if any. With ``llm.trace`` the client's spans go to MLflow's active
        experiment: the caller points it at the study's (``tracking.store.trace_to``)."""
        if self.section.serve is not None and self.server is None:
            self.server = VLLMServer(self.section.serve, self.study_dir / "logs" / "vllm.log").start()
        return self

    @property
    def base_url(self) -> str:
        if self.server is not None:
            return self.server.base_url
        url = self.section.base_url or os.environ.get("OPENAI_BASE_URL")
        assert url, "checked in __init__"
        return url

    @property
    def api_key(self) -> str | None:
        name = self.section.api_key_env
        return os.environ.get(name) if name else None

    @property
    def client(self) -> LLMClient:
        with self._lock:
            if self._client is None:
                self._client = LLMClient.from_section(self.section, base_url=self.base_url, meter=self.meter)
                if self.server is not None and self.section.model is None:
                    self._client._model = self.server.model
            return self._client

    @property
    def model(self) -> str:
        return self.client.model

    @contextmanager
    def gateway(self, job_id: str, log_dir: Path, *, job_limit: int | None = None) -> Iterator[Gateway]:
        """A gateway for one job; ``job_limit`` caps this job's tokens tighter than ``llm.max_tokens_per_job``."""
        self.meter.limit_job(job_id, job_limit)
        with self._lock:
            if self._http is None:
                limits = httpx.Limits(max_connections=512, max_keepalive_connections=512)
                self._http = httpx.Client(timeout=self.section.timeout_s, limits=limits)
            http = self._http
        gateway = Gateway(
            self.base_url,
            job_id=job_id,
            meter=self.meter,
            api_key=self.api_key,
            model=self.model,
            transcript_path=Path(log_dir) / "llm.jsonl",
            http=http,
            retries=self.section.max_retries,
            backoff_s=self.section.retry_backoff_s,
            context_tokens=self.context_tokens,
        )
        with gateway:
            yield gateway

    @property
    def context_tokens(self) -> int | None:
        """The served model's context length: what the managed server reported at start, else what the
        endpoint lists (None when it does not say)."""
        if self.server is not None and self.server.context_tokens:
            return self.server.context_tokens
        return self.client.context_tokens()

    def remote(self, host: Any = None) -> RemoteLLM:
        """The job-sized description of this service that a Ray worker builds its gateway and client from.
        With the study's ``host`` actor (see ``ray_host``) every call meters there; without, the worker
        meters alone against a snapshot of the room left."""
        used = self.meter.study_used_before + self.meter.study.tokens
        limit = self.meter.study_limit
        return RemoteLLM(
            self.base_url,
            model=self.model,
            api_key=self.api_key,
            job_limit=self.meter.job_limit,
            study_remaining=None if limit is None else max(0, limit - used),
            timeout_s=self.section.timeout_s,
            retries=self.section.max_retries,
            backoff_s=self.section.retry_backoff_s,
            max_tokens=self.section.max_tokens,
            prices=self.meter.prices,
            host=host,
            context_tokens=self.context_tokens,
        )

    def close(self) -> None:
        if self.section.trace:
            import mlflow

            mlflow.flush_trace_async_logging()
        if self._client is not None:
            self._client.close()
        if self._http is not None:
            self._http.close()
        if self.server is not None:
            self.server.stop()
            self.server = None


class RemoteLLM:
    """What a Ray worker needs to give one job a gateway or an LLM client: the endpoint, the key, and the
    study's meter (the host actor's ledger, reached through Ray, so budgets hold across nodes). Built on
    the head (``LLMService.remote``)."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None,
        api_key: str | None,
        job_limit: int | None,
        study_remaining: int | None,
        timeout_s: float,
        retries: int,
        backoff_s: float,
        max_tokens: int | None = 4096,
        prices: Prices | None = None,
        host: Any = None,
        context_tokens: int | None = None,
    ) -> None:
        self.base_url = base_url
        self.context_tokens = context_tokens
        self.model = model
        self.api_key = api_key
        self.job_limit = job_limit
        self.study_remaining = study_remaining
        self.max_tokens = max_tokens
        self.prices = prices or Prices()
        self.host = host
        # Made on the worker: a meter holds a lock, which Ray cannot ship.
        self._meter: TokenMeter | LedgerMeter | None = None
        self._client: LLMClient | None = None
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s

    @property
    def meter(self) -> Any:
        if self._meter is None:
            if self.host is not None:
                self._meter = LedgerMeter(self.host, self.prices)
            else:
                self._meter = TokenMeter(study_limit=self.study_remaining, job_limit=self.job_limit)
        return self._meter

    @property
    def client(self) -> LLMClient:
        """An LLM client for a proposer running on this worker, metered like the gateways."""
        if self._client is None:
            self._client = LLMClient(
                self.base_url,
                model=self.model,
                api_key=self.api_key,
                timeout_s=self.timeout_s,
                max_retries=self.retries,
                max_tokens=self.max_tokens,
                meter=self.meter,
                prices=self.prices,
            )
        return self._client

    @contextmanager
    def gateway(self, job_id: str, log_dir: Path, *, job_limit: int | None = None) -> Iterator[Gateway]:
        self.meter.limit_job(job_id, job_limit)
        with Gateway(
            self.base_url,
            job_id=job_id,
            meter=self.meter,
            api_key=self.api_key,
            model=self.model,
            transcript_path=Path(log_dir) / "llm.jsonl",
            retries=self.retries,
            backoff_s=self.backoff_s,
            timeout_s=self.timeout_s,
            context_tokens=self.context_tokens,
        ) as gateway:
            yield gateway
