"""``LLMService``: a study's LLM access in one place (managed server, shared client, per-job gateways).

Built by ``launch`` when the config names an endpoint (``llm.base_url``, ``OPENAI_BASE_URL``), a server
to manage (``llm.serve``) or several models (``llm.models``, each with its endpoint or server). Every metered
call is journaled as usage (``on_charge``), so the study's ``budget.tokens`` and ``budget.cost_usd`` count
host-side meta-agent calls and sandboxed agents' calls alike, each call at its model's price. With several
models, ``llm.choose`` picks the one an expansion calls (the runner asks ``schedulers.model_choice``, with
this service's ``names`` and ``seed``); sandboxed agents' own calls go to the first.
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


def prices_of(section: LLMSection) -> Prices:
    return Prices(section.price_input_per_mtok, section.price_output_per_mtok)


class LLMService:
    def __init__(
        self,
        section: LLMSection,
        *,
        study_dir: Path,
        study_tokens: int | None = None,
        used_tokens: int = 0,
        on_charge: Callable[[str, int, float], None] | None = None,
        seed: int = 0,
    ) -> None:
        if not endpoint_configured(section):
            raise ConfigError("llm.base_url: no OpenAI-compatible endpoint configured (or set llm.serve)")
        self.section = section
        self.arms = dict(section.arms())  # name -> that model as a single-model section
        self.names = list(self.arms)
        self.seed = seed  # the study's: the model choice draws from it (runner)
        self.study_dir = Path(study_dir)
        self.meter = TokenMeter(
            study_limit=study_tokens,
            job_limit=section.max_tokens_per_job,
            prices=prices_of(self.arms[self.names[0]]),
            study_used_before=used_tokens,
            on_charge=on_charge,
        )
        self.servers: dict[str, VLLMServer] = {}
        self._clients: dict[str, LLMClient] = {}
        self._http: httpx.Client | None = None
        self._lock = threading.Lock()

    def start(self) -> LLMService:
        """Start every managed server (one ``logs/vllm.log``, or ``logs/vllm-<model>.log`` each). With
        ``llm.trace`` the clients' spans go to MLflow's active experiment: the caller points it at the
        study's (``tracking.store.trace_to``)."""
        logs = self.study_dir / "logs"
        try:
            for name, arm in self.arms.items():
                if arm.serve is not None and name not in self.servers:
                    log_name = "vllm.log" if not self.section.models else f"vllm-{_file_name(name)}.log"
                    self.servers[name] = VLLMServer(arm.serve, logs / log_name).start()
        except BaseException:
            self.close()
            raise
        return self

    @property
    def server(self) -> VLLMServer | None:
        """The first model's managed server, if it has one."""
        return self.servers.get(self.names[0])

    def _name(self, model: str | None) -> str:
        if model is None:
            return self.names[0]
        if model not in self.arms:
            raise ConfigError(f"llm.models: no model named {model!r} (this study has {self.names})")
        return model

    def url_of(self, model: str | None = None) -> str:
        name = self._name(model)
        server = self.servers.get(name)
        if server is not None:
            return server.base_url
        url = self.arms[name].base_url or os.environ.get("OPENAI_BASE_URL")
        assert url, "checked in __init__"
        return url

    @property
    def base_url(self) -> str:
        return self.url_of()

    def api_key_of(self, model: str | None = None) -> str | None:
        name = self.arms[self._name(model)].api_key_env
        return os.environ.get(name) if name else None

    @property
    def api_key(self) -> str | None:
        return self.api_key_of()

    def client_for(self, model: str | None = None) -> LLMClient:
        """The host-side client of ``model`` (a name of ``llm.models``; None: the first), made once."""
        name = self._name(model)
        url = self.url_of(name)
        with self._lock:
            if name not in self._clients:
                arm = self.arms[name]
                client = LLMClient.from_section(arm, base_url=url, meter=self.meter)
                if name in self.servers and arm.model is None:
                    client._model = self.servers[name].model
                self._clients[name] = client
            return self._clients[name]

    @property
    def client(self) -> LLMClient:
        return self.client_for()

    @property
    def model(self) -> str:
        return self.client.model

    @contextmanager
    def gateway(
        self, job_id: str, log_dir: Path, *, job_limit: int | None = None, model: str | None = None
    ) -> Iterator[Gateway]:
        """A gateway for one job to ``model`` (None: the first); ``job_limit`` caps this job's tokens
        tighter than ``llm.max_tokens_per_job``."""
        name = self._name(model)
        self.meter.limit_job(job_id, job_limit)
        with self._lock:
            if self._http is None:
                limits = httpx.Limits(max_connections=512, max_keepalive_connections=512)
                self._http = httpx.Client(timeout=self.section.timeout_s, limits=limits)
            http = self._http
        gateway = Gateway(
            self.url_of(name),
            job_id=job_id,
            meter=self.meter,
            api_key=self.api_key_of(name),
            model=self.client_for(name).model,
            prices=prices_of(self.arms[name]),
            transcript_path=Path(log_dir) / "llm.jsonl",
            http=http,
            retries=self.section.max_retries,
            backoff_s=self.section.retry_backoff_s,
            context_tokens=self.context_of(name),
        )
        with gateway:
            yield gateway

    def context_of(self, model: str | None = None) -> int | None:
        """The served context length of ``model`` (None: the first): what its managed server reported at
        start, else what its endpoint lists (None when it does not say)."""
        name = self._name(model)
        server = self.servers.get(name)
        if server is not None and server.context_tokens:
            return server.context_tokens
        return self.client_for(name).context_tokens()

    @property
    def context_tokens(self) -> int | None:
        """The first model's served context length (see ``context_of``)."""
        return self.context_of()

    def remote(self, host: Any = None, *, model: str | None = None) -> RemoteLLM:
        """The job-sized description of this service that a Ray worker builds its gateway and client from,
        for ``model`` (None: the first). With the study's ``host`` actor (see ``ray_host``) every call
        meters there; without, the worker meters alone against a snapshot of the room left."""
        name = self._name(model)
        used = self.meter.study_used_before + self.meter.study.tokens
        limit = self.meter.study_limit
        return RemoteLLM(
            self.url_of(name),
            model=self.client_for(name).model,
            api_key=self.api_key_of(name),
            job_limit=self.meter.job_limit,
            study_remaining=None if limit is None else max(0, limit - used),
            timeout_s=self.section.timeout_s,
            retries=self.section.max_retries,
            backoff_s=self.section.retry_backoff_s,
            max_tokens=self.section.max_tokens,
            prices=prices_of(self.arms[name]),
            host=host,
            name=name,
            context_tokens=self.context_of(name),
        )

    def close(self) -> None:
        if self.section.trace:
            import mlflow

            mlflow.flush_trace_async_logging()
        for client in self._clients.values():
            client.close()
        if self._http is not None:
            self._http.close()
        for server in self.servers.values():
            server.stop()
        self.servers.clear()


def _file_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


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
        name: str | None = None,
        context_tokens: int | None = None,
    ) -> None:
        self.name = name  # the model's name in llm.models (None: the study has one model)
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

    def client_for(self, model: str | None = None) -> LLMClient:
        """The client of this job's model (a worker gets the description of one model only)."""
        if model is not None and model != self.name:
            raise ConfigError(f"llm.models: this job was given model {self.name!r}, not {model!r}")
        return self.client

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
    def gateway(
        self, job_id: str, log_dir: Path, *, job_limit: int | None = None, model: str | None = None
    ) -> Iterator[Gateway]:
        if model is not None and model != self.name:
            raise ConfigError(f"llm.models: this job was given model {self.name!r}, not {model!r}")
        self.meter.limit_job(job_id, job_limit)
        with Gateway(
            self.base_url,
            job_id=job_id,
            meter=self.meter,
            api_key=self.api_key,
            model=self.model,
            prices=self.prices,
            transcript_path=Path(log_dir) / "llm.jsonl",
            retries=self.retries,
            backoff_s=self.backoff_s,
            timeout_s=self.timeout_s,
            context_tokens=self.context_tokens,
        ) as gateway:
            yield gateway
