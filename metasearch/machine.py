"""Probes of this machine for ``metasearch doctor`` and the readiness checks (see readiness.py): the Docker
engine, a sandbox image, GPUs and the NVIDIA Container Toolkit, a Python that imports vLLM, an
OpenAI-compatible endpoint, a Ray cluster. Each returns a ``Check``; none starts or writes anything."""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

import metasearch
from metasearch.llm import local_models
from metasearch.sandboxes import recipes
from metasearch.sandboxes.gpus import detect_gpus
from metasearch.sandboxes.images import resolve

State = Literal["ok", "warn", "missing"]
PROBE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Check:
    """One piece a run needs: ``state`` "missing" blocks the run, "warn" does not."""

    name: str
    state: State
    detail: str
    fix: str | None = None


def missing(checks: Sequence[Check]) -> list[Check]:
    return [c for c in checks if c.state == "missing"]


def docker_engine() -> tuple[Check, Any]:
    """The engine and a client to it (None when it does not answer)."""
    try:
        import docker

        client = docker.from_env(timeout=int(PROBE_TIMEOUT_S * 2))
        version = client.version().get("Version", "?")
    except Exception as exc:
        first = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        fix = "start one: `bash .ci/setup` (as root it starts dockerd) or `sudo systemctl start docker`"
        return Check("docker engine", "missing", f"does not answer ({first})", fix), None
    return Check("docker engine", "ok", f"Docker {version} answers"), client


def sandbox_image(client: Any, image: str | None) -> Check:
    tag = resolve(image)  # unset: the default image; a recipe name (``polyglot``): the tag it builds
    try:
        client.images.get(tag)
    except Exception:
        return Check(
            "sandbox image", "missing", f"{tag} not found (images are never pulled)", build_command(tag)
        )
    return Check("sandbox image", "ok", tag)


def build_command(tag: str) -> str:
    """The command that makes ``tag``: ``metasearch images build [NAME]`` for an image of ours built offline,
    ``docker build`` for a shipped Dockerfile, else what to do."""
    repository = tag.rsplit(":", 1)[0]
    for spec in recipes.RECIPES.values():
        if tag in (spec.name, spec.tag()) or repository == spec.repository:
            return "metasearch images build" + ("" if spec.name == "default" else f" {spec.name}")
    if repository.startswith("metasearch-"):
        dockerfile = (
            Path("sandboxes")
            / f"Dockerfile.{repository.removeprefix('metasearch-sandbox-').removeprefix('metasearch-')}"
        )
        if (_source_root() / dockerfile).is_file():
            return f"docker build -t {tag} -f {dockerfile} sandboxes/"
    return f"build or load the image {tag} into this engine, or set sandbox.image"


def gpu_check(needed: int, why: str, name: str = "GPUs") -> Check:
    found = detect_gpus()
    detail = f"{len(found)} GPU(s) found by nvidia-smi; {why} needs {needed}"
    if len(found) >= needed:
        return Check(name, "ok", detail)
    fix = "run on a machine with NVIDIA GPUs and drivers (`nvidia-smi -L` lists them), or lower the GPU settings"
    return Check(name, "missing", detail, fix)


def gpu_runtime(client: Any) -> Check:
    """Docker hands GPUs to containers through the NVIDIA Container Toolkit."""
    runtimes = set((client.info().get("Runtimes") or {}).keys()) if client is not None else set()
    tool = next((t for t in ("nvidia-ctk", "nvidia-container-runtime-hook") if shutil.which(t)), None)
    if "nvidia" in runtimes or tool:
        return Check("docker GPU runtime", "ok", f"NVIDIA Container Toolkit ({tool or 'runtime nvidia'})")
    fix = (
        "`apt-get install -y nvidia-container-toolkit && nvidia-ctk runtime configure --runtime=docker`, "
        "then restart dockerd"
    )
    return Check("docker GPU runtime", "missing", "no NVIDIA Container Toolkit for Docker", fix)


def python_has(python: str, module: str) -> bool:
    if python == sys.executable:
        return importlib.util.find_spec(module) is not None
    probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    try:
        return subprocess.run([python, "-c", probe], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def endpoint(base_url: str, api_key_env: str | None, name: str = "LLM endpoint") -> Check:
    """``GET {base_url}/models`` answers 200 (with the key the gateway would send)."""
    import httpx

    key = os.environ.get(api_key_env) if api_key_env else None
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    url = base_url.rstrip("/") + "/models"
    try:
        reply = httpx.get(url, headers=headers, timeout=PROBE_TIMEOUT_S)
    except httpx.HTTPError as exc:
        fix = "start the server (e.g. `vllm serve MODEL --port 8000`) or point llm.base_url at a running one"
        return Check(name, "missing", f"{url} unreachable ({type(exc).__name__})", fix)
    if reply.status_code in (401, 403):
        fix = f"export {api_key_env}=<key> (llm.api_key_env names the variable)"
        return Check(name, "missing", f"{url} refused the key ({reply.status_code})", fix)
    if reply.status_code != 200:
        return Check(name, "missing", f"{url} answered {reply.status_code}", "check llm.base_url (…/v1)")
    return Check(name, "ok", f"{url} answers")


def ray_cluster(address: str | None) -> Check:
    if importlib.util.find_spec("ray") is None:
        return Check(
            "ray", "missing", "Ray is not installed", f"{sys.executable} -m pip install 'ray[default]>=2.9'"
        )
    if address is None:
        return Check("ray cluster", "ok", "executor.address: null starts a local Ray instance")
    target = address
    if address == "auto":
        target = os.environ.get("RAY_ADDRESS") or _read(Path("/tmp/ray/ray_current_cluster")) or ""
        if not target:
            fix = "`ray start --head` on this machine (workers: `ray start --address=HEAD:6379`), or set executor.address"
            return Check(
                "ray cluster", "missing", "executor.address: auto, but no Ray cluster runs here", fix
            )
    host, port = _host_port(target, 6379)
    try:
        socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S).close()
    except OSError as exc:
        fix = f"start the cluster (`ray start --head` on {host}) or fix executor.address"
        return Check("ray cluster", "missing", f"{host}:{port} unreachable ({exc.strerror or exc})", fix)
    return Check("ray cluster", "ok", f"{host}:{port} answers")


def machine_checks() -> list[Check]:
    """What ``metasearch doctor`` reports: the machine, without a config."""
    checks = [Check("python", "ok", f"{sys.version.split()[0]} at {sys.executable}")]
    engine, client = docker_engine()
    checks.append(engine)
    if client is not None:
        checks.append(sandbox_image(client, None))
    else:
        checks.append(Check("sandbox image", "warn", "not checked (no engine)", "metasearch images build"))
    gpus = detect_gpus()
    checks.append(Check("GPUs", "ok" if gpus else "warn", f"{len(gpus)} found by nvidia-smi"))
    if gpus:
        checks.append(gpu_runtime(client))
    vllm = python_has(sys.executable, "vllm")
    checks.append(
        Check(
            "vllm",
            "ok" if vllm else "warn",
            "importable" if vllm else "not installed (only llm.serve needs it)",
            None if vllm else f"{sys.executable} -m pip install -e '.[gpu]'",
        )
    )
    checks.extend(local_model_checks())
    has_ray = importlib.util.find_spec("ray") is not None
    checks.append(
        Check(
            "ray",
            "ok" if has_ray else "warn",
            "importable" if has_ray else "not installed (executor: ray needs it)",
            None if has_ray else f"{sys.executable} -m pip install -e '.[ray]'",
        )
    )
    base = os.environ.get("OPENAI_BASE_URL")
    if base:
        checks.append(endpoint(base, "OPENAI_API_KEY", "OPENAI_BASE_URL"))
    else:
        checks.append(
            Check("LLM endpoint", "warn", "OPENAI_BASE_URL unset (only LLM proposers and agents need one)")
        )
    return checks


def local_model_checks() -> list[Check]:
    """Each model ``metasearch models prepare`` knows: prepared here or not (a warning: only configs that
    serve it need it)."""
    checks = []
    for name in sorted(local_models.LOCAL_MODELS):
        found = local_models.record(name)
        if found is None:
            checks.append(Check(f"model {name}", "warn", "not prepared", f"metasearch models prepare {name}"))
        else:
            checks.append(Check(f"model {name}", "ok", f"prepared at {found['hf_dir']}"))
    return checks


def _host_port(address: str, default: int) -> tuple[str, int]:
    parsed = urlparse(address if "://" in address else f"tcp://{address}")
    return parsed.hostname or "127.0.0.1", parsed.port or default


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def _source_root() -> Path:
    return Path(metasearch.__file__).resolve().parents[1]
