"""The Sandbox interface: run a command somewhere isolated, with limits, and get its result back."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

# Mounted repositories are owned by the host user and a sandbox runs as another: without this, git refuses
# them ("dubious ownership") and code in the sandbox cannot `git diff` its work.
GIT_SAFE_ENV = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*"}


@dataclass(frozen=True)
class Mount:
    """A host directory or file made visible inside the sandbox at ``target``."""

    source: Path
    target: str
    read_only: bool = True


@dataclass(frozen=True)
class Limits:
    """Resource limits for one command. Output beyond ``output_bytes`` is truncated, not stored."""

    cpus: float = 1.0
    memory_mb: int = 2048
    pids: int = 256
    output_bytes: int = 1_000_000
    timeout_s: float = 600.0
    tmp_mb: int = 512


@dataclass(frozen=True)
class ExecResult:
    """What happened. ``reason`` is a short human-readable cause when the command did not succeed
    (``"timeout after 30s"``, ``"out of memory (137)"``, ``"exit code 1"``)."""

    exit_code: int | None
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    oom_killed: bool = False
    truncated: bool = False
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


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
    itself cannot work (daemon unreachable, image missing, disk full).
    """

    name: str

    def run(self, spec: RunSpec) -> ExecResult: ...

    def session(self, spec: RunSpec) -> AbstractContextManager[Session]: ...
