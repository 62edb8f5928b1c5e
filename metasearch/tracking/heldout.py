"""The promotion gate: re-evaluate one agent on a suite's held-out tasks before it may be promoted.

A gate is written ``SUITE:THRESHOLD`` (``training:0.6``): the agent's mean score over the suite's
``heldout`` subset must reach the threshold. The suite is built with the study's own options when the study
used the same suite (else its defaults); the agent runs in the sandbox the study's config asks for, through
the same ``evaluate_in_sandbox`` the runner uses, so held-out scores mean what search scores mean.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from metasearch.errors import ConfigError
from metasearch.sandboxes.protocol import Limits, Sandbox
from metasearch.types import new_job_id

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Gate:
    suite: str
    threshold: float

    @classmethod
    def parse(cls, text: str) -> Gate:
        suite, sep, raw = text.rpartition(":")
        try:
            threshold = float(raw)
        except ValueError:
            threshold = float("nan")
        if not sep or not suite or not 0.0 <= threshold <= 1.0:
            raise ConfigError(
                f"gate {text!r}: expected SUITE:THRESHOLD with a threshold in [0, 1], e.g. training:0.6"
            )
        return cls(suite, threshold)

    def __str__(self) -> str:
        return f"{self.suite}:{self.threshold:g}"


@dataclass(frozen=True)
class GateResult:
    suite: str
    threshold: float
    subset: str
    scores: dict[str, float] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    flags: dict[str, list[str]] = field(default_factory=dict)
    """Integrity flags per held-out task; any fails the gate, whatever the scores."""

    @property
    def mean(self) -> float:
        return sum(self.scores.values()) / len(self.scores) if self.scores else 0.0

    @property
    def passed(self) -> bool:
        return bool(self.scores) and self.mean >= self.threshold and not self.flags

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "mean": self.mean, "passed": self.passed}


def run_gate(
    study_dir: Path, agent_id: str, gate: Gate, *, subset: str = "heldout", sandbox: Sandbox | None = None
) -> GateResult:
    """Evaluate ``agent_id`` on every ``subset`` task of ``gate.suite``. Raises ConfigError when the suite
    is unknown or has no such tasks; InfrastructureError when the sandbox cannot run."""
    from metasearch.archive import GitArchive
    from metasearch.config import load_config_data
    from metasearch.registry import SUITES
    from metasearch.runner import evaluate_in_sandbox
    from metasearch.sandboxes.auto import make_sandbox

    study_dir = Path(study_dir)
    config_path = study_dir / "config.yaml"
    if not config_path.is_file():
        raise ConfigError(f"{study_dir}: not a study directory (no config.yaml)")
    cfg = load_config_data(yaml.safe_load(config_path.read_text()) or {}).config
    cls = SUITES.resolve(gate.suite)
    options = cfg.suite.options() if cfg.suite.name == gate.suite else {}
    try:
        suite = cls(cls.Config.model_validate(options))
    except ValidationError as exc:
        raise ConfigError(f"gate suite {gate.suite!r}: {exc}") from exc
    tasks = list(suite.tasks(subset))
    if not tasks:
        raise ConfigError(f"gate: suite {gate.suite!r} has no {subset!r} tasks to re-evaluate on")
    s = cfg.sandbox
    limits = Limits()  # the sandbox holds the configured limits; tasks set the timeouts
    scores: dict[str, float] = {}
    errors: dict[str, str] = {}
    flags: dict[str, list[str]] = {}
    with GitArchive.open(study_dir, readonly=True) as archive:
        written_by = archive.get(agent_id).meta.get("proposer")
        untrusted = (
            f"agent was written by the {written_by!r} proposer" if written_by in ("llm", "self") else None
        )
        box = sandbox or make_sandbox(s, study=f"{archive.study}-promote", untrusted=untrusted)
        labels = {"metasearch.study": archive.study, "metasearch.role": "promotion"}
        try:
            with archive.checkout(agent_id) as agent_dir:
                on_ray = None
                if cfg.executor.name == "ray" and sandbox is None:  # the study's cluster runs them
                    on_ray = _on_ray(archive, agent_id, tasks, cfg, gate.suite, options, box.name, labels)
                for task in tasks:
                    log_dir = archive.log_dir(f"promote-{new_job_id()}")
                    if on_ray is not None:
                        result = on_ray[task.id](log_dir)
                    else:
                        result = evaluate_in_sandbox(agent_dir, task, suite, box, limits, labels, log_dir)
                    scores[task.id] = float(result.score)
                    if result.flags:
                        flags[task.id] = list(result.flags)
                    if result.error:
                        errors[task.id] = result.error
                    log.info("gate %s: %s scored %.3f on %s", gate, agent_id, result.score, task.id)
        finally:
            sweep = getattr(box, "sweep", None)
            if sandbox is None and callable(sweep):
                sweep()
    return GateResult(gate.suite, gate.threshold, subset, scores, errors, flags)


def _on_ray(
    archive: Any,
    agent_id: str,
    tasks: list[Any],
    cfg: Any,
    suite_name: str,
    suite_options: dict[str, Any],
    sandbox_name: str,
    labels: dict[str, str],
) -> dict[str, Any]:
    """Re-evaluate on the study's Ray cluster, every task at once (as evaluation tasks, with the study's
    ``executor`` request); per task, a function writing the logs into a log folder and returning the grade."""
    from concurrent.futures import ThreadPoolExecutor

    import ray

    from metasearch.errors import InfrastructureError
    from metasearch.sandboxes import ray_jobs
    from metasearch.sandboxes.ray_executor import run_task, start_ray
    from metasearch.suites.protocol import TaskResult

    start_ray(cfg.executor)
    remote = ray.remote(ray_jobs.evaluate)
    code = archive.archive_bytes(agent_id)
    sandbox = cfg.sandbox.model_copy(update={"name": sandbox_name}).model_dump()
    study = f"{archive.study}-promote"

    def one(task: Any) -> dict[str, Any]:
        args = (
            None,
            code,
            task,
            suite_name,
            suite_options,
            sandbox,
            study,
            archive.study_id,
            Limits(),
            labels,
        )
        out: dict[str, Any] = run_task(
            remote, args, cfg.executor.for_kind("evaluate"), cfg.executor.wait_timeout_s, "promote"
        )
        return out

    with ThreadPoolExecutor(max(1, len(tasks))) as pool:
        outs = dict(zip([t.id for t in tasks], pool.map(one, tasks), strict=True))

    def result_of(task_id: str) -> Any:
        def write(log_dir: Path) -> TaskResult:
            out = outs[task_id]
            ray_jobs.unpack(out["logs"], log_dir)
            if out.get("infra"):
                raise InfrastructureError(out["infra"]["message"], retryable=out["infra"]["retryable"])
            return TaskResult(out["score"], out["metrics"], tuple(out["flags"]), out["error"])

        return write

    return {t.id: result_of(t.id) for t in tasks}
