"""A pool of GPU ids handed out to jobs; GPUs reserved for a model server are never handed out."""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from metasearch.errors import InfrastructureError


def detect_gpus() -> list[str]:
    """GPU indices from ``nvidia-smi -L`` (empty without NVIDIA drivers)."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [str(i) for i, line in enumerate(out.splitlines()) if line.startswith("GPU ")]


def device_requests(gpu_ids: Sequence[str]) -> list[Any]:
    """Docker DeviceRequests for exactly these GPUs (none for an empty list)."""
    if not gpu_ids:
        return []
    from docker.types import DeviceRequest

    return [DeviceRequest(device_ids=list(gpu_ids), capabilities=[["gpu"]])]


class GPUPool:
    """``per_gpu`` jobs may share one GPU (default 1: exclusive). ``acquire`` blocks until enough are free."""

    def __init__(self, gpu_ids: Sequence[str], *, per_gpu: int = 1, reserved: Sequence[str] = ()) -> None:
        self.ids = [g for g in gpu_ids if g not in set(reserved)]
        self.per_gpu = per_gpu
        self._free = {g: per_gpu for g in self.ids}
        self._cond = threading.Condition()

    @classmethod
    def from_setting(
        cls, setting: str | Sequence[str], *, per_gpu: int = 1, reserved: Sequence[str] = ()
    ) -> GPUPool:
        if setting == "none":
            ids: list[str] = []
        elif setting == "all":
            ids = detect_gpus()
        else:
            ids = [str(g) for g in setting]
        return cls(ids, per_gpu=per_gpu, reserved=reserved)

    @property
    def size(self) -> int:
        return len(self.ids)

    @contextmanager
    def acquire(self, n: int = 1, *, timeout_s: float | None = None) -> Iterator[list[str]]:
        if n > len(self.ids):
            raise InfrastructureError(
                f"a job needs {n} GPU(s) but the sandbox pool has {len(self.ids)}", retryable=False
            )
        with self._cond:
            ok = self._cond.wait_for(
                lambda: sum(1 for v in self._free.values() if v > 0) >= n, timeout=timeout_s
            )
            if not ok:
                raise InfrastructureError(f"no {n} GPU(s) became free within {timeout_s}s")
            # Prefer the least-shared GPUs.
            taken = sorted((g for g, v in self._free.items() if v > 0), key=lambda g: -self._free[g])[:n]
            for g in taken:
                self._free[g] -= 1
        try:
            yield taken
        finally:
            with self._cond:
                for g in taken:
                    self._free[g] += 1
                self._cond.notify_all()
