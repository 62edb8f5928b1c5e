"""Promotion: register an agent as an MLflow model, alias it ``production``, tag its commit in the archive.

``promote_agent`` (what ``metasearch promote`` calls):

1. with a gate ``SUITE:THRESHOLD``, re-evaluates the agent on the suite's held-out tasks and refuses when
   the mean is below the threshold (``PromotionRefused``; nothing is registered);
2. brings the MLflow mirror up to date, so the agent's run exists, and logs the model into that run:
   a pyfunc from code (``agent_model.py``) whose ``agent`` artifact is the exported agent directory,
   declaring the agent's pip requirements (``export.agent_requirements``) beside MLflow's and pandas;
   MLflow copies what links point to, so an agent whose tree links to a folder, out of itself or to
   nothing is refused (``refuse_links``): its model would not be the tree that was evaluated;
3. registers a new version of ``name`` with tags (study, agent id, commit, scores, gate result) and points
   the alias (``production``) at it, so ``models:/NAME@production`` always names the promoted agent;
4. tags the agent's commit in the archive repository as ``promoted/<name>/v<version>``.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from metasearch.archive import GitArchive
from metasearch.archive.journal import utf8_text
from metasearch.config import suite_class
from metasearch.drift import baseline_record
from metasearch.errors import ArchiveError, ConfigError, InfrastructureError, MetasearchError
from metasearch.export import REQUIREMENTS, agent_requirements
from metasearch.manifest import load_manifest
from metasearch.provenance import RECORD_NAME, conditions_hash, flatten, to_json
from metasearch.schedulers.final import agent_stats
from metasearch.tracking import store
from metasearch.tracking.heldout import Gate, GateResult, run_gate
from metasearch.tracking.mlflow_callback import MirrorBusy, sync
from metasearch.tracking.replay import JournalReplay, config_data
from metasearch.types import Evaluation

log = logging.getLogger(__name__)

MODEL_CODE = Path(__file__).with_name("agent_model.py")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*$")


class PromotionRefused(MetasearchError):
    """The agent may not be promoted: it carries integrity flags, or the held-out gate did not pass
    (``result`` holds its scores)."""

    def __init__(self, message: str, result: GateResult | None = None) -> None:
        super().__init__(message)
        self.result = result


def promote_agent(
    study_dir: Path,
    agent_id: str,
    name: str = "metasearch-agent",
    gate: str | Gate | None = None,
    *,
    tracking_uri: str | None = None,
    alias: str = "production",
    timeout_s: float = 3600.0,
) -> dict[str, Any]:
    """Promote ``agent_id``; returns what was registered (see the module docstring). Raises ConfigError
    (bad name or gate), ArchiveError (unknown agent), PromotionRefused, InfrastructureError (MLflow)."""
    from mlflow.exceptions import MlflowException

    try:
        return _promote(study_dir, agent_id, name, gate, tracking_uri, alias, timeout_s)
    except (MlflowException, OSError) as exc:
        raise InfrastructureError(f"promotion of {agent_id} failed in MLflow: {exc}") from exc


def _promote(
    study_dir: Path,
    agent_id: str,
    name: str,
    gate: str | Gate | None,
    tracking_uri: str | None,
    alias: str,
    timeout_s: float,
) -> dict[str, Any]:
    study_dir = Path(study_dir).resolve()
    if not _NAME.match(name):
        raise ConfigError(
            f"--name {name!r}: use letters, digits, '-', '_' and single dots (it becomes a git tag)"
        )
    gate = Gate.parse(gate) if isinstance(gate, str) else gate
    with GitArchive.open(study_dir, readonly=True) as archive:
        agent = archive.get(agent_id)
        refuse_flagged(archive.index.evaluations.values(), agent_id)
        gate_result = run_gate(study_dir, agent_id, gate) if gate is not None else None
        if gate_result is not None and gate_result.flags:
            raise PromotionRefused(
                f"{agent_id} was flagged on {gate_result.suite} held-out tasks ({_named(gate_result.flags)}); "
                "a flagged agent is never promoted",
                gate_result,
            )
        if gate_result is not None and not gate_result.passed:
            raise PromotionRefused(
                f"{agent_id} scored {gate_result.mean:.3f} on {gate_result.suite} held-out tasks, below the "
                f"gate {gate_result.threshold:g} ({gate_result.scores}); not promoted",
                gate_result,
            )
        uri = store.study_tracking_uri(study_dir, tracking_uri)
        replay = JournalReplay(study_dir)
        replay.read(None)
        run_id = _agent_run(study_dir, uri, agent_id, replay.study)
        client = store.make_client(uri)
        artifact_path = f"model-{name}"
        with tempfile.TemporaryDirectory(prefix="ms-promote-") as tmp:
            agent_dir = Path(tmp) / "agent"
            archive.export(agent_id, agent_dir)
            load_manifest(agent_dir)  # a model must have a solve entry point
            requirements = agent_requirements(agent_dir)
            if not (agent_dir / REQUIREMENTS).exists():
                (agent_dir / REQUIREMENTS).write_text("".join(f"{line}\n" for line in requirements))
            _save_model(
                Path(tmp) / "model",
                agent_dir,
                _model_config(study_dir, agent_id, replay.study, timeout_s),
                requirements,
            )
            record = baseline_record(study_dir, archive.index.drift)
            if record is not None:  # the conditions in force, beside the model files
                (Path(tmp) / "model" / RECORD_NAME).write_text(to_json(record))
            client.log_artifacts(run_id, str(Path(tmp) / "model"), artifact_path)
    scores = _scores(replay, agent_id)
    tags = {
        "metasearch.study": replay.study,
        "metasearch.study_dir": str(study_dir),
        "metasearch.agent_id": agent_id,
        "metasearch.commit": agent.commit,
        "metasearch.branch": agent.branch,
        **{f"metasearch.{k}": str(v) for k, v in scores.items()},
    }
    tags.update(provenance_tags(study_dir, archive.index, agent_id))
    suite = str((config_data(study_dir).get("suite") or {}).get("name") or "")
    if suite:
        tags["metasearch.suite"] = suite  # the suite the search ran
    if gate_result is not None:
        tags.update(gate_tags(gate_result))
    _ensure_registered_model(client, name, replay.study)
    source = f"{client.get_run(run_id).info.artifact_uri}/{artifact_path}"
    summary = str(agent.meta.get("summary") or agent.meta.get("seed") or "")
    tags, summary = utf8_text(tags), utf8_text(summary)  # an old journal may hold lone surrogates
    version = client.create_model_version(name, source, run_id=run_id, tags=tags, description=summary)
    client.set_registered_model_alias(name, alias, version.version)
    git_tag = f"promoted/{name}/v{version.version}"
    _tag_commit(study_dir / "repo", git_tag, agent.commit)
    client.set_tag(run_id, "metasearch.promoted", f"{name}/v{version.version}@{alias}")
    log.info("promoted %s as %s version %s (alias %s)", agent_id, name, version.version, alias)
    return {
        "name": name,
        "version": int(version.version),
        "alias": alias,
        "model_uri": f"models:/{name}@{alias}",
        "tracking_uri": uri,
        "run_id": run_id,
        "source": source,
        "agent_id": agent_id,
        "commit": agent.commit,
        "git_tag": git_tag,
        "scores": scores,
        "gate": gate_result.as_dict() if gate_result is not None else None,
    }


def provenance_tags(study_dir: Path, index: Any, agent_id: str) -> dict[str, str]:
    """The study's record in force (``provenance.*``, flattened) and the conditions the agent's evaluations
    ran under: ``metasearch.conditions`` (their hashes) and whether they all match the record."""
    record = baseline_record(study_dir, index.drift)
    if record is None:
        return {}
    tags = {f"provenance.{k}": str(v)[:5000] for k, v in flatten(record).items()}
    current = conditions_hash(record)
    seen = sorted({str(ev.conditions) for ev in index.evaluations.values() if ev.agent_id == agent_id})
    tags["metasearch.conditions"] = ",".join(seen)
    tags["metasearch.conditions_in_force"] = current
    tags["metasearch.conditions_match"] = str(seen == [current]).lower()
    return tags


def gate_tags(result: GateResult) -> dict[str, str]:
    """What a registered version records of its gate: suite, threshold, held-out subset, mean, pass, and
    each task's score (``metasearch.gate.<task>``)."""
    tags = {
        "metasearch.gate": f"{result.suite}:{result.threshold:g}",
        "metasearch.gate_suite": result.suite,
        "metasearch.gate_threshold": f"{result.threshold:g}",
        "metasearch.gate_subset": result.subset,
        "metasearch.gate_tasks": str(len(result.scores)),
        "metasearch.gate_mean": f"{result.mean:.6g}",
        "metasearch.gate_passed": str(result.passed).lower(),
    }
    tags.update({f"metasearch.gate.{t}": f"{s:.6g}" for t, s in result.scores.items()})
    return tags


def _agent_run(study_dir: Path, uri: str, agent_id: str, study: str, wait_s: float = 120.0) -> str:
    """The agent's MLflow run, mirroring the journal first (or waiting for the study's own mirror)."""
    try:
        sync(study_dir, uri, lock_timeout_s=5.0)
    except MirrorBusy:
        log.info("a running study mirrors %s; waiting for it to mirror %s", study_dir, agent_id)
    client = store.make_client(uri)
    deadline = time.monotonic() + wait_s
    while True:
        exp = store.find_experiment(client, study_dir, study)
        if exp is not None:
            found = client.search_runs([exp], f"tags.`{store.AGENT_ID}` = '{agent_id}'", max_results=1)
            if found:
                return str(found[0].info.run_id)
        if time.monotonic() > deadline:
            raise InfrastructureError(
                f"{agent_id} has no MLflow run in {uri} yet; try again when the mirror caught up"
            )
        time.sleep(1.0)


def refuse_flagged(evaluations: Iterable[Evaluation], agent_id: str) -> None:
    """PromotionRefused naming the flags when any evaluation of ``agent_id`` carries integrity flags."""
    flagged: dict[str, list[str]] = {}
    for ev in evaluations:
        if ev.agent_id == agent_id and ev.flags:
            flagged.setdefault(ev.task_id, []).extend(ev.flags)
    if flagged:
        raise PromotionRefused(
            f"{agent_id} carries integrity flags ({_named(flagged)}); a flagged agent is never promoted"
        )


def _named(flags: Mapping[str, Sequence[str]]) -> str:
    return "; ".join(f"{', '.join(sorted(set(f)))} on {task}" for task, f in sorted(flags.items()))


def _model_config(study_dir: Path, agent_id: str, study: str, timeout_s: float) -> dict[str, Any]:
    suite = (config_data(study_dir).get("suite") or {}).get("name")
    try:
        artifact_path = suite_class(suite).artifact_path if suite else ""
    except ConfigError:
        artifact_path = ""
    return {"agent_id": agent_id, "study": study, "artifact_path": artifact_path, "timeout_s": timeout_s}


def model_requirements(agent: Sequence[str]) -> list[str]:
    """The pyfunc's pip requirements: MLflow (this version) and pandas, which the model code imports, then
    the agent's own; an agent's pin of either wins over the default."""
    import mlflow

    def name(req: str) -> str:
        return re.split(r"[\s<>=!~;\[]", req, maxsplit=1)[0].lower().replace("_", "-")

    chosen = {"mlflow": f"mlflow=={mlflow.__version__}", "pandas": "pandas"}
    chosen.update({name(req): req for req in agent})
    return list(chosen.values())


def refuse_links(agent_dir: Path, agent_id: str) -> None:
    """PromotionRefused naming the links under ``agent_dir`` that saving a model cannot copy as they are.

    MLflow copies what a link points to: a link to a folder is copied whole (a chain of them, ``d0/{x,y}
    -> ../d1`` and so on, doubles at every step), one leading out of the tree would copy host files into
    the model, one to nothing fails the save. A link to a file inside becomes a copy of that file."""
    root = os.path.realpath(agent_dir)
    bad = []
    for parent, dirs, files in os.walk(agent_dir):  # links are listed, never followed
        for name in [*dirs, *files]:
            path = os.path.join(parent, name)
            if not os.path.islink(path):
                continue
            real = os.path.realpath(path)
            inside = real.startswith(root + os.sep)
            if inside and os.path.isfile(real):
                continue
            what = ("a folder" if os.path.isdir(real) else "nothing") if inside else "out of the tree"
            bad.append(f"{os.path.relpath(path, agent_dir)} -> {os.readlink(path)} ({what})")
    if bad:
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        raise PromotionRefused(
            utf8_text(
                f"{agent_id} cannot be promoted: MLflow copies what links point to, and its tree links to "
                f"folders, out of itself or to nothing: {'; '.join(sorted(bad)[:5])}{more}"
            )
        )


def _save_model(
    path: Path, agent_dir: Path, model_config: dict[str, Any], requirements: Sequence[str]
) -> None:
    """Save the pyfunc of the agent in ``agent_dir`` at ``path``; PromotionRefused (``refuse_links``)."""
    import mlflow
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, ParamSchema, ParamSpec, Schema

    signature = ModelSignature(
        inputs=Schema([ColSpec("string", "task_dir")]),
        params=ParamSchema([ParamSpec("timeout_s", "double", float(model_config["timeout_s"]))]),
    )
    refuse_links(agent_dir, str(model_config["agent_id"]))
    with warnings.catch_warnings():
        # "no input example": deliberate, an example would make MLflow run the agent at save time
        warnings.filterwarnings("ignore", message=".*input_example.*", category=UserWarning)
        mlflow.pyfunc.save_model(
            path=str(path),
            python_model=str(MODEL_CODE),
            artifacts={"agent": str(agent_dir)},
            model_config=model_config,
            signature=signature,
            # Explicit, so MLflow does not load the model (and run agent code) to infer requirements.
            pip_requirements=model_requirements(requirements),
            metadata={
                "metasearch.agent_id": model_config["agent_id"],
                "metasearch.study": model_config["study"],
            },
        )


def _ensure_registered_model(client: Any, name: str, study: str) -> None:
    from mlflow.exceptions import MlflowException

    try:
        client.get_registered_model(name)
    except MlflowException:
        client.create_registered_model(name, description=f"Agent designs promoted from metasearch ({study}).")


def _scores(replay: Any, agent_id: str) -> dict[str, Any]:
    stats = agent_stats(replay.tree, agent_id)
    clade_s, clade_n = replay.tree.clade(agent_id)
    return {
        "own_mean": round(stats.mean, 6),
        "trials": stats.trials,
        "lower_bound": round(stats.lower_bound, 6),
        "clade_mean": round(clade_s / clade_n, 6) if clade_n else None,
        "clade_trials": clade_n,
        "best_belief": replay.best_belief() == agent_id,
    }


def _tag_commit(repo: Path, tag: str, commit: str) -> None:
    existing = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "-q", "--verify", f"refs/tags/{tag}^{{commit}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if existing.returncode == 0:
        if existing.stdout.strip() == commit:
            return
        raise ArchiveError(f"git tag {tag} already names {existing.stdout.strip()[:12]}, not {commit[:12]}")
    done = subprocess.run(
        ["git", "-C", str(repo), "tag", tag, commit], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise ArchiveError(f"git tag {tag} failed: {done.stderr.strip()[-500:]}")
