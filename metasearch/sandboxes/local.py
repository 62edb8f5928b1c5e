"""LocalSandbox: run a command as a local process group. **Not a security boundary.**

Use it only for trusted code (your own seeds, tests, machines without Docker). It gives a process group
that a timeout kills as a whole, resource limits (CPU time, file size, open files, address space), an
environment with no host secrets, and capped output — but the command can read and write anything the
calling user can.

Mounts: each ``Mount.target`` (e.g. ``/task``) maps to a symlink ``<tmp root>/task`` pointing at the
source; every occurrence of a target path in the command's arguments, environment values and working
directory is rewritten to the mapped path. Read-only mounts are not enforced.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from metasearch.sandboxes.cores import CORES
from metasearch.sandboxes.protocol import DEFAULT_LIMITS, ExecResult, Mount, ResolvedLimits, RunSpec

log = logging.getLogger(__name__)


class PathMap:
    """Rewrites sandbox paths (mount targets) to host paths under a private root."""

    def __init__(self, root: Path, mounts: Sequence[Mount]) -> None:
        self.root = root
        self.targets: dict[str, Path] = {}
        for m in sorted(mounts, key=lambda m: len(m.target), reverse=True):
            mapped = root / m.target.strip("/")
            mapped.parent.mkdir(parents=True, exist_ok=True)
            mapped.symlink_to(Path(m.source).resolve())
            self.targets[m.target.rstrip("/")] = mapped
        alternatives = "|".join(re.escape(t) for t in self.targets)
        self._pattern = (
            re.compile(rf"(?<![\w.-])({alternatives})(?=/|$|[\s:;,'\"=)])") if self.targets else None
        )

    def __call__(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._pattern.sub(lambda m: str(self.targets[m.group(1)]), text)


class LocalSandbox:
    """See the module docstring. Thread-safe: every run is independent."""

    name = "local"

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid")

    def __init__(
        self,
        config: Config | None = None,
        *,
        study: str = "",
        limits: ResolvedLimits = DEFAULT_LIMITS,
    ) -> None:
        self.config = config or LocalSandbox.Config()
        self.study = study
        self.limits = limits

    def run(self, spec: RunSpec) -> ExecResult:
        with tempfile.TemporaryDirectory(prefix="ms-local-") as tmp:
            root = Path(tmp)
            paths = PathMap(root / "root", spec.mounts)
            (root / "tmp").mkdir()
            env = self._env(spec.env, paths, root / "tmp")
            cwd = Path(paths(spec.workdir))
            if not cwd.exists():
                cwd = root / "tmp"
            command = [paths(arg) for arg in spec.command]
            return _run_group(command, cwd, env, spec.limits.resolve(self.limits), root)

    @contextlib.contextmanager
    def session(self, spec: RunSpec) -> Iterator[LocalSession]:
        with tempfile.TemporaryDirectory(prefix="ms-local-") as tmp:
            root = Path(tmp)
            paths = PathMap(root / "root", spec.mounts)
            (root / "tmp").mkdir()
            env = self._env(spec.env, paths, root / "tmp")
            yield LocalSession(paths, env, paths(spec.workdir), spec.limits.resolve(self.limits), root)

    def _env(self, extra: Mapping[str, str], paths: PathMap, tmp: Path) -> dict[str, str]:
        # No host environment: only a PATH that finds this interpreter first, and what the spec sets.
        path = os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"])
        env = {"PATH": path, "LANG": "C.UTF-8", "HOME": str(tmp), "TMPDIR": str(tmp)}
        env.update({k: paths(v) for k, v in extra.items()})
        if env.get("HOME") == "/tmp":
            env["HOME"] = str(tmp)
        return env


class LocalSession:
    def __init__(
        self, paths: PathMap, env: dict[str, str], workdir: str, limits: ResolvedLimits, root: Path
    ) -> None:
        self.paths, self.env, self.workdir, self.limits, self.root = paths, env, workdir, limits, root

    def exec(self, command: Sequence[str], *, timeout_s: float | None = None) -> ExecResult:
        limits = self.limits if timeout_s is None else replace(self.limits, timeout_s=timeout_s)
        return _run_group([self.paths(a) for a in command], Path(self.workdir), self.env, limits, self.root)


def _limit_resources(limits: ResolvedLimits, cores: list[int]) -> None:
    """Runs in the child before exec."""
    os.sched_setaffinity(0, cores)
    cpu = int(limits.timeout_s * max(1.0, limits.cpus)) + 5
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
    fsize = 2 << 30
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    # CUDA reserves address space for the host's and every GPU's memory together when it starts, so on a
    # machine with an NVIDIA driver any address-space limit that bounds memory makes every CUDA program
    # fail with "out of memory" (each kernels grading did, on an H200). The data-segment limit counts
    # only memory mapped writable (CUDA's reservation is not, until used), so it bounds the same memory
    # there: CUDA started under it and took 1 GiB of GPU memory, and a 12 GiB host allocation was refused.
    kind, size = memory_limit(limits, NVIDIA)
    resource.setrlimit(kind, (size, size))


# An NVIDIA driver is loaded here (its control device exists).
NVIDIA = Path("/dev/nvidiactl").exists() or Path("/proc/driver/nvidia").is_dir()


def memory_limit(limits: ResolvedLimits, nvidia: bool) -> tuple[int, int]:
    """The resource limit that bounds a run's memory, and its size in bytes: generous, since numerical
    libraries reserve more than they touch. The address space, or the data segment where CUDA runs."""
    size = max(limits.memory_mb * 4, 8192) << 20
    return (resource.RLIMIT_DATA if nvidia else resource.RLIMIT_AS), size


def _run_group(
    command: list[str], cwd: Path, env: dict[str, str], limits: ResolvedLimits, root: Path
) -> ExecResult:
    with CORES.acquire(limits.cpus) as cores:
        return _run_on(command, cwd, env, limits, root, cores)


def _run_on(
    command: list[str], cwd: Path, env: dict[str, str], limits: ResolvedLimits, root: Path, cores: list[int]
) -> ExecResult:
    started = time.monotonic()
    out_path, err_path = root / "stdout", root / "stderr"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        try:
            proc = subprocess.Popen(
                command,
                cwd=cwd,
                env=env,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=lambda: _limit_resources(limits, cores),
            )
        except OSError as exc:
            return ExecResult(
                exit_code=127, stdout="", stderr=str(exc), duration_s=0.0, reason=f"cannot start: {exc}"
            )
        timed_out = False
        try:
            code: int | None = proc.wait(timeout=limits.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            code = None
        finally:
            # Kill the whole group, including anything left in the background.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    stdout, t1 = _read_capped(out_path, limits.output_bytes)
    stderr, t2 = _read_capped(err_path, limits.output_bytes)
    reason = None
    if timed_out:
        reason = f"timeout after {limits.timeout_s:g}s"
    elif code is not None and code < 0:
        reason = f"killed by signal {signal.Signals(-code).name}"
    elif code:
        reason = f"exit code {code}"
    return ExecResult(
        exit_code=code,
        stdout=stdout,
        stderr=stderr,
        duration_s=time.monotonic() - started,
        timed_out=timed_out,
        truncated=t1 or t2,
        reason=reason,
    )


def _read_capped(path: Path, cap: int) -> tuple[str, bool]:
    size = path.stat().st_size
    with open(path, "rb") as f:
        if size <= cap:
            return f.read().decode("utf-8", "replace"), False
        head = f.read(cap // 2)
        f.seek(size - cap // 2)
        tail = f.read()
    marker = f"\n[... {size - cap} bytes of output dropped ...]\n".encode()
    return (head + marker + tail).decode("utf-8", "replace"), True
