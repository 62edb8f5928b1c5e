"""The promotion gate: re-evaluate one agent on a suite's held-out tasks before it may be promoted.

A gate is written ``SUITE:THRESHOLD`` (``training:0.6``, ``code-edit:0.5``): the agent's mean score over
held-out tasks, tasks the search never evaluated, must reach the threshold. Held-out tasks are the suite's
``heldout`` subset when it has one, else the tasks of its configured subset (the study's, when the study ran
this suite) that the study's journal never evaluated, or when there are none, every task of the suite it
never evaluated; a task the search saw is never among them. The suite is built with the study's own options when the study
used the same suite (else its defaults); the agent runs in the sandbox the study's config asks for, with
the study's LLM settings when its manifest asks for an LLM, through the same ``evaluate_in_sandbox`` the
runner uses, so held-out scores mean what search scores mean.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from metasearch.archive import GitArchive
from metasearch.cluster import ray_jobs
from metasearch.cluster.ray_executor import run_task, start_ray
from metasearch.config import build_suite, study_config
from metasearch.errors import ConfigError, InfrastructureError
from metasearch.llm.config import endpoint_configured
from metasearch.llm.service import LLMService
from metasearch.manifest import load_manifest
from metasearch.runner import evaluate_in_sandbox
from metasearch.sandboxes.auto import make_sandbox
from metasearch.sandboxes.protocol import Limits, Sandbox
from metasearch.suites.protocol import TaskResult
from metasearch.tracking import store
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
    """``heldout`` (the suite's own subset) or ``unseen`` (the suite's tasks the search never evaluated)."""
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


def heldout_tasks(suite: Any, seen: set[str], subset: str = "heldout") -> tuple[str, list[Any]]:
    """(subset name, tasks) the gate re-evaluates on: ``subset`` when the suite has it, else ``unseen``:
    the tasks of the suite's configured subset (the study's, when it ran this suite) outside ``seen``, or
    when there are none, every task of the suite outside ``seen``. Never a task in ``seen``."""
    try:
        tasks = list(suite.tasks(subset))
    except ConfigError:  # a suite that names its subsets refuses one it does not have
        tasks = []
    if not tasks and subset == "heldout":
        subset = "unseen"
        tasks = [t for t in suite.tasks() if t.id not in seen] or list(suite.tasks("all"))
    fresh = [t for t in tasks if t.id not in seen]
    if not fresh:
        raise ConfigError(
            f"gate: suite {suite.name!r} has no {subset!r} task the search never evaluated "
            f"({len(tasks)} {subset} tasks, all evaluated during the search); gate on another suite"
        )
    return subset, fresh


def run_gate(
    study_dir: Path, agent_id: str, gate: Gate, *, subset: str = "heldout", sandbox: Sandbox | None = None
) -> GateResult:
    """Evaluate ``agent_id`` on every held-out task of ``gate.suite`` (see the module docstring). Raises
    ConfigError when the suite is unknown, has no held-out task, or the agent needs an LLM the study has
    no endpoint for; InfrastructureError when the sandbox or the LLM cannot run."""
    study_dir = Path(study_dir)
    cfg = study_config(study_dir)
    suite = build_suite(gate.suite, cfg)
    s = cfg.sandbox
    limits = Limits()  # the sandbox holds the configured limits; tasks set the timeouts
    scores: dict[str, float] = {}
    errors: dict[str, str] = {}
    flags: dict[str, list[str]] = {}
    with GitArchive.open(study_dir, readonly=True) as archive:
        seen = {ev.task_id for ev in archive.index.evaluations.values()}
        subset, tasks = heldout_tasks(suite, seen, subset)
        written_by = archive.get(agent_id).meta.get("proposer")
        untrusted = (
            f"agent was written by the {written_by!r} proposer" if written_by in ("llm", "self") else None
        )
        labels = {"metasearch.study": archive.study, "metasearch.role": "promotion"}
        with archive.checkout(agent_id) as agent_dir:
            llm: LLMService | None = None
            if load_manifest(agent_dir).resources.llm:
                if not endpoint_configured(cfg.llm):
                    raise ConfigError(
                        f"llm.base_url: {agent_id} uses an LLM (resources.llm) but the study configures no "
                        "endpoint; set llm.base_url (or OPENAI_BASE_URL) or llm.serve"
                    )
                agents_llm = cfg.llm.arms()[0][1]  # agents call the first model
                llm = LLMService(agents_llm, study_dir=study_dir).start()
                if cfg.llm.trace:
                    store.trace_to(study_dir)
            box = sandbox or make_sandbox(s, study=f"{archive.study}-promote", untrusted=untrusted)
            try:
                on_ray = None
                if cfg.executor.name == "ray" and sandbox is None and llm is None:  # the study's cluster
                    options = cfg.suite.options() if cfg.suite.name == gate.suite else {}
                    on_ray = _on_ray(archive, agent_id, tasks, cfg, gate.suite, options, box.name, labels)
                for task in tasks:
                    job = f"promote-{new_job_id()}"
                    log_dir = archive.log_dir(job)
                    if on_ray is not None:
                        result = on_ray[task.id](log_dir)
                    else:
                        result = evaluate_in_sandbox(
                            agent_dir,
                            task,
                            suite,
                            box,
                            limits,
                            {**labels, "metasearch.job": job},
                            log_dir,
                            llm=llm,
                        )
                    scores[task.id] = float(result.score)
                    if result.flags:
                        flags[task.id] = list(result.flags)
                    if result.error:
                        errors[task.id] = result.error
                    log.info("gate %s: %s scored %.3f on %s", gate, agent_id, result.score, task.id)
            finally:
                if llm is not None:
                    llm.close()
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
    import ray  # an optional dependency (the ``ray`` extra), only for a study run on Ray

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
                raise InfrastructureError.from_dict(out["infra"])
            return TaskResult(out["score"], out["metrics"], tuple(out["flags"]), out["error"])

        return write

    return {t.id: result_of(t.id) for t in tasks}
