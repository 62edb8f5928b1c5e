"""Study configuration: YAML plus ``key.path=value`` overrides, validated before anything starts.

Every model forbids unknown keys. Pluggable sections (``scheduler``, ``proposer``, ``suite``) name an
implementation by registry name; the remaining keys are validated by that implementation's ``Config``
model. Every error names the dotted key path and, where it is a choice, the allowed values. The sections of
one part live beside it (``llm/config.py``, ``sandboxes/config.py``, ``proposers/gate.py``); ``Config``
puts them together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from metasearch.errors import ConfigError
from metasearch.llm.config import LLMSection
from metasearch.manifest import format_validation_error
from metasearch.proposers.gate import GateConfig
from metasearch.registry import PROPOSERS, SCHEDULERS, SUITES, Registry, construct
from metasearch.sandboxes.config import SandboxSection
from metasearch.suites.protocol import Suite
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
    what: str = "plugin"
    """How errors name it: the section and the registry name (``proposer 'llm'``)."""

    def create(self, **keywords: Any) -> Any:
        """The plugin, built with the keywords its kind is built with (see ``registry``); ConfigError names
        a keyword its constructor does not take."""
        return construct(self.cls, self.config, self.what, **keywords)

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
            cls = suite_class(spec.name) if registry is SUITES else registry.resolve(spec.name)
        except ConfigError as exc:
            problems.append(str(exc))
            continue
        model = getattr(cls, "Config", None)
        if model is None:
            problems.append(f"{section}.name: {spec.name!r} has no Config model")
            continue
        try:
            plugins[section] = Plugin(cls, model.model_validate(spec.options()), f"{section} {spec.name!r}")
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


def study_config(study_dir: Path) -> Config:
    """The study's frozen config; ConfigError when ``study_dir`` is not a study."""
    config_path = Path(study_dir) / "config.yaml"
    if not config_path.is_file():
        raise ConfigError(f"{study_dir}: not a study directory (no config.yaml)")
    return load_config_data(yaml.safe_load(config_path.read_text()) or {}).config


def build_suite(name: str, cfg: Config | None = None) -> Suite:
    """Suite ``name`` with the options of ``cfg.suite`` when that config uses the same suite, else its
    defaults. ConfigError names the suite when it is unknown, is not a ``Suite`` or its options do not
    validate."""
    suite_class(name)
    suite: Suite = SUITES.create(
        name, cfg.suite.options() if cfg is not None and cfg.suite.name == name else {}
    )
    return suite


def suite_class(name: str) -> type[Suite]:
    """The suite class registered as ``name`` (or named ``module:Class``). ConfigError when it is unknown or
    does not inherit ``Suite``, naming the class and the base: the runner and the study call the base's
    methods (``needs``, ``learn``, ...) without asking whether a suite has them."""
    cls = SUITES.resolve(name)
    if not (isinstance(cls, type) and issubclass(cls, Suite)):
        where = f"{getattr(cls, '__module__', '?')}:{getattr(cls, '__qualname__', type(cls).__name__)}"
        raise ConfigError(
            f"suite.name: {name!r} ({where}) does not inherit metasearch.suites.protocol.Suite; a suite "
            "subclasses it, implements tasks, prepare and grade, and keeps the base's defaults for the rest"
        )
    return cls


def _deepcopy(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _deepcopy(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_deepcopy(v) for v in data]
    return data
