"""The agent manifest, ``agent.toml``: what an agent design is and how to run it.

Example::

    name = "trainer"
    description = "Plain MLP trainer for the training suite."

    [entry]
    solve = ["python3", "-m", "trainer.solve", "{task_dir}"]   # run on one task directory
    smoke = ["python3", "-m", "pytest", "-q", "tests"]         # the admission check
    self_improve = ["python3", "-m", "trainer.improve", "{problem_file}"]  # optional

    [knobs]
    file = "knobs.json"            # where the current values live (JSON object), relative to the agent root

    [knobs.params.lr]
    type = "float"                 # float | int | categorical
    low = 1e-4
    high = 1.0
    log = true

    [knobs.params.optimizer]
    type = "categorical"
    choices = ["sgd", "adam"]

    [resources]
    gpu = false

    protected = ["tests/**"]       # paths a proposer may not change (agent.toml itself always may not
                                   # change its name)

Entry commands are argument lists; ``{task_dir}``, ``{problem_file}`` and ``{agent_dir}`` are replaced at run
time. The manifest is validated with pydantic: an unknown key or a bad value names the key path.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from metasearch.errors import ConfigError

MANIFEST_NAME = "agent.toml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _RangeKnob(_Strict):
    low: float
    high: float
    log: bool = False

    @model_validator(mode="after")
    def _range(self) -> _RangeKnob:
        if not self.low < self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high})")
        if self.log and self.low <= 0:
            raise ValueError("log-scaled knobs need low > 0")
        return self


class FloatKnob(_RangeKnob):
    type: Literal["float"]


class IntKnob(_RangeKnob):
    type: Literal["int"]
    low: int
    high: int


class CategoricalKnob(_Strict):
    type: Literal["categorical"]
    choices: list[str | int | float | bool] = Field(min_length=1)


Knob = Annotated[FloatKnob | IntKnob | CategoricalKnob, Field(discriminator="type")]


class Knobs(_Strict):
    file: str = "knobs.json"
    params: dict[str, Knob] = Field(default_factory=dict)


class Entry(_Strict):
    solve: list[str] = Field(min_length=1)
    smoke: list[str] | None = None
    self_improve: list[str] | None = None


class Resources(_Strict):
    gpu: bool = False
    llm: bool = False
    cpus: float | None = None
    memory_mb: int | None = None


class Manifest(_Strict):
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    description: str = ""
    entry: Entry
    knobs: Knobs = Field(default_factory=Knobs)
    resources: Resources = Field(default_factory=Resources)
    protected: list[str] = Field(default_factory=list)

    def command(self, which: Literal["solve", "smoke", "self_improve"], **values: str) -> list[str]:
        """The entry command with ``{task_dir}``-style placeholders filled in."""
        argv = getattr(self.entry, which)
        if argv is None:
            raise ConfigError(f"entry.{which}: agent {self.name!r} declares no {which} entry point")
        return [arg.format(**values) if "{" in arg else arg for arg in argv]


def format_validation_error(exc: ValidationError, prefix: str = "") -> str:
    """One line per problem, each naming the dotted key path."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"] if not _is_union_tag(p))
        path = f"{prefix}.{loc}" if prefix and loc else (prefix or loc)
        lines.append(f"{path or '<root>'}: {err['msg']}")
    return "\n".join(lines)


def _is_union_tag(part: Any) -> bool:
    # pydantic puts the discriminator value (e.g. "float") or a function name in the location path.
    return isinstance(part, str) and (part in {"float", "int", "categorical"} or part.startswith("function-"))


def parse_manifest(text: str, *, source: str = MANIFEST_NAME) -> Manifest:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from exc
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: invalid manifest\n{format_validation_error(exc)}") from exc


def load_manifest(agent_dir: Path) -> Manifest:
    path = Path(agent_dir) / MANIFEST_NAME
    if not path.is_file():
        raise ConfigError(f"{path}: missing; every agent design needs an {MANIFEST_NAME}")
    return parse_manifest(path.read_text(), source=str(path))
