"""Can this machine run a config? Checks for ``metasearch run CONFIG --dry-run`` and ``metasearch doctor``.

Each check looks at one piece a run needs (the Docker engine, the sandbox image, GPUs, vLLM, an LLM
endpoint, a Ray cluster, a dataset) without starting or writing anything, and returns a ``Check``: what
was found and, when it is missing, the exact command or setting that fixes it. ``config_checks`` holds
only what the config needs; ``missing`` is empty exactly when ``metasearch run`` would start.
"""

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
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlparse

from metasearch.errors import ConfigError
from metasearch.sandboxes.gpus import detect_gpus

if TYPE_CHECKING:
    from metasearch.config import LLMSection, ResolvedConfig, SandboxSection

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


# -- the machine --------------------------------------------------------------------------------------


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
    from metasearch.sandboxes.images import default_image_tag

    tag = image or default_image_tag()
    try:
        client.images.get(tag)
    except Exception:
        return Check(
            "sandbox image", "missing", f"{tag} not found (images are never pulled)", build_command(tag)
        )
    return Check("sandbox image", "ok", tag)


def build_command(tag: str) -> str:
    """The command that makes ``tag``: ``images build`` for the default, a shipped Dockerfile by name."""
    from metasearch.sandboxes.images import REPOSITORY, default_image_tag

    if tag in (default_image_tag(), f"{REPOSITORY}:latest"):
        return "metasearch images build"
    repository = tag.rsplit(":", 1)[0]
    if repository.startswith(REPOSITORY + "-") or repository.startswith("metasearch-"):
        variant = repository.removeprefix(REPOSITORY + "-").removeprefix("metasearch-")
        dockerfile = Path("sandboxes") / f"Dockerfile.{variant}"
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


# -- a config -----------------------------------------------------------------------------------------


def config_checks(resolved: ResolvedConfig, study_dir: Path) -> list[Check]:
    """Everything ``resolved`` needs on this machine; nothing is started or written."""
    from metasearch import launch
    from metasearch.llm.service import endpoint_configured
    from metasearch.manifest import load_manifest

    cfg = resolved.config
    checks: list[Check] = []
    manifests = []
    for name in cfg.study.seeds:
        try:
            manifests.append(load_manifest(launch.resolve_seed(name)))
        except ConfigError as exc:
            checks.append(Check(f"seed {name}", "missing", str(exc), "fix study.seeds"))
    checks.extend(_suite_checks(resolved))
    try:
        resolved.plugins["proposer"].create(study_dir=study_dir, llm=cfg.llm)
    except ConfigError as exc:
        checks.append(Check("proposer", "missing", str(exc), _llm_fix()))
    for manifest in manifests:
        if manifest.resources.llm and not endpoint_configured(cfg.llm):
            why = f"seed {manifest.name!r} uses an LLM (resources.llm = true) and no endpoint is configured"
            checks.append(Check("LLM endpoint", "missing", why, _llm_fix()))
    untrusted = launch.model_code(resolved, manifests)  # also: why the study calls the LLM, or None
    checks.extend(_llm_checks(cfg.llm, needed=untrusted is not None))
    checks.extend(_sandbox_checks(cfg.sandbox, cfg.llm, untrusted))
    if cfg.executor.name == "ray":
        checks.append(ray_cluster(cfg.executor.address))
    return checks


def _suite_checks(resolved: ResolvedConfig) -> list[Check]:
    cfg = resolved.config
    try:
        suite = resolved.plugins["suite"].create()
    except ConfigError as exc:
        return [
            Check(
                f"suite {cfg.suite.name}",
                "missing",
                str(exc),
                _key_fix(str(exc), cfg.suite.name, cfg.suite.options()),
            )
        ]
    checks = []
    needs = getattr(suite, "needs", None)
    try:
        if callable(needs):
            needs()
    except ConfigError as exc:
        checks.append(
            Check(
                f"suite {cfg.suite.name}",
                "missing",
                str(exc),
                _key_fix(str(exc), cfg.suite.name, cfg.suite.options()),
            )
        )
    try:
        tasks = list(suite.tasks())
    except ConfigError as exc:
        return [
            *checks,
            Check(
                f"suite {cfg.suite.name} tasks",
                "missing",
                str(exc),
                _key_fix(str(exc), cfg.suite.name, cfg.suite.options()),
            ),
        ]
    if not tasks:
        why = f"{cfg.suite.name!r} lists no tasks for this configuration"
        return [*checks, Check(f"suite {cfg.suite.name} tasks", "missing", why, "change suite.subset")]
    if not checks:
        checks.append(Check(f"suite {cfg.suite.name}", "ok", f"{len(tasks)} tasks"))
    return checks


def _llm_checks(section: LLMSection, *, needed: bool) -> list[Check]:
    """A managed vLLM server starts with every run, so it is checked always; an endpoint only when the
    study calls it (``needed``: an LLM proposer or a seed that uses one)."""
    serve = section.serve
    if serve is not None:
        python = serve.python or sys.executable
        checks = []
        if python_has(python, "vllm"):
            checks.append(Check("vllm", "ok", f"importable by {python}"))
        else:
            fix = f"{python} -m pip install vllm"
            checks.append(
                Check("vllm", "missing", f"llm.serve needs vLLM, and {python} cannot import it", fix)
            )
        local = serve.model.startswith(("/", "./", "../", "~"))
        if local and not Path(serve.model).expanduser().exists():
            fix = f"put the weights there (e.g. `huggingface-cli download MODEL --local-dir {serve.model}`) or set llm.serve.model"
            checks.append(
                Check("model weights", "missing", f"llm.serve.model: {serve.model} does not exist", fix)
            )
        checks.append(gpu_check(len(set(serve.gpus)), f"llm.serve.gpus {serve.gpus}", "GPUs (model server)"))
        return checks
    base = section.base_url or os.environ.get("OPENAI_BASE_URL")
    return [endpoint(base, section.api_key_env)] if base and needed else []


def _sandbox_checks(section: SandboxSection, llm: LLMSection, untrusted: str | None) -> list[Check]:
    if section.name == "local":
        return [
            Check("sandbox", "warn", "sandbox.name: local runs candidate code unconfined on this machine")
        ]
    engine, client = docker_engine()
    image = sandbox_image(client, section.image) if client is not None else None
    if section.name == "auto" and not untrusted and (client is None or image is None or image.state != "ok"):
        # auto falls back to local processes for trusted code: the run starts, with a loud warning
        why = engine.detail if client is None else (image.detail if image else "")
        fix = engine.fix if client is None else (image.fix if image else None)
        return [Check("sandbox", "warn", f"no usable Docker ({why}): falls back to local processes", fix)]
    checks = [engine] + ([image] if image else [])
    if section.name == "auto" and untrusted and any(c.state == "missing" for c in checks):
        checks.append(Check("sandbox", "missing", f"sandbox.name: auto needs Docker: the {untrusted}"))
    if section.gpus != "none":
        reserved = set(llm.serve.gpus) if llm.serve is not None else set()
        if section.gpus == "all":
            checks.append(
                gpu_check(
                    len(reserved) + 1, "sandbox.gpus: all (beside the model server's)", "GPUs (sandboxes)"
                )
            )
        else:
            checks.append(
                gpu_check(
                    len(set(section.gpus) | reserved), f"sandbox.gpus {section.gpus}", "GPUs (sandboxes)"
                )
            )
        checks.append(gpu_runtime(client))
    return checks


def _llm_fix() -> str:
    return "set llm.base_url (or export OPENAI_BASE_URL=http://HOST:PORT/v1), or llm.serve for a managed vLLM"


DATASET_FIXES = {
    ("polyglot", "suite.path"): "git clone https://github.com/Aider-AI/polyglot-benchmark {path}",
    ("kernelbench", "suite.path"): "git clone https://github.com/ScalingIntelligence/KernelBench {path}",
    ("swebench", "suite.instances"): (
        'python -c "from datasets import load_dataset; '
        "load_dataset('princeton-nlp/SWE-bench_Verified', split='test').to_json('{path}')\""
    ),
}


def _key_fix(message: str, suite: str, options: dict[str, Any]) -> str:
    """The fix for a suite's ConfigError, whose message starts with the key it names."""
    key = message.split(":", 1)[0] if ":" in message else "suite"
    if "pip install" in message:
        return message[message.index("pip install") :].split(")")[0]
    if "CUDA" in message:
        return (
            "run where torch sees a CUDA GPU (a CUDA build of torch: README, Running on GPUs), "
            f"or -o {key}=cpu"
        )
    path = options.get(key.removeprefix("suite."))
    if (suite, key) in DATASET_FIXES and path and "does not exist" in message:
        return DATASET_FIXES[suite, key].format(path=path) + f" (or set {key})"
    return f"edit {key} in the config (or -o {key}=VALUE)"


def _host_port(address: str, default: int) -> tuple[str, int]:
    parsed = urlparse(address if "://" in address else f"tcp://{address}")
    return parsed.hostname or "127.0.0.1", parsed.port or default


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def _source_root() -> Path:
    import metasearch

    return Path(metasearch.__file__).resolve().parents[1]


def render(checks: Sequence[Check], out: Any, title: str) -> None:
    """The checks as a table on ``out`` (a rich Console), then each missing piece with its fix on lines of
    their own (never wrapped, so a fix can be copied as printed)."""
    from rich.table import Table

    marks = {"ok": "[green]ok[/]", "warn": "[yellow]warn[/]", "missing": "[bold red]MISSING[/]"}
    table = Table(title=title)
    for column in ("check", "state", "found"):
        table.add_column(column)
    for c in checks:
        table.add_row(c.name, marks[c.state], c.detail)
    out.print(table)
    for c in checks:
        if c.state != "ok" and c.fix:
            word = "missing" if c.state == "missing" else "warning"
            out.print(f"{word}: {c.name}: {c.detail}", markup=False, highlight=False, soft_wrap=True)
            out.print(f"  fix: {c.fix}", markup=False, highlight=False, soft_wrap=True)


def dry_run(resolved: ResolvedConfig, study_dir: Path, out: Any) -> int:
    """``metasearch run CONFIG --dry-run``: the plan, the checks, and the exit status (0: ``run`` would
    start; 1: something is missing, each named with its fix)."""
    from metasearch.progress import print_plan

    print_plan(resolved, study_dir, out)
    checks = config_checks(resolved, study_dir)
    render(checks, out, "readiness on this machine")
    gaps = missing(checks)
    if gaps:
        out.print(
            f"not ready: {len(gaps)} missing ({', '.join(c.name for c in gaps)}); `run` would not start"
        )
        return 1
    out.print("ready: `metasearch run` would start")
    return 0
