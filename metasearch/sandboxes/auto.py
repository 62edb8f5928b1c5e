"""Choosing the sandbox: ``auto`` uses Docker when a daemon answers and the image exists, else local."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from metasearch.errors import InfrastructureError
from metasearch.sandboxes.local import LocalSandbox
from metasearch.sandboxes.protocol import Sandbox

if TYPE_CHECKING:
    from metasearch.config import SandboxSection

log = logging.getLogger(__name__)


def make_sandbox(section: SandboxSection, *, study: str, reserved_gpus: list[str] | None = None) -> Sandbox:
    """The sandbox the config asks for. ``docker`` fails loudly if Docker cannot work; ``auto`` falls back.

    ``reserved_gpus`` are kept out of the sandboxes' pool (a managed vLLM server runs on them)."""
    if section.name == "local":
        return LocalSandbox(study=study)
    from metasearch.sandboxes.docker import DockerSandbox

    config = DockerSandbox.Config(
        image=section.image,
        gpus=section.gpus,
        gpu_share=section.gpu_share,
        reserved_gpus=list(reserved_gpus or ()),
    )
    try:
        sandbox = DockerSandbox(config, study=study)
        from metasearch.sandboxes.images import image_exists

        if not image_exists(sandbox.image):
            raise InfrastructureError(
                f"sandbox image {sandbox.image} not found (run `metasearch images build`)", retryable=False
            )
        return sandbox
    except InfrastructureError as exc:
        if section.name == "docker":
            raise
        log.warning(
            "Docker is not usable (%s). FALLING BACK TO LOCAL PROCESSES: candidate code runs unconfined on this "
            "machine. Start a Docker daemon and run `metasearch images build` for real sandboxes.",
            exc,
        )
        return LocalSandbox(study=study)
