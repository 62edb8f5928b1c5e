"""Study configuration: YAML plus ``key.path=value`` overrides, validated before anything starts.

Every model forbids unknown keys. Pluggable sections (``scheduler``, ``proposer``, ``suite``) name an
implementation by registry name; the remaining keys are validated by that implementation's ``Config``
model. Every error names the dotted key path and, where it is a choice, the allowed values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from metasearch.errors import ConfigError
from metasearch.manifest import format_validation_error
from metasearch.proposers.gate import GateConfig
from metasearch.registry import PROPOSERS, SCHEDULERS, SUITES, Registry
from metasearch.sandboxes.protocol import ResolvedLimits
from metasearch.types import Budget


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PluginSection(BaseModel):
    """``{name: <registry name>, **options}``; options are checked against the plugin's Config."""

    model_config = ConfigDict(extra="allow")
    name: str

    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class StudySection(_Strict):
    name: str = Field("study", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    seed: int = 0
    workers: int = Field(2, ge=1, le=1024)
    seeds: list[str] = Field(default_factory=lambda: ["trainer"], min_length=1)
    """Seed agent designs: folder names under ``seeds/`` or paths to folders holding an agent.toml."""
    seed_evaluations: Literal["all", "none"] = "all"
    """``all``: evaluate every seed on every task first (outside the budget), as HGM does."""
    heartbeat_s: float = Field(5.0, gt=0)


class BudgetSection(_Strict):
    evaluations: int | None = Field(100, ge=1)
    expansions: int | None = Field(None, ge=1)
    wall_time_s: float | None = Field(None, gt=0)
    tokens: int | None = Field(None, ge=1)
    cost_usd: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _bounded(self) -> BudgetSection:
        if self.evaluations is None and self.wall_time_s is None:
            raise ValueError("set at least one of evaluations or wall_time_s, or the study never ends")
        return self

    def to_budget(self) -> Budget:
        return Budget(**self.model_dump())


class SandboxSection(_Strict):
    name: Literal["auto", "docker", "local"] = "auto"
    image: str | None = None
    """Docker image tag, or the name of an offline-built image (``polyglot``: the tag
    ``metasearch images build polyglot`` makes); default: the image ``metasearch images build`` makes."""
    cpus: float = Field(1.0, gt=0)
    memory_mb: int = Field(2048, ge=64)
    pids: int = Field(256, ge=16)
    output_bytes: int = Field(1_000_000, ge=1024)
    tmp_mb: int = Field(512, ge=16)
    disk_mb: int = Field(1024, ge=16)
    """Size of each writable area of a run (the task folder, a workspace). In Docker it is memory-backed,
    like /tmp, so what a run writes there counts toward memory_mb too; a run that fills it fails with a
    reason saying "disk limit"."""
    gpus: Literal["none", "all"] | list[str] = "none"
    gpu_share: int = Field(1, ge=1)
    pin_cores: bool = True
    """Each run gets CPU cores of its own while there are enough (``ceil(cpus)`` of them; then the least
    used), so that concurrent runs do not share a core while others idle (timings would disturb each
    other). Turn it off for a Docker engine on another machine, whose cores these are not."""

    def limits(self) -> ResolvedLimits:
        """Every sandbox run's limits (a run sets only its timeout, or asks for more memory for a grader)."""
        return ResolvedLimits(
            cpus=self.cpus,
            memory_mb=self.memory_mb,
            pids=self.pids,
            output_bytes=self.output_bytes,
            tmp_mb=self.tmp_mb,
            disk_mb=self.disk_mb,
        )


class ServeSection(_Strict):
    """A vLLM server metasearch starts and stops itself (see ``metasearch.llm.serve``)."""

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


class ModelEntry(_Strict):
    """One model of ``llm.models``: a name for it, its endpoint or managed server, and its price."""

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


class LLMSection(_Strict):
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
    ``metasearch.llm.choice``), ``uniform`` (each as often) or ``first``."""

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

    def arm_name(self) -> str:
        """The single-model form's name: its model, the model it serves, or ``default``."""
        if self.model:
            return self.model
        if self.serve is not None:
            return self.serve.served_model_name or self.serve.model
        return "default"


SINGLE_MODEL_KEYS = ("base_url", "model", "serve", "price_input_per_mtok", "price_output_per_mtok")


class RayTaskResources(_Strict):
    """What one Ray task of a job kind asks of its node."""

    num_cpus: float = Field(1.0, ge=0)
    num_gpus: float = Field(0.0, ge=0)
    resources: dict[str, float] = Field(default_factory=dict)
    """Custom Ray resources (``ray start --resources='{"sandbox": 4}'``), e.g. to keep jobs off the head."""


class ExecutorSection(_Strict):
    """Where jobs run: worker threads on this machine, or Ray tasks on a cluster."""

    name: Literal["threads", "ray"] = "threads"
    address: str | None = None
    """Ray cluster address (``auto`` to join a running cluster; ``None`` starts a local one)."""
    num_cpus: float = Field(1.0, gt=0)
    """Per evaluation task (with ``num_gpus`` and ``resources``)."""
    num_gpus: float = Field(0.0, ge=0)
    resources: dict[str, float] = Field(default_factory=dict)
    expand: RayTaskResources = Field(default_factory=RayTaskResources)
    """Per expansion task (the proposer runs there: a tool loop's or self-modification's sandbox)."""
    smoke: RayTaskResources = Field(default_factory=RayTaskResources)
    """Per admission-gate smoke run."""
    wait_timeout_s: float = Field(600.0, gt=0)
    """Every Ray wait has this timeout, so a request the cluster cannot satisfy fails instead of hanging."""

    def for_kind(self, kind: str) -> RayTaskResources:
        if kind == "evaluate":
            return RayTaskResources(num_cpus=self.num_cpus, num_gpus=self.num_gpus, resources=self.resources)
        return self.expand if kind == "expand" else self.smoke

    def requests(self) -> dict[str, dict[str, float]]:
        """Per job kind, the Ray resources one task asks for (``CPU``, ``GPU`` and custom names)."""
        out: dict[str, dict[str, float]] = {}
        for kind in ("evaluate", "expand", "smoke"):
            ask = self.for_kind(kind)
            out[kind] = {"CPU": ask.num_cpus, "GPU": ask.num_gpus, **ask.resources}
        return out


class MLflowSection(_Strict):
    enabled: bool = True
    tracking_uri: str | None = None
    """Default: a SQLite store ``mlflow.db`` in the study directory."""


class TrackingSection(_Strict):
    mlflow: MLflowSection = Field(default_factory=MLflowSection)


class Config(_Strict):
    study: StudySection = Field(default_factory=StudySection)
    budget: BudgetSection = Field(default_factory=BudgetSection)
    scheduler: PluginSection = Field(default_factory=lambda: PluginSection(name="hgm"))
    proposer: PluginSection = Field(default_factory=lambda: PluginSection(name="knobs"))
    suite: PluginSection = Field(default_factory=lambda: PluginSection(name="training"))
    sandbox: SandboxSection = Field(default_factory=SandboxSection)
    executor: ExecutorSection = Field(default_factory=ExecutorSection)
    llm: LLMSection = Field(default_factory=LLMSection)
    tracking: TrackingSection = Field(default_factory=TrackingSection)
    gate: GateConfig = Field(default_factory=GateConfig)
    """The admission gate for proposed children (size limits, smoke check)."""
    archive_dir: str = "archive"


PLUGIN_SECTIONS: dict[str, Registry] = {"scheduler": SCHEDULERS, "proposer": PROPOSERS, "suite": SUITES}


@dataclass(frozen=True)
class Plugin:
    """A resolved pluggable section: the class and its validated config."""

    cls: Any
    config: BaseModel

    def create(self, **kwargs: Any) -> Any:
        return self.cls(self.config, **kwargs)

    @property
    def secret_options(self) -> tuple[str, ...]:
        """Options the plugin keeps from agents (its class's ``SECRET_OPTIONS``, e.g. the training suite's
        ``data_key``): drawn per study when unset, recorded only as a digest."""
        return tuple(getattr(self.cls, "SECRET_OPTIONS", ()))


@dataclass(frozen=True)
class ResolvedConfig:
    config: Config
    plugins: Mapping[str, Plugin]

    def to_yaml(self) -> str:
        return dump_yaml(self.config)


def dump_yaml(config: Config) -> str:
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)


def parse_overrides(overrides: Sequence[str]) -> list[tuple[list[str], Any]]:
    """``scheduler.alpha=0.5`` -> ``(["scheduler", "alpha"], 0.5)``; values are parsed as YAML scalars."""
    parsed = []
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {item!r}: expected key.path=value")
        try:
            value = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError as exc:
            raise ConfigError(f"override {key}: cannot parse value {raw!r}: {exc}") from exc
        parsed.append((key.strip().split("."), value))
    return parsed


def apply_overrides(data: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    for path, value in parse_overrides(overrides):
        node = data
        for i, part in enumerate(path[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"override {'.'.join(path)}: {'.'.join(path[: i + 1])} is not a section")
            node = child
        node[path[-1]] = value
    return data


def load_config_data(data: Mapping[str, Any], overrides: Sequence[str] = ()) -> ResolvedConfig:
    """Validate a config mapping (after overrides) and resolve its plugins. Raises ConfigError."""
    merged = apply_overrides(_deepcopy(dict(data)), overrides)
    try:
        config = Config.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError("invalid configuration\n" + format_validation_error(exc)) from exc
    problems: list[str] = []
    plugins: dict[str, Plugin] = {}
    for section, registry in PLUGIN_SECTIONS.items():
        spec: PluginSection = getattr(config, section)
        try:
            cls = registry.resolve(spec.name)
        except ConfigError as exc:
            problems.append(str(exc))
            continue
        model = getattr(cls, "Config", None)
        if model is None:
            problems.append(f"{section}.name: {spec.name!r} has no Config model")
            continue
        try:
            plugins[section] = Plugin(cls, model.model_validate(spec.options()))
        except ValidationError as exc:
            problems.append(format_validation_error(exc, prefix=section))
    if problems:
        raise ConfigError("invalid configuration\n" + "\n".join(problems))
    return ResolvedConfig(config, plugins)


def load_config(path: Path | str, overrides: Sequence[str] = ()) -> ResolvedConfig:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections")
    try:
        return load_config_data(data, overrides)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def _deepcopy(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _deepcopy(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_deepcopy(v) for v in data]
    return data
