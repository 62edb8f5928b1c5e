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
time, by plain text replacement: any other brace is literal text (no ``str.format``, so a candidate's
``{nope}`` or ``{task_dir:>99999999}`` is just an argument). The manifest is validated with pydantic: an
unknown key or a bad value names the key path. The manifest is written by candidates, so it is bounded: at
most ``MAX_MANIFEST_BYTES`` of UTF-8, ``MAX_ARGS`` arguments of ``MAX_ARG_CHARS`` each per entry, and
``knobs.file`` a relative path inside the agent's tree.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import tomllib
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from metasearch.errors import ConfigError

MANIFEST_NAME = "agent.toml"
MAX_MANIFEST_BYTES = 1 << 20
MAX_ARGS = 256
MAX_ARG_CHARS = 32_768
MAX_PATH_CHARS = 1024
PLACEHOLDERS = ("task_dir", "problem_file", "agent_dir")
_PLACEHOLDER = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")


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


def agent_relative_path(value: str) -> str:
    """``value`` unchanged when it is a relative path that stays inside the agent's tree (no ``..``, no
    ``.git`` part, no NUL); ValueError saying what is wrong otherwise. Lexical only: whoever opens the file
    must still refuse links (see ``proposers.knobs``)."""
    path = PurePosixPath(value)
    if "\0" in value:
        raise ValueError("must not contain a NUL character")
    if path.is_absolute():
        raise ValueError(f"{value!r} is absolute; give a path relative to the agent's root")
    if ".." in path.parts:
        raise ValueError(f"{value!r} leaves the agent's tree ('..'); give a path inside it")
    if not path.parts or path.name in ("", "."):
        raise ValueError(f"{value!r} names no file")
    if any(part.lower() == ".git" for part in path.parts):
        raise ValueError(f"{value!r} is inside .git; give a path in the agent's own files")
    return value


def _no_nul(arg: str) -> str:
    if "\0" in arg:
        raise ValueError("an argument must not contain a NUL character")
    return arg


AgentPath = Annotated[
    str, Field(min_length=1, max_length=MAX_PATH_CHARS), AfterValidator(agent_relative_path)
]


class Knobs(_Strict):
    file: AgentPath = "knobs.json"
    params: dict[str, Knob] = Field(default_factory=dict)


Arg = Annotated[str, Field(max_length=MAX_ARG_CHARS), AfterValidator(_no_nul)]
Argv = Annotated[list[Arg], Field(min_length=1, max_length=MAX_ARGS)]


class Entry(_Strict):
    solve: Argv
    smoke: Argv | None = None
    self_improve: Argv | None = None


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
        """The entry command with the ``PLACEHOLDERS`` given in ``values`` replaced (one pass, plain text: any
        other brace, and a placeholder not given, stay as written). ConfigError when the agent declares no
        such entry point; TypeError for a value that is no placeholder (a bug in the caller)."""
        unknown = sorted(set(values) - set(PLACEHOLDERS))
        if unknown:
            raise TypeError(f"not entry placeholders: {unknown}; known: {list(PLACEHOLDERS)}")
        argv = getattr(self.entry, which)
        if argv is None:
            raise ConfigError(f"entry.{which}: agent {self.name!r} declares no {which} entry point")
        return [_PLACEHOLDER.sub(lambda m: values.get(m[1], m[0]), arg) for arg in argv]


def format_validation_error(exc: ValidationError, prefix: str = "") -> str:
    """One line per problem, each naming the dotted key path."""
    lines = []
    for err in exc.errors():
        loc = ""
        for part in err["loc"]:
            if not _is_union_tag(part):
                loc += f"[{part}]" if isinstance(part, int) else f".{part}" if loc else str(part)
        path = f"{prefix}.{loc}" if prefix and loc else (prefix or loc)
        lines.append(f"{path or '<root>'}: {err['msg']}")
    return "\n".join(lines)


def _is_union_tag(part: Any) -> bool:
    # pydantic puts the discriminator value (e.g. "float") or a function name in the location path.
    return isinstance(part, str) and (part in {"float", "int", "categorical"} or part.startswith("function-"))


def parse_manifest(text: str, *, source: str = MANIFEST_NAME) -> Manifest:
    """The manifest ``text`` holds; ConfigError naming ``source`` and the key for any problem with it."""
    if len(text) > MAX_MANIFEST_BYTES:
        raise ConfigError(f"{source}: too large ({len(text)} characters > {MAX_MANIFEST_BYTES})")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from exc
    except RecursionError as exc:
        raise ConfigError(f"{source}: not valid TOML: nested too deeply") from exc
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: invalid manifest\n{format_validation_error(exc)}") from exc
    except RecursionError as exc:
        raise ConfigError(f"{source}: invalid manifest: nested too deeply") from exc


def read_at_most(fd: int, limit: int) -> bytes:
    """Up to ``limit`` bytes from ``fd`` (fewer only at end of file)."""
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = os.read(fd, min(limit - size, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def load_manifest(agent_dir: Path) -> Manifest:
    """The manifest in ``agent_dir``. ConfigError naming the file when it is missing, a link, not a regular
    file, over ``MAX_MANIFEST_BYTES``, not UTF-8, or invalid (see ``parse_manifest``); never follows a link
    named ``agent.toml`` nor blocks on a FIFO."""
    path = Path(agent_dir) / MANIFEST_NAME
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ConfigError(f"{path}: missing; every agent design needs an {MANIFEST_NAME}") from None
    except OSError as exc:
        why = "is a symbolic link" if exc.errno == errno.ELOOP else f"cannot be opened ({exc.strerror})"
        raise ConfigError(f"{path}: {why}; {MANIFEST_NAME} must be a regular file") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError(f"{path}: not a regular file; {MANIFEST_NAME} must be a regular file")
        data = read_at_most(fd, MAX_MANIFEST_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_MANIFEST_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_MANIFEST_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from exc
    return parse_manifest(text, source=str(path))
