"""Choosing the sandbox: ``auto`` uses Docker when a daemon answers and the image exists.

Without Docker, ``auto`` falls back to local processes only for trusted code (the knobs proposer tuning a
seed you wrote). When model-written code will run (``untrusted`` says why), it fails closed: a ConfigError
at study start, unless the user chose ``sandbox.name: local`` explicitly.
"""

from __future__ import annotations

import logging

from metasearch.errors import ConfigError, InfrastructureError
from metasearch.sandboxes.config import SandboxSection
from metasearch.sandboxes.docker import DockerSandbox
from metasearch.sandboxes.images import build_hint, image_exists
from metasearch.sandboxes.local import LocalSandbox
from metasearch.sandboxes.protocol import Sandbox

log = logging.getLogger(__name__)


def make_sandbox(
    section: SandboxSection,
    *,
    study: str,
    study_id: str | None = None,
    reserved_gpus: list[str] | None = None,
    untrusted: str | None = None,
) -> Sandbox:
    """The sandbox the config asks for, holding the configured limits. ``docker`` fails loudly if Docker
    cannot work; ``auto`` falls back to local processes unless ``untrusted`` (why model-written code will
    run) is given. ``study_id`` labels the containers (see DockerSandbox.sweep); ``reserved_gpus`` are kept
    out of the sandboxes' pool (a managed vLLM server runs on them)."""
    limits = section.limits()
    if section.name == "local":
        return LocalSandbox(study=study, limits=limits)

    config = DockerSandbox.Config(
        image=section.image,
        gpus=section.gpus,
        gpu_share=section.gpu_share,
        pin_cores=section.pin_cores,
        reserved_gpus=list(reserved_gpus or ()),
    )
    try:
        sandbox = DockerSandbox(config, study=study, study_id=study_id, limits=limits)

        if not image_exists(sandbox.image):
            raise InfrastructureError(
                f"sandbox image {sandbox.image} not found (build it with {build_hint(sandbox.image)})",
                retryable=False,
            )
        return sandbox
    except InfrastructureError as exc:
        if section.name == "docker":
            raise
        if untrusted:
            raise ConfigError(
                f"sandbox.name: 'auto' found no usable Docker, and the {untrusted}: such code never runs "
                "unconfined by default. Start a Docker daemon and run `metasearch images build`, or set "
                f"sandbox.name: local to run it as plain processes on this machine anyway. (Docker: {exc})"
            ) from exc
        log.warning(
            "Docker is not usable (%s). FALLING BACK TO LOCAL PROCESSES: candidate code runs unconfined on this "
            "machine. Start a Docker daemon and run `metasearch images build` for real sandboxes.",
            exc,
        )
        return LocalSandbox(study=study, limits=limits)
