"""Build a runnable study from a config: archive, seeds, sandbox, suite, proposer, scheduler, callbacks.

``create`` makes a new study directory (freezing the resolved config into it); ``reopen`` rebuilds the same
pieces from that frozen config, which is all ``metasearch resume`` needs.
"""

from __future__ import annotations

import logging
import secrets
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

import metasearch
from metasearch import drift, provenance
from metasearch.archive import ArchiveIndex, GitArchive, read_index
from metasearch.archive.git import study_id_of
from metasearch.archive.plumbing import git
from metasearch.archive.recovery import refuse_if_running
from metasearch.cluster.ray_executor import RayRunner, check_cluster, start_ray, stop_ray
from metasearch.config import ResolvedConfig, load_config_data
from metasearch.errors import ConfigError
from metasearch.llm.config import endpoint_configured
from metasearch.llm.service import LLMService
from metasearch.manifest import MANIFEST_NAME, Manifest, load_manifest, parse_manifest
from metasearch.proposers.base import Proposer
from metasearch.runner import Runner
from metasearch.sandboxes.auto import make_sandbox
from metasearch.sandboxes.protocol import Limits, Sandbox
from metasearch.study import Callback, Study
from metasearch.suites.protocol import Suite
from metasearch.tracking import store

log = logging.getLogger(__name__)


@dataclass
class Launched:
    """Everything a run needs, with the resources that must be closed."""

    resolved: ResolvedConfig
    archive: GitArchive
    study: Study
    runner: Runner
    sandbox: Sandbox
    suite: Suite
    llm: LLMService | None = None

    def close(self) -> None:
        if self.llm is not None:
            self.llm.close()  # stops a managed vLLM server
        sweep = getattr(self.sandbox, "sweep", None)
        if callable(sweep):
            sweep()
        if self.resolved.config.executor.name == "ray":
            sweep_nodes = getattr(self.runner, "sweep_nodes", None)
            try:  # what lost tasks left on the workers' Docker
                if callable(sweep_nodes):
                    sweep_nodes()
            except Exception as exc:  # the cluster may be gone; the study's data is already safe
                log.warning("could not sweep the Ray nodes' containers: %s", exc)
            stop_ray()
        self.archive.close()


def resolve_seed(name: str) -> Path:
    """A seed is a folder holding an agent.toml: a path, ``seeds/<name>`` here, or in the source checkout."""
    candidates = [
        Path(name),
        Path.cwd() / "seeds" / name,
        Path(metasearch.__file__).resolve().parents[1] / "seeds" / name,
    ]
    for path in candidates:
        if (path / "agent.toml").is_file():
            return path.resolve()
    raise ConfigError(
        f"study.seeds: no seed agent {name!r} (looked in {', '.join(str(c) for c in candidates)})"
    )


def study_dir_for(resolved: ResolvedConfig, archive_dir: str | None, study: str | None) -> Path:
    return Path(archive_dir or resolved.config.archive_dir) / (study or resolved.config.study.name)


def preflight(resolved: ResolvedConfig) -> list[Path]:
    """Checks that need no side effects: the seeds exist, their manifests parse, and an LLM endpoint is
    configured when a seed uses one."""
    seeds = [resolve_seed(s) for s in resolved.config.study.seeds]
    for path in seeds:
        manifest = load_manifest(path)
        if manifest.resources.llm and not endpoint_configured(resolved.config.llm):
            raise ConfigError(
                f"llm.base_url: seed {manifest.name!r} uses an LLM (resources.llm = true) but no endpoint is "
                "configured: set llm.base_url (or OPENAI_BASE_URL) or llm.serve"
            )
    return seeds


def preflight_executor(resolved: ResolvedConfig) -> dict[str, float] | None:
    """With ``executor.name: ray``: join the cluster and check that it can hold each kind of job (before
    anything of the study is written). Returns the cluster's resources, or None for local threads."""
    if resolved.config.executor.name != "ray":
        return None

    start_ray(resolved.config.executor)
    return check_cluster(resolved.config.executor)


MODEL_CODE_PROPOSERS = frozenset({"llm", "self"})


def model_code(resolved: ResolvedConfig, seeds: Sequence[Manifest]) -> str | None:
    """Why model-written code will run in this study's sandboxes (a proposer that writes code with a
    model, or a seed that runs an LLM tool loop), or None."""
    proposer = resolved.config.proposer
    names = {proposer.name} | (
        set(proposer.options().get("weights") or {}) if proposer.name == "mix" else set()
    )
    if names & MODEL_CODE_PROPOSERS:
        return f"proposer {sorted(names & MODEL_CODE_PROPOSERS)[0]!r} runs code a model wrote"
    for manifest in seeds:
        if manifest.resources.llm:
            return f"seed {manifest.name!r} runs an LLM tool loop"
    return None


def study_sandbox(
    resolved: ResolvedConfig, *, study: str, study_id: str, seeds: Sequence[Manifest]
) -> Sandbox:
    """The study's sandbox, made before anything of the study is written or started."""
    cfg = resolved.config
    reserved = cfg.llm.served_gpus()
    return make_sandbox(
        cfg.sandbox,
        study=study,
        study_id=study_id,
        reserved_gpus=reserved,
        untrusted=model_code(resolved, seeds),
    )


def create(resolved: ResolvedConfig, study_dir: Path, *, callbacks: Sequence[Callback] = ()) -> Launched:
    seeds = preflight(resolved)
    resolved = with_drawn_secrets(resolved)
    # Build the plugins once before anything is written, so a plugin that cannot work fails cleanly.
    suite = resolved.plugins["suite"].create()
    suite.needs()  # e.g. a harness package the suite grades with
    resolved.plugins["proposer"].create(study_dir=study_dir, llm=resolved.config.llm)
    preflight_executor(resolved)
    study_id = uuid.uuid4().hex
    manifests = [load_manifest(path) for path in seeds]
    sandbox = study_sandbox(resolved, study=study_dir.name, study_id=study_id, seeds=manifests)
    record = provenance.collect(resolved, suite, sandbox)
    archive = GitArchive.create(
        study_dir,
        study=study_dir.name,
        config_text=resolved.to_yaml(),
        study_id=study_id,
        record_files={provenance.RECORD_NAME: provenance.to_json(record)},
        conditions=provenance.conditions_hash(record),
    )
    try:
        for path, manifest in zip(seeds, manifests, strict=True):
            archive.add_seed(manifest.name, path, job_id=f"seed-{path.name}", meta={"source": str(path)})
        return _assemble(resolved, archive, callbacks, sandbox, suite)
    except BaseException:
        archive.close()
        raise


def with_drawn_secrets(resolved: ResolvedConfig) -> ResolvedConfig:
    """The config with the suite's secret options (its class's ``SECRET_OPTIONS``: the training suite's
    ``data_key``) drawn where unset. Called once, when a study is created: the study's config.yaml keeps
    them, so resume grades on the same data; no agent sees that file."""
    plugin = resolved.plugins["suite"]
    unset = [n for n in plugin.secret_options if getattr(plugin.config, n, None) is None]
    if not unset:
        return resolved
    data = resolved.config.model_dump(mode="json")
    data["suite"].update({n: secrets.token_hex(16) for n in unset})
    return load_config_data(data)


def reopen(
    study_dir: Path,
    overrides: Sequence[str] = (),
    *,
    callbacks: Sequence[Callback] = (),
    lease_timeout_s: float = 30.0,
    accept_drift: bool = False,
) -> Launched:
    """Reopen a study to run it again. Refuses, before writing or starting anything, while another
    process runs it (its lease is live), or when conditions that decide scores changed since the study's
    provenance record (``DriftRefused`` naming each; ``accept_drift`` goes on and journals them); then
    claims the lease."""
    config_path = study_dir / "config.yaml"
    if not config_path.is_file():
        raise ConfigError(f"{study_dir}: not a study directory (no config.yaml)")
    index = read_index(study_dir)
    refuse_if_running(index, study_dir, lease_timeout_s)
    data: dict[str, Any] = yaml.safe_load(config_path.read_text()) or {}
    resolved = load_config_data(data, overrides)
    seeds = [parse_manifest(c) for c in _seed_manifests(study_dir, index)]
    sandbox = study_sandbox(
        resolved, study=index.study or study_dir.name, study_id=study_id_of(index, study_dir), seeds=seeds
    )
    preflight_executor(resolved)
    suite: Suite = resolved.plugins["suite"].create()
    today = provenance.collect(resolved, suite, sandbox)
    baseline = drift.baseline_record(study_dir, index.drift)
    found = drift.check_resume(study_dir, baseline, today, accept=accept_drift) if baseline else None
    archive = GitArchive.open(study_dir, lease_timeout_s=lease_timeout_s)
    archive.heartbeat()
    if found is None:
        log.warning("%s: no provenance record (an older study); recording today's conditions", study_dir)
    if found is None or found.deciding:
        changed = [{**d, "score_deciding": True} for d in (found.deciding if found else [])]
        changed += [{**d, "score_deciding": False} for d in (found.harmless if found else [])]
        archive.accept_drift(provenance.conditions_hash(today), changed, today)
    try:
        return _assemble(resolved, archive, callbacks, sandbox, suite)
    except BaseException:
        archive.release()
        archive.close()
        raise


def knobs_options(resolved: ResolvedConfig) -> dict[str, Any] | None:
    """The knobs proposer's options when the study uses it (alone or as a member of ``mix``), else None."""
    proposer = resolved.config.proposer
    if proposer.name == "knobs":
        return proposer.options()
    options = proposer.options()
    if proposer.name == "mix" and "knobs" in (options.get("weights") or {}):
        return dict((options.get("options") or {}).get("knobs") or {})
    return None


def _seed_manifests(study_dir: Path, index: ArchiveIndex) -> list[str]:
    repo = study_dir / "repo"
    return [
        git(repo, "show", f"{a.commit}:{MANIFEST_NAME}") for a in index.agents.values() if a.parent_id is None
    ]


def _assemble(
    resolved: ResolvedConfig,
    archive: GitArchive,
    callbacks: Sequence[Callback],
    sandbox: Sandbox,
    suite: Suite,
) -> Launched:
    cfg = resolved.config
    for task_id, facts in archive.index.learned.items():  # what gradings before a resume learned (runner.py)
        suite.learn(task_id, facts)
    tasks = {t.id: t for t in suite.tasks()}
    if not tasks:
        raise ConfigError(f"suite: {suite.name!r} lists no tasks for this configuration")
    llm: LLMService | None = None
    if endpoint_configured(cfg.llm):
        llm = LLMService(
            cfg.llm,
            study_dir=archive.root,
            study_tokens=cfg.budget.tokens,
            used_tokens=archive.index.tokens,
            on_charge=archive.add_usage,
            seed=cfg.study.seed,
        ).start()
    try:
        if llm is not None and cfg.llm.trace:
            store.trace_to(archive.root, cfg.tracking.mlflow.tracking_uri)
        return _assemble_with(resolved, archive, callbacks, suite, tasks, llm, sandbox)
    except BaseException:
        if llm is not None:
            llm.close()
        raise


def _assemble_with(
    resolved: ResolvedConfig,
    archive: GitArchive,
    callbacks: Sequence[Callback],
    suite: Suite,
    tasks: dict[str, Any],
    llm: LLMService | None,
    sandbox: Sandbox,
) -> Launched:
    cfg = resolved.config
    sweep = getattr(sandbox, "sweep", None)  # what a crashed run of this study (and no other) left
    if callable(sweep):
        sweep()
    proposer: Proposer = resolved.plugins["proposer"].create(study_dir=archive.root, llm=llm or cfg.llm)
    scheduler = resolved.plugins["scheduler"].create()
    limits = Limits()  # the sandbox holds the configured limits; tasks set the timeouts
    common: dict[str, Any] = {
        "archive": archive,
        "suite": suite,
        "sandbox": sandbox,
        "proposer": proposer,
        "proposer_name": cfg.proposer.name,
        "tasks": tasks,
        "limits": limits,
        "llm": llm,
        "gate": cfg.gate,
    }
    runner: Runner
    if cfg.executor.name == "ray":
        start_ray(cfg.executor)
        runner = RayRunner(
            **common,
            executor=cfg.executor,
            # Workers sandbox as the head does: `auto` that found Docker here must not fall back to local there.
            sandbox_section=cfg.sandbox.model_copy(update={"name": sandbox.name}),
            suite_name=cfg.suite.name,
            suite_options=cfg.suite.options(),
            proposer_options=cfg.proposer.options(),
            knobs_options=knobs_options(resolved),
        )
    else:
        runner = Runner(**common)
    study = Study(
        archive,
        scheduler,
        tasks=list(tasks),
        budget=cfg.budget.to_budget(),
        seed=cfg.study.seed,
        seed_evaluations=cfg.study.seed_evaluations == "all",
        callbacks=callbacks,
    )
    return Launched(resolved, archive, study, runner, sandbox, suite, llm)
