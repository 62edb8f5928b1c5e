"""DockerSandbox: one locked-down container per command (docker-py).

Defaults for untrusted, self-modified code: no network, read-only root filesystem, a small ``/tmp`` tmpfs,
``cap_drop=ALL``, ``no-new-privileges``, an unprivileged user (65534), limits on CPUs, memory (no swap) and
PIDs, bounded logs. Mounts are read-only unless a mount says otherwise; a writable mount's host directory
is opened to the unprivileged user (``a+rwX``) because the container cannot run as the directory's owner.

A timeout kills and removes the container (``Container.wait(timeout=...)`` alone leaves it running).
Every container carries the labels ``metasearch.study`` and ``metasearch.job``; ``sweep(study)`` removes
whatever a crashed run left behind. Images are never pulled: a missing image is an infrastructure error
that says to run ``metasearch images build``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from metasearch.errors import InfrastructureError
from metasearch.sandboxes.gpus import GPUPool, device_requests
from metasearch.sandboxes.protocol import ExecResult, Limits, RunSpec

log = logging.getLogger(__name__)

LABEL_STUDY = "metasearch.study"
LABEL_JOB = "metasearch.job"
LABEL_OWNER = "metasearch"


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
        log_max_size: str = "20m"
        daemon_timeout_s: float = Field(60, gt=0)

    def __init__(self, config: Config | None = None, *, study: str = "", client: Any = None) -> None:
        import docker

        from metasearch.sandboxes.images import default_image_tag

        self.config = config or DockerSandbox.Config()
        self.study = study
        self.image = self.config.image or default_image_tag()
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
        started = time.monotonic()
        with self._gpus(spec) as gpus:
            container = self._create(spec, list(spec.command), gpus)
            try:
                container.start()
                timed_out, code = self._wait(container, spec.limits.timeout_s)
                container.reload()
                oom = bool(container.attrs.get("State", {}).get("OOMKilled"))
                stdout, t1 = _capped(container.logs(stdout=True, stderr=False), spec.limits.output_bytes)
                stderr, t2 = _capped(container.logs(stdout=False, stderr=True), spec.limits.output_bytes)
            except InfrastructureError:
                raise
            except Exception as exc:
                raise InfrastructureError(f"docker run failed: {exc}") from exc
            finally:
                self._remove(container)
        return ExecResult(
            exit_code=None if timed_out else code,
            stdout=stdout,
            stderr=stderr,
            duration_s=time.monotonic() - started,
            timed_out=timed_out,
            oom_killed=oom,
            truncated=t1 or t2,
            reason=_reason(timed_out, oom, code, spec.limits),
        )

    @contextlib.contextmanager
    def session(self, spec: RunSpec) -> Iterator[DockerSession]:
        with self._gpus(spec) as gpus:
            container = self._create(spec, ["sleep", "infinity"], gpus)
            try:
                container.start()
                yield DockerSession(container, spec)
            finally:
                self._remove(container)

    def sweep(self, study: str | None = None) -> int:
        """Remove every container of ``study`` (all metasearch containers if None). Returns how many."""
        label = f"{LABEL_STUDY}={study}" if study else LABEL_OWNER
        try:
            containers = self.client.containers.list(all=True, filters={"label": label})
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

    def create_kwargs(self, spec: RunSpec, command: Sequence[str], gpus: Sequence[str]) -> dict[str, Any]:
        """The container settings (exposed so tests can check them without a GPU)."""
        from docker.types import LogConfig

        limits = spec.limits
        volumes = {}
        for m in spec.mounts:
            source = Path(m.source).resolve()
            if not m.read_only:
                _open_to_sandbox_user(source)
            volumes[str(source)] = {"bind": m.target, "mode": "ro" if m.read_only else "rw"}
        uid, _, gid = self.config.user.partition(":")
        labels = {LABEL_OWNER: "1", LABEL_STUDY: self.study, **{k: str(v) for k, v in spec.labels.items()}}
        labels.setdefault(LABEL_JOB, "")
        return {
            "image": self.image,
            "command": list(command),
            "detach": True,
            "labels": labels,
            "network_mode": "none",
            "read_only": True,
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "user": self.config.user,
            "nano_cpus": int(limits.cpus * 1e9),
            "mem_limit": f"{limits.memory_mb}m",
            "memswap_limit": f"{limits.memory_mb}m",
            "pids_limit": limits.pids,
            "tmpfs": {"/tmp": f"rw,exec,size={limits.tmp_mb}m,uid={uid},gid={gid or uid}"},
            "volumes": volumes,
            "working_dir": spec.workdir,
            "environment": {"HOME": "/tmp", "TMPDIR": "/tmp", **spec.env},
            "init": True,
            "log_config": LogConfig(
                type="json-file", config={"max-size": self.config.log_max_size, "max-file": "1"}
            ),
            "device_requests": device_requests(gpus),
        }

    def _create(self, spec: RunSpec, command: Sequence[str], gpus: Sequence[str]) -> Any:
        import docker

        try:
            self.client.images.get(self.image)
        except docker.errors.ImageNotFound:
            raise InfrastructureError(
                f"sandbox image {self.image} not found; build it with `metasearch images build` (images are never pulled)",
                retryable=False,
            ) from None
        except Exception as exc:
            raise InfrastructureError(f"Docker daemon unreachable: {exc}") from exc
        try:
            return self.client.containers.create(**self.create_kwargs(spec, command, gpus))
        except Exception as exc:
            raise InfrastructureError(f"cannot create container: {exc}") from exc

    def _wait(self, container: Any, timeout_s: float) -> tuple[bool, int | None]:
        try:
            status = container.wait(timeout=timeout_s)
            return False, int(status.get("StatusCode", -1))
        except Exception:
            # The HTTP wait timed out: the container is still running. Kill it for real.
            with contextlib.suppress(Exception):
                container.kill()
            return True, None

    def _remove(self, container: Any) -> None:
        try:
            container.remove(force=True)
        except Exception as exc:  # already gone, or the daemon went away: the next sweep gets it
            if "No such container" not in str(exc) and "already in progress" not in str(exc):
                log.warning("could not remove container %s: %s", getattr(container, "short_id", "?"), exc)


class DockerSession:
    """Commands in one running container (``docker exec``), each bounded by ``timeout``."""

    def __init__(self, container: Any, spec: RunSpec) -> None:
        self.container = container
        self.spec = spec

    def exec(self, command: Sequence[str], *, timeout_s: float | None = None) -> ExecResult:
        timeout = timeout_s or self.spec.limits.timeout_s
        started = time.monotonic()
        wrapped = ["timeout", "-s", "KILL", f"{timeout:g}", *command]
        try:
            code, (out, err) = self.container.exec_run(
                wrapped,
                demux=True,
                user=self.container.attrs.get("Config", {}).get("User") or "",
                workdir=self.spec.workdir,
                environment={"HOME": "/tmp", **self.spec.env},
            )
        except Exception as exc:
            raise InfrastructureError(f"docker exec failed: {exc}") from exc
        stdout, t1 = _capped(out or b"", self.spec.limits.output_bytes)
        stderr, t2 = _capped(err or b"", self.spec.limits.output_bytes)
        timed_out = code == 137 and time.monotonic() - started >= timeout - 0.5
        return ExecResult(
            exit_code=None if timed_out else code,
            stdout=stdout,
            stderr=stderr,
            duration_s=time.monotonic() - started,
            timed_out=timed_out,
            truncated=t1 or t2,
            reason=_reason(timed_out, False, code, Limits(timeout_s=timeout)),
        )


def _reason(timed_out: bool, oom: bool, code: int | None, limits: Limits) -> str | None:
    if timed_out:
        return f"timeout after {limits.timeout_s:g}s"
    if oom:
        return f"out of memory (limit {limits.memory_mb} MB)"
    if code == 137:
        return "killed (exit code 137)"
    if code:
        return f"exit code {code}"
    return None


def _capped(data: bytes, cap: int) -> tuple[str, bool]:
    if len(data) <= cap:
        return data.decode("utf-8", "replace"), False
    dropped = len(data) - cap
    text = data[: cap // 2] + f"\n[... {dropped} bytes of output dropped ...]\n".encode() + data[-cap // 2 :]
    return text.decode("utf-8", "replace"), True


def _open_to_sandbox_user(path: Path) -> None:
    if path.is_file():
        os.chmod(path, 0o666)
        return
    for root, dirs, files in os.walk(path):
        os.chmod(root, 0o777)
        for name in files:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(root, name), 0o666)
        dirs[:] = [d for d in dirs if d != ".git"]
