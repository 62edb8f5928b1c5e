"""DockerSandbox: one locked-down container per command (docker-py).

Defaults for untrusted, self-modified code: no network, read-only root filesystem, ``cap_drop=ALL``,
``no-new-privileges``, an unprivileged user (65534), limits on CPUs, memory (no swap), PIDs and time, and
bounded output. Read-only mounts are bind mounts. A writable mount is never a host directory: it is an
in-memory filesystem of ``disk_mb`` inside the container (as ``/tmp`` is one of ``tmp_mb``); the host
directory's files are copied in before the command and, after it, what the command left is copied back
through ``transfer.unpack`` (links that leave the mount, ``.git``, special files and bytes beyond the bound
refused). So nothing a candidate writes reaches the host disk unbounded, and the host never chmods, copies
or follows anything inside a candidate's reach. A full disk area is the violation ``"disk limit ..."``.

The command runs as an exec beside a holder process (see container.py), so the container and its files
outlive it; the container does not outlive this process: its holder exits when this process's attach
connection closes (``attach_lifeline``), and the engine then removes it (``auto_remove``), so a run killed
with SIGKILL leaves no container running. A timeout ends the command's processes and reports ``timed_out``; an engine fault is an
``InfrastructureError``; the two are never mixed. Every container carries the labels ``metasearch.study``,
``metasearch.study_id`` (unique per study, written when it is created) and ``metasearch.job``; ``sweep``
removes this study's leftovers by its id, never by a name another study could share. Images are never
pulled: a missing image is an infrastructure error that says to run ``metasearch images build``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from metasearch.errors import InfrastructureError, SandboxViolation
from metasearch.sandboxes.container import (
    HOLDER,
    HOLDER_USER,
    Finished,
    attach_lifeline,
    collect,
    end_all,
    fill,
    run_exec,
)
from metasearch.sandboxes.cores import CORES
from metasearch.sandboxes.gpus import GPUPool, device_requests
from metasearch.sandboxes.images import build_hint, resolve
from metasearch.sandboxes.protocol import DEFAULT_LIMITS, ExecResult, ResolvedLimits, RunSpec

log = logging.getLogger(__name__)

LABEL_STUDY = "metasearch.study"
LABEL_STUDY_ID = "metasearch.study_id"
LABEL_JOB = "metasearch.job"
LABEL_OWNER = "metasearch"
REMOVE_WAIT_S = 60.0  # for a removal the engine already began (auto_remove) to finish
FULL_BYTES = 1 << 20  # less free space than this in a disk area after a run: the candidate filled it


class DockerSandbox:
    name = "docker"

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid")
        image: str | None = None
        user: str = "65534:65534"
        gpus: Literal["none", "all"] | list[str] = "none"
        gpu_share: int = Field(1, ge=1)
        reserved_gpus: list[str] = Field(default_factory=list)
        gpus_per_job: int = Field(1, ge=0)
        daemon_timeout_s: float = Field(60, gt=0)
        pin_cores: bool = True  # see SandboxSection.pin_cores

    def __init__(
        self,
        config: Config | None = None,
        *,
        study: str = "",
        study_id: str | None = None,
        limits: ResolvedLimits = DEFAULT_LIMITS,
        client: Any = None,
    ) -> None:
        import docker

        self.config = config or DockerSandbox.Config()
        if self.config.user.split(":")[0] == HOLDER_USER.split(":")[0]:
            raise ValueError(f"sandbox user {self.config.user} is the holder's ({HOLDER_USER})")
        self.study = study
        self.study_id = study_id or uuid.uuid4().hex
        self.limits = limits
        self.image = resolve(self.config.image)
        try:
            self.client = client or docker.from_env(timeout=int(self.config.daemon_timeout_s))
            self.client.ping()
        except Exception as exc:
            raise InfrastructureError(f"Docker daemon unreachable: {exc}") from exc
        self.gpu_pool = GPUPool.from_setting(
            self.config.gpus, per_gpu=self.config.gpu_share, reserved=self.config.reserved_gpus
        )

    # -- the interface ----------------------------------------------------------------------------

    def run(self, spec: RunSpec) -> ExecResult:
        limits = spec.limits.resolve(self.limits)
        linked = _linked_source(spec)
        if linked:
            return ExecResult(None, "", "", 0.0, reason=linked, violation=linked)
        with self._gpus(spec) as gpus, self._container(spec, limits, gpus) as container:
            ran = run_exec(
                container,
                spec.command,
                user=self.config.user,
                workdir=spec.workdir,
                env=_env(spec),
                timeout_s=limits.timeout_s,
                output_bytes=limits.output_bytes,
            )
            oom, violation = self._finish(container, spec, limits, ran.exit_code)
        return _result(ran, oom, violation, limits)

    @contextlib.contextmanager
    def session(self, spec: RunSpec) -> Iterator[DockerSession]:
        limits = spec.limits.resolve(self.limits)
        linked = _linked_source(spec)
        if linked:
            raise SandboxViolation(linked)
        with self._gpus(spec) as gpus, self._container(spec, limits, gpus) as container:
            yield DockerSession(container, spec, limits, self.config.user)
            _oom, violation = self._finish(container, spec, limits, None)
        if violation:
            raise SandboxViolation(violation)

    def sweep(self) -> int:
        """Remove every container of this sandbox's study (by its unique id). Returns how many."""
        try:
            containers = self.client.containers.list(
                all=True, filters={"label": f"{LABEL_STUDY_ID}={self.study_id}"}
            )
        except Exception as exc:
            raise InfrastructureError(f"Docker daemon unreachable while sweeping: {exc}") from exc
        for c in containers:
            self._remove(c)
        return len(containers)

    # -- mechanics --------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _gpus(self, spec: RunSpec) -> Iterator[list[str]]:
        if spec.gpus:
            yield list(spec.gpus)
        elif self.gpu_pool.size and self.config.gpus_per_job:
            with self.gpu_pool.acquire(self.config.gpus_per_job) as ids:
                yield ids
        else:
            yield []

    def create_kwargs(
        self,
        spec: RunSpec,
        command: Sequence[str],
        gpus: Sequence[str],
        limits: ResolvedLimits | None = None,
        cores: Sequence[int] = (),
    ) -> dict[str, Any]:
        """The container settings (exposed so tests can check them without a GPU). ``command`` is what
        the holder runs; the spec's command runs beside it (see container.py)."""
        from docker.types import LogConfig

        limits = limits or spec.limits.resolve(self.limits)
        uid, _, gid = self.config.user.partition(":")
        owner = f"uid={uid},gid={gid or uid}"
        volumes = {}
        tmpfs = {"/tmp": f"rw,exec,nosuid,nodev,size={limits.tmp_mb}m,{owner},mode=1777"}
        for m in spec.mounts:
            if m.read_only:
                volumes[str(Path(m.source).resolve())] = {"bind": m.target, "mode": "ro"}
            else:
                tmpfs[m.target] = f"rw,exec,nosuid,nodev,size={limits.disk_mb}m,{owner},mode=0755"
        labels = {
            LABEL_OWNER: "1",
            LABEL_STUDY: self.study,
            **{k: str(v) for k, v in spec.labels.items()},
            LABEL_STUDY_ID: self.study_id,
        }
        labels.setdefault(LABEL_JOB, "")
        return {
            "image": self.image,
            "command": list(command),
            # The holder reads its stdin, which this process holds open (attach_lifeline); StdinOnce closes it
            # when this process goes, however it goes (kill -9 included): the holder exits, the container
            # stops and the engine removes it. (docker-py sets StdinOnce only for detach=False.)
            "detach": False,
            "stdin_open": True,
            "auto_remove": True,
            "labels": labels,
            "network_mode": "none",
            "read_only": True,
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "user": HOLDER_USER,
            "nano_cpus": int(limits.cpus * 1e9),
            "mem_limit": f"{limits.memory_mb}m",
            "memswap_limit": f"{limits.memory_mb}m",
            "pids_limit": limits.pids,
            "tmpfs": tmpfs,
            "volumes": volumes,
            "working_dir": spec.workdir,
            "environment": _env(spec),
            "init": True,
            "log_config": LogConfig(type="none", config={}),
            "device_requests": device_requests(gpus),
            **({"cpuset_cpus": ",".join(map(str, cores))} if cores else {}),
        }

    @contextlib.contextmanager
    def _container(self, spec: RunSpec, limits: ResolvedLimits, gpus: Sequence[str]) -> Iterator[Any]:
        """A started container with the writable mounts' inputs in place; removed on exit."""
        pinned: contextlib.AbstractContextManager[list[int]] = (
            CORES.acquire(limits.cpus) if self.config.pin_cores else contextlib.nullcontext([])
        )
        with pinned as cores, self._started(spec, limits, gpus, cores) as container:
            yield container

    @contextlib.contextmanager
    def _started(
        self, spec: RunSpec, limits: ResolvedLimits, gpus: Sequence[str], cores: Sequence[int]
    ) -> Iterator[Any]:
        import docker

        try:
            self.client.images.get(self.image)
        except docker.errors.ImageNotFound:
            raise InfrastructureError(
                f"sandbox image {self.image} not found; build it with {build_hint(self.image)} "
                "(images are never pulled)",
                retryable=False,
            ) from None
        except Exception as exc:
            raise InfrastructureError(f"Docker daemon unreachable: {exc}") from exc
        try:
            container = self.client.containers.create(**self.create_kwargs(spec, HOLDER, gpus, limits, cores))
        except Exception as exc:
            raise InfrastructureError(f"cannot create container: {exc}") from exc
        lifeline = None
        try:
            try:
                lifeline = attach_lifeline(container)
                container.start()
            except Exception as exc:
                raise InfrastructureError(f"cannot start container: {exc}") from exc
            for m in spec.mounts:
                if not m.read_only:
                    fill(container, m, self.config.user, limits.disk_mb)
            yield container
        finally:
            self._remove(container)
            if lifeline is not None:
                with contextlib.suppress(Exception):
                    lifeline.close()

    def _finish(
        self, container: Any, spec: RunSpec, limits: ResolvedLimits, code: int | None
    ) -> tuple[bool, str | None]:
        """End the command's processes, then read the OOM count, the disk areas, and the outputs back.

        A run without writable mounts that exited by itself, and not by SIGKILL, has nothing to read back
        and cannot have been OOM-killed itself: removing the container ends what it left (saves an exec)."""
        writable = [m for m in spec.mounts if not m.read_only]
        if not writable and code is not None and code != 137:
            return False, None
        probe = end_all(container, self.config.user, [*(m.target for m in writable), "/tmp"])
        if probe is None:
            with contextlib.suppress(Exception):
                container.kill()
            lost = "outputs lost: the sandbox's processes could not be stopped (process limit)"
            return False, lost if writable else None
        oom, space = probe.oom_kills, probe.free
        violation = None
        for m in writable:
            free, _size = space.get(m.target, (FULL_BYTES, 0))
            if free < FULL_BYTES:
                violation = violation or f"disk limit ({limits.disk_mb} MB) reached in {m.target}"
        if space.get("/tmp", (FULL_BYTES, 0))[0] < FULL_BYTES:
            violation = violation or f"disk limit ({limits.tmp_mb} MB) reached in /tmp"
        for m in writable:
            refused = collect(container, m, self.config.user, (limits.disk_mb << 20) + FULL_BYTES)
            violation = violation or refused
        return oom > 0, violation

    def _remove(self, container: Any) -> None:
        try:
            container.remove(force=True)
        except Exception as exc:  # already gone, or the daemon went away: the next sweep gets it
            if "already in progress" in str(exc):  # the engine's auto_remove: wait for it, as remove does
                self._wait_removed(container, REMOVE_WAIT_S)
            elif "No such container" not in str(exc):
                log.warning("could not remove container %s: %s", getattr(container, "short_id", "?"), exc)

    def _wait_removed(self, container: Any, timeout_s: float) -> None:
        """Until the engine no longer lists the container (its ``wait`` for "removed" can return while the
        removal is still in progress), or ``timeout_s``; the next sweep gets what outlives it."""
        deadline = time.monotonic() + timeout_s
        with contextlib.suppress(Exception):
            container.wait(condition="removed", timeout=timeout_s)
        while time.monotonic() < deadline:
            try:
                self.client.containers.get(container.id)
            except Exception:  # gone (NotFound), or the daemon went away: nothing more to wait for
                return
            time.sleep(0.1)
        log.warning("container %s still listed %g s after its removal began", container.short_id, timeout_s)


class DockerSession:
    """Commands in one running container (``docker exec``), each bounded by ``timeout``."""

    def __init__(self, container: Any, spec: RunSpec, limits: ResolvedLimits, user: str) -> None:
        self.container = container
        self.spec = spec
        self.limits = limits
        self.user = user

    def exec(self, command: Sequence[str], *, timeout_s: float | None = None) -> ExecResult:
        timeout = timeout_s or self.limits.timeout_s
        ran = run_exec(
            self.container,
            command,
            user=self.user,
            workdir=self.spec.workdir,
            env=_env(self.spec),
            timeout_s=timeout,
            output_bytes=self.limits.output_bytes,
        )
        return _result(ran, False, None, replace(self.limits, timeout_s=timeout))


def _env(spec: RunSpec) -> dict[str, str]:
    return {"HOME": "/tmp", "TMPDIR": "/tmp", **spec.env}


def _linked_source(spec: RunSpec) -> str | None:
    """A mount whose source is itself a link is refused: the host would mount what the link names."""
    for m in spec.mounts:
        if os.path.islink(m.source):
            return f"refused mount {m.target}: its source {m.source} is a link"
    return None


def _result(ran: Finished, oom: bool, violation: str | None, limits: ResolvedLimits) -> ExecResult:
    reason = _reason(ran.timed_out, oom, ran.exit_code, limits)
    return ExecResult(
        exit_code=ran.exit_code,
        stdout=ran.stdout,
        stderr=ran.stderr,
        duration_s=ran.duration_s,
        timed_out=ran.timed_out,
        oom_killed=oom,
        truncated=ran.truncated,
        reason=reason if ran.timed_out or not violation else violation,
        violation=violation,
    )


def _reason(timed_out: bool, oom: bool, code: int | None, limits: ResolvedLimits) -> str | None:
    if timed_out:
        return f"timeout after {limits.timeout_s:g}s"
    if oom:
        return f"out of memory (limit {limits.memory_mb} MB)"
    if code == 137:
        return "killed (exit code 137)"
    if code:
        return f"exit code {code}"
    return None
