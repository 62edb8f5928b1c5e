"""The ``sandbox`` section of a study's config: which sandbox, its image, and every run's limits."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from metasearch.sandboxes.protocol import ResolvedLimits


class SandboxSection(BaseModel):
    model_config = ConfigDict(extra="forbid")
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
