"""The Sandbox interface: run a command somewhere isolated, with limits, and get its result back."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol, runtime_checkable

# Mounted repositories are owned by the host user and a sandbox runs as another: without this, git refuses
# them ("dubious ownership") and code in the sandbox cannot `git diff` its work.
GIT_SAFE_ENV = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*"}


@dataclass(frozen=True)
class Mount:
    """A host directory or file made visible inside the sandbox at ``target``.

    A writable mount must be a directory. The command sees a copy of it; when the command is over, the
    directory holds what the command left there (regular files, folders, links that stay inside it), a
    top-level ``.git`` excepted: it never goes in, and one written there is a violation."""

    source: Path
    target: str
    read_only: bool = True


@dataclass(frozen=True)
class ResolvedLimits:
    """Every limit of one command, with a value. ``disk_mb`` bounds each writable mount and ``tmp_mb`` the
    scratch ``/tmp``; in Docker both are in-memory filesystems, so what is written there counts toward
    ``memory_mb`` as well. Output beyond ``output_bytes`` is truncated, not stored."""

    cpus: float = 1.0
    memory_mb: int = 2048
    pids: int = 256
    output_bytes: int = 1_000_000
    timeout_s: float = 600.0
    tmp_mb: int = 512
    disk_mb: int = 1024


@dataclass(frozen=True)
class Limits:
    """Resource limits asked for one command. A field left ``None`` takes the sandbox's configured value
    (the ``sandbox`` section of the config), so every run is bounded by what the user configured, whoever
    starts it; a caller sets a field only to ask for something else (a grader that needs more memory)."""

    cpus: float | None = None
    memory_mb: int | None = None
    pids: int | None = None
    output_bytes: int | None = None
    timeout_s: float = 600.0
    tmp_mb: int | None = None
    disk_mb: int | None = None

    def resolve(self, base: ResolvedLimits) -> ResolvedLimits:
        """These limits with every unset field taken from ``base``."""
        given = {k: v for k, v in self.__dict__.items() if v is not None}
        return replace(base, **given)


DEFAULT_LIMITS = ResolvedLimits()


@dataclass(frozen=True)
class ExecResult:
    """What happened. ``reason`` is a short human-readable cause when the command did not succeed
    (``"timeout after 30s"``, ``"out of memory (137)"``, ``"exit code 1"``). ``violation`` is set when the
    command broke a rule of the sandbox itself (``"disk limit (1024 MB) reached in /task"``, a link out of a
    writable mount, a write to ``.git``): the run failed whatever its exit code, and ``reason`` says so."""

    exit_code: int | None
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    oom_killed: bool = False
    truncated: bool = False
    reason: str | None = None
    violation: str | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.violation is None


@dataclass(frozen=True)
class RunSpec:
    """Everything a sandbox needs to run one command."""

    command: Sequence[str]
    mounts: Sequence[Mount] = ()
    workdir: str = "/work"
    env: Mapping[str, str] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    gpus: Sequence[str] = ()
    labels: Mapping[str, str] = field(default_factory=dict)


@runtime_checkable
class Session(Protocol):
    """An interactive sandbox: one long-lived container/process group, many commands."""

    def exec(self, command: Sequence[str], *, timeout_s: float | None = None) -> ExecResult: ...


@runtime_checkable
class Sandbox(Protocol):
    """Runs untrusted commands.

    ``run`` never raises for anything the command itself did (non-zero exit, timeout, OOM, huge
    output): those come back in ``ExecResult``. It raises ``InfrastructureError`` when the sandbox
    itself cannot work (daemon unreachable, image missing, disk full). A session's exit raises
    ``SandboxViolation`` when what the commands left in a writable mount is refused (see ``ExecResult``).
    """

    name: str

    def run(self, spec: RunSpec) -> ExecResult: ...

    def session(self, spec: RunSpec) -> AbstractContextManager[Session]: ...
