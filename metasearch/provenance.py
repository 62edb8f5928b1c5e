"""The provenance record: the conditions a study's scores were produced under.

``collect`` gathers, once, what decides or describes a study's results: the metasearch version and source
revision (with a dirty flag and a digest of the uncommitted change), Python and the versions of the packages
that matter, the sandbox kind, image id and recipe hash, GPU models and driver, the suite with a content
hash per task, the LLM endpoint's model id as the server reports it and every sampling parameter the host
sends, the scheduler and proposer with their resolved options, and every random seed.

``launch.create`` writes it as ``provenance.json`` in the study directory and in the archive's first commit
(branch ``main``); the MLflow mirror puts it on the study run. ``conditions_hash`` is a short digest of the
*score-deciding* part (``SCORE_DECIDING``): the journal carries it on every evaluation, and ``resume``
compares today's record with the study's (see ``drift.py``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import shutil
import subprocess
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import metasearch
from metasearch.errors import ArchiveError, MetasearchError
from metasearch.llm.config import endpoint_configured
from metasearch.sandboxes.images import default_image_tag, recipe

if TYPE_CHECKING:
    from metasearch.config import ResolvedConfig
    from metasearch.llm.config import LLMSection
    from metasearch.sandboxes.protocol import Sandbox
    from metasearch.suites.protocol import Suite

log = logging.getLogger(__name__)

RECORD_NAME = "provenance.json"
SCHEMA = 1
PACKAGES = ("torch", "numpy", "mlflow", "optuna", "ray", "docker", "openai")
SAMPLING_KEYS = frozenset(
    {
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "max_tokens",
        "reply_tokens",
        "seed",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "repetition_penalty",
        "n",
    }
)
# Flattened record keys (dotted) whose change makes scores incomparable; a key matches a prefix ending in
# "." or is equal to an entry. Everything else is descriptive: a change there is a warning, never a refusal.
SCORE_DECIDING = (
    "metasearch.version",
    "metasearch.tree",  # the package's own files: a commit that changes only docs or tests is no drift
    "metasearch.changes",
    "sandbox.kind",
    "sandbox.image_id",
    "sandbox.recipe_hash",
    "sandbox.limits.",
    "gpu.models",
    "suite.",
    "llm.model",
    "llm.root",
    "llm.digest",
    "llm.models.",
    "llm.sampling.",
)
# With local sandboxes the host's interpreter runs agents and graders, so its numerics decide scores too.
LOCAL_SCORE_DECIDING = ("python.version", "packages.numpy", "packages.torch")
NOT_COMPARED = frozenset({"schema", "created_at", "collect_s"})


def collect(resolved: ResolvedConfig, suite: Suite, sandbox: Sandbox) -> dict[str, Any]:
    """Today's conditions for a study of ``resolved`` on ``suite`` in ``sandbox`` (no side effects; one
    ``git``, ``docker image inspect``, ``nvidia-smi`` and ``GET /v1/models`` each, where they apply)."""
    started = time.perf_counter()
    cfg = resolved.config
    record: dict[str, Any] = {
        "schema": SCHEMA,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "metasearch": source_revision(),
        "python": {"version": platform.python_version(), "implementation": platform.python_implementation()},
        "packages": package_versions(vllm=any(arm.serve is not None for _, arm in cfg.llm.arms())),
        "sandbox": sandbox_record(sandbox),
        "gpu": gpu_record(),
        "suite": suite_record(resolved, suite),
        "llm": llm_record(resolved),
        "scheduler": {"name": cfg.scheduler.name, "options": _dump(resolved.plugins["scheduler"].config)},
        "proposer": {"name": cfg.proposer.name, "options": _dump(resolved.plugins["proposer"].config)},
        "seeds": random_seeds(resolved),
    }
    record["collect_s"] = round(time.perf_counter() - started, 4)
    return record


def source_revision() -> dict[str, Any]:
    """metasearch's version; with a git checkout its commit, the git tree of the package (what decides
    scores: a commit touching only docs or tests leaves it), whether it is dirty, and a digest of the change."""
    root = Path(metasearch.__file__).resolve().parents[1]
    out: dict[str, Any] = {
        "version": metasearch.__version__,
        "revision": None,
        "tree": None,
        "dirty": None,
        "changes": None,
    }
    if not (root / ".git").exists() or shutil.which("git") is None:
        return out
    head = _run(["git", "-C", str(root), "rev-parse", "HEAD"])
    if head is None:
        return out
    status = _run(
        ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--", "metasearch"]
    )
    out["revision"] = head.strip()
    tree = _run(["git", "-C", str(root), "rev-parse", "HEAD:metasearch"])
    out["tree"] = tree.strip() if tree else None
    out["dirty"] = bool(status and status.strip())
    if out["dirty"]:
        diff = _run(["git", "-C", str(root), "diff", "HEAD", "--", "metasearch"]) or ""
        out["changes"] = hashlib.sha256(diff.encode()).hexdigest()[:12]
    return out


def package_versions(*, vllm: bool) -> dict[str, str | None]:
    names = (*PACKAGES, "vllm") if vllm else PACKAGES
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def sandbox_record(sandbox: Sandbox) -> dict[str, Any]:
    image = getattr(sandbox, "image", None)
    limits = getattr(sandbox, "limits", None)
    record: dict[str, Any] = {
        "kind": sandbox.name,
        "image": image,
        "image_id": None,
        "recipe_hash": None,
        "limits": _dump(limits) if limits is not None else None,
    }
    if image:
        record["image_id"] = (
            _run(["docker", "image", "inspect", "--format", "{{.Id}}", image]) or ""
        ).strip()
        if image == default_image_tag():
            record["recipe_hash"] = hashlib.sha256(recipe().encode()).hexdigest()[:12]
    return record


def gpu_record() -> dict[str, Any] | None:
    if shutil.which("nvidia-smi") is None:
        return None
    out = _run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    rows = [[c.strip() for c in line.split(",")] for line in (out or "").splitlines() if line.strip()]
    if not rows:
        return None
    return {"models": sorted(r[0] for r in rows), "driver": rows[0][-1] if len(rows[0]) > 1 else None}


def suite_record(resolved: ResolvedConfig, suite: Suite) -> dict[str, Any]:
    """The suite, its options (a secret one, such as the training suite's ``data_key``, as a digest: the
    record travels to MLflow and to promoted models) and a hash per task (which the key decides too)."""
    plugin = resolved.plugins["suite"]
    options = _dump(plugin.config)
    for name in plugin.secret_options:
        if options.get(name):
            options[name] = "sha256:" + hashlib.sha256(str(options[name]).encode()).hexdigest()[:12]
    return {
        "name": resolved.config.suite.name,
        "options": options,
        "content_hash": suite.content_hash,
        "tasks": {task.id: task_hash(suite, task) for task in suite.tasks()},
    }


def task_hash(suite: Suite, task: Any) -> str:
    """sha256 (16 hex) over what an agent and its grader see of ``task``: the statement and timeout, the
    files ``prepare`` writes (git metadata left out: it holds timestamps) and the suite's grader files."""
    digest = hashlib.sha256()
    digest.update(json.dumps([task.id, task.statement, task.timeout_s, task.needs_gpu]).encode())
    with tempfile.TemporaryDirectory(prefix="ms-provenance-") as tmp:
        dest = Path(tmp) / "task"
        dest.mkdir()
        suite.prepare(task.id, dest)
        for path in sorted(dest.rglob("*")):
            rel = path.relative_to(dest)
            if ".git" in rel.parts or path.is_dir():
                continue
            data = str(path.readlink()).encode() if path.is_symlink() else path.read_bytes()
            digest.update(f"{rel.as_posix()}\0{len(data)}\0".encode() + data)
    for name, text in sorted(suite.grader_files(task.id).items()):
        digest.update(f"grader:{name}\0".encode() + text.encode())
    return digest.hexdigest()[:16]


def llm_record(resolved: ResolvedConfig) -> dict[str, Any] | None:
    """The model as the endpoint reports it (``GET /v1/models``) and the sampling parameters the host sends;
    with several ``llm.models``, the first one's at the top and each one's under ``models`` (what it is,
    score-deciding) and ``endpoints`` (where it was reached)."""
    section = resolved.config.llm
    if not endpoint_configured(section):
        return None
    sampling = {"llm.max_tokens": section.max_tokens, **_sampling(_dump(resolved.plugins["proposer"].config))}
    arms = [(name, model_record(arm)) for name, arm in section.arms()]
    record: dict[str, Any] = {**arms[0][1], "sampling": sampling}
    if section.models:
        what = ("model", "root", "digest")
        record["models"] = {name: {k: r[k] for k in what if k in r} for name, r in arms}
        record["endpoints"] = {name: {k: v for k, v in r.items() if k not in what} for name, r in arms}
    return record


def model_record(section: LLMSection) -> dict[str, Any]:
    """One model of a single-model ``llm`` section: its endpoint, model, weights root and (a prepared
    local model) digest, and what the endpoint serves."""
    record: dict[str, Any] = {"endpoint": None, "model": None, "root": None, "served": []}
    # The LLM modules are imported here, not at the top: they pull in httpx and openai (seconds), which
    # `metasearch status` and the MLflow mirror, readers of this module, never need.
    if section.serve is not None:  # started by the study itself: vLLM serves what the config names
        from metasearch.llm import local_models
        from metasearch.llm.serve import served_name

        record.update(endpoint="managed vLLM", model=served_name(section.serve), root=section.serve.model)
        if local_models.is_local(section.serve.model):
            try:
                _, prepared = local_models.resolve(section.serve.model)
            except MetasearchError as exc:
                record["error"] = str(exc)[:300]
            else:
                assert prepared is not None
                record["digest"] = "sha256:" + str(prepared["gguf_sha256"])
        return record
    from metasearch.llm.client import LLMClient

    url = section.base_url or os.environ.get("OPENAI_BASE_URL")
    key = os.environ.get(section.api_key_env) if section.api_key_env else None
    record["endpoint"] = url
    client = LLMClient(str(url), api_key=key, timeout_s=min(section.timeout_s, 30.0), max_retries=1)
    try:
        served = client.served_models()
    except MetasearchError as exc:
        log.warning("provenance: cannot list the endpoint's models: %s", exc)
        record["error"] = str(exc)[:300]
        record["model"] = section.model
        return record
    finally:
        client.close()
    record["served"] = [m["id"] for m in served]
    wanted = section.model or (served[0]["id"] if served else None)
    entry = next((m for m in served if m["id"] == wanted), None)
    record["model"] = (
        wanted if entry is not None or wanted is None else f"{wanted} (not listed by the server)"
    )
    record["root"] = entry.get("root") if entry else None
    return record


def random_seeds(resolved: ResolvedConfig) -> dict[str, Any]:
    """Every seed in the resolved config: ``study.seed`` and any ``seed``/``*_seed`` option of a plugin."""
    seeds: dict[str, Any] = {"study.seed": resolved.config.study.seed}
    for section, plugin in resolved.plugins.items():
        for key, value in flatten(_dump(plugin.config), f"{section}.").items():
            last = key.rsplit(".", 1)[-1]
            if last == "seed" or last.endswith("_seed"):
                seeds[key] = value
    return seeds


def conditions_hash(record: dict[str, Any]) -> str:
    """12 hex digits over the score-deciding part of ``record``: equal hashes mean comparable scores."""
    deciding = {k: v for k, v in flatten(record).items() if score_deciding(k, record)}
    return hashlib.sha256(json.dumps(deciding, sort_keys=True).encode()).hexdigest()[:12]


def score_deciding(key: str, record: dict[str, Any]) -> bool:
    local = (record.get("sandbox") or {}).get("kind") == "local"
    for entry in SCORE_DECIDING + (LOCAL_SCORE_DECIDING if local else ()):
        if key == entry or (entry.endswith(".") and key.startswith(entry)):
            return True
    return False


def headline(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """What ``status`` shows: revision, image, model, suite revision (its task hashes in one digest)."""
    if record is None:
        return None
    ms, sandbox, suite, llm = (record.get(k) or {} for k in ("metasearch", "sandbox", "suite", "llm"))
    revision = str(ms.get("revision") or "")[:12] or f"version {ms.get('version')}"
    tasks = suite.get("tasks") or {}
    image = sandbox.get("image")
    return {
        "metasearch": revision + (" (dirty)" if ms.get("dirty") else ""),
        "image": f"{image} ({str(sandbox.get('image_id') or '')[:19]})" if image else sandbox.get("kind"),
        "model": _models_line(llm) if llm else None,
        "suite": f"{suite.get('name')} {len(tasks)} tasks @ {tasks_digest(tasks)}",
        "conditions": conditions_hash(record),
    }


def _models_line(llm: dict[str, Any]) -> Any:
    models = llm.get("models")
    if not isinstance(models, dict):
        return llm.get("model")
    return ", ".join(f"{name}: {(m or {}).get('model')}" for name, m in models.items())


def tasks_digest(tasks: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(tasks, sort_keys=True).encode()).hexdigest()[:12]


def read_record(study_dir: Path) -> dict[str, Any] | None:
    path = Path(study_dir) / RECORD_NAME
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except ValueError as exc:
        raise ArchiveError(f"{path}: not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ArchiveError(f"{path}: expected a JSON object")
    return data


def to_json(record: dict[str, Any]) -> str:
    return json.dumps(record, indent=2, sort_keys=False) + "\n"


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; lists stay values. Keys in ``NOT_COMPARED`` are dropped."""
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            if not prefix and key in NOT_COMPARED:
                continue
            out.update(flatten(value, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): data}


def _sampling(options: dict[str, Any], prefix: str = "proposer.") -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in flatten(options, prefix).items():
        if key.rsplit(".", 1)[-1] in SAMPLING_KEYS:
            found[key] = value
    return found


def _dump(model: Any) -> Any:
    dump = getattr(model, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if hasattr(model, "__dataclass_fields__"):
        from dataclasses import asdict

        return json.loads(json.dumps(asdict(model), default=str))
    return model


def _run(args: list[str]) -> str | None:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None
