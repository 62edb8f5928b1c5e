"""The ``llm`` section of a study's config: the endpoint (or the vLLM server to manage), budgets, retries."""

from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict, Field


class ServeSection(BaseModel):
    """A vLLM server metasearch starts and stops itself (see ``metasearch.llm.serve``)."""

    model_config = ConfigDict(extra="forbid")

    model: str
    """A local model directory or a name vLLM resolves (offline machines: a directory)."""
    served_model_name: str | None = None
    python: str | None = None
    """Interpreter with vLLM installed (default: metasearch's own)."""
    host: str = "127.0.0.1"
    env: dict[str, str] = Field(default_factory=dict)
    tensor_parallel_size: int = Field(1, ge=1)
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    max_model_len: int | None = Field(None, ge=1)
    port: int = Field(0, ge=0, le=65535)
    extra_args: list[str] = Field(default_factory=list)
    gpus: list[str] = Field(default_factory=lambda: ["0"])
    startup_timeout_s: float = Field(600, gt=0)


class LLMSection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    base_url: str | None = None
    """An OpenAI-compatible endpoint (``http://host:8000/v1``); unset with ``serve``: the managed server."""
    model: str | None = None
    """Default: the endpoint's first listed model."""
    api_key_env: str | None = "OPENAI_API_KEY"
    """Name of the environment variable holding the key (never the key itself: configs are archived)."""
    serve: ServeSection | None = None
    max_tokens_per_job: int | None = Field(None, ge=1)
    """Per-job token budget enforced by the gateway (the study's is ``budget.tokens``)."""
    max_tokens: int | None = Field(4096, ge=1)
    """Default ``max_tokens`` of each completion the host asks for."""
    timeout_s: float = Field(300.0, gt=0)
    max_retries: int = Field(4, ge=0)
    retry_backoff_s: float = Field(0.5, ge=0)
    """First gateway retry delay (doubling); the client uses the ``openai`` package's backoff."""
    trace: bool = False
    """Record each host-side call (meta-agent) as an MLflow trace in the study's experiment."""
    price_input_per_mtok: float = Field(0.0, ge=0)
    price_output_per_mtok: float = Field(0.0, ge=0)


def endpoint_configured(section: LLMSection) -> bool:
    """Whether the study has an LLM: an endpoint (``base_url`` or ``OPENAI_BASE_URL``) or a server to manage."""
    return bool(section.base_url or section.serve or os.environ.get("OPENAI_BASE_URL"))
