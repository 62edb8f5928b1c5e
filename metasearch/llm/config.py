"""The ``llm`` section of a study's config: the endpoint (or the vLLM server to manage) or several models,
budgets, retries."""

from __future__ import annotations

import os
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from metasearch.types import CostBasis


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


class ModelEntry(BaseModel):
    """One model of ``llm.models``: a name for it, its endpoint or managed server, and its price."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
    """How status, MLflow and the journal name it."""
    serve: ServeSection | None = None
    """A vLLM server metasearch starts for this model (or ``base_url``)."""
    base_url: str | None = Field(None, validate_default=True)
    """An OpenAI-compatible endpoint (or ``serve``)."""
    model: str | None = None
    """The model's name at the endpoint; default: the endpoint's first listed model."""
    api_key_env: str | None = None
    """Default: ``llm.api_key_env``."""
    price_input_per_mtok: float = Field(0.0, ge=0)
    """USD per million tokens; when every model has a price, the bandit weighs gains per USD."""
    price_output_per_mtok: float = Field(0.0, ge=0)

    @field_validator("base_url")
    @classmethod
    def _one_endpoint(cls, value: str | None, info: ValidationInfo) -> str | None:
        if "serve" not in info.data:  # serve itself is invalid: that error is enough
            return value
        if (value is None) == (info.data["serve"] is None):
            raise ValueError("set either base_url (an endpoint) or serve (a server metasearch starts)")
        return value


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
    models: list[ModelEntry] = Field(default_factory=list)
    """Several models for the meta-agent instead of the one above; ``choose`` picks one per expansion.
    Sandboxed agents' own calls (``resources.llm``) go to the first."""
    choose: Literal["bandit", "uniform", "first"] = "bandit"
    """With several ``models``: ``bandit`` (the model whose children gained most per token, see
    ``metasearch.schedulers.model_choice``), ``uniform`` (each as often) or ``first``."""

    @field_validator("models")
    @classmethod
    def _distinct_names(cls, value: list[ModelEntry]) -> list[ModelEntry]:
        names = [m.name for m in value]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"each model needs its own name; {twice} appear more than once")
        return value

    @model_validator(mode="after")
    def _models_alone(self) -> LLMSection:
        if self.models:
            single = [k for k in SINGLE_MODEL_KEYS if getattr(self, k) not in (None, 0.0)]
            if single:
                raise ValueError(
                    f"with llm.models, set {', '.join(single)} on each entry of llm.models, not on llm"
                )
        return self

    def arms(self) -> list[tuple[str, LLMSection]]:
        """Each model as a single-model section (its own endpoint, model and prices; the rest shared), by
        name. The single-model form is one arm, named after its model."""
        if not self.models:
            return [(self.arm_name(), self)]
        out = []
        for entry in self.models:
            update = entry.model_dump(exclude={"name"}) | {"models": []}
            update["serve"] = entry.serve
            update["api_key_env"] = entry.api_key_env or self.api_key_env
            out.append((entry.name, self.model_copy(update=update)))
        return out

    def served_gpus(self) -> list[str]:
        """The GPUs the study's managed model servers keep (sandboxes get none of them)."""
        gpus = [gpu for _, arm in self.arms() if arm.serve is not None for gpu in arm.serve.gpus]
        return list(dict.fromkeys(gpus))

    def cost_basis(self) -> CostBasis:
        """What the model bandit divides gains by: USD when every model has a price, else tokens."""
        arms = [arm for _, arm in self.arms()]
        priced = all(arm.price_input_per_mtok > 0 or arm.price_output_per_mtok > 0 for arm in arms)
        return "usd" if len(arms) > 1 and priced else "tokens"

    def arm_name(self) -> str:
        """The single-model form's name: its model, the model it serves, or ``default``."""
        if self.model:
            return self.model
        if self.serve is not None:
            return self.serve.served_model_name or self.serve.model
        return "default"


SINGLE_MODEL_KEYS = ("base_url", "model", "serve", "price_input_per_mtok", "price_output_per_mtok")


def endpoint_configured(section: LLMSection) -> bool:
    """Whether the study has an LLM: an endpoint (``base_url`` or ``OPENAI_BASE_URL``), a server to manage or
    several ``models``."""
    return bool(section.models or section.base_url or section.serve or os.environ.get("OPENAI_BASE_URL"))
