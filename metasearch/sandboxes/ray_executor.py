"""Beyond one machine: evaluations run as Ray tasks on worker nodes; the archive stays on the head.

``RayRunner`` is the Runner with one change: an evaluation ships the agent's code as a tarball (``git
archive`` of its commit) to a Ray task that requests ``num_cpus`` / ``num_gpus``; the task builds the suite
and a sandbox on its node, runs ``evaluate_in_sandbox`` there, and returns the grade plus a tarball of the
job's logs, which the head writes into the study's ``logs/``. Expansions stay on the head (proposers keep
state there, e.g. the Optuna journal). Every Ray wait has a timeout: a request the cluster cannot satisfy
(a GPU on a CPU-only cluster) becomes an infrastructure error that stops the study with a clear message
instead of hanging. Worker nodes need metasearch installed (same version) and, for Docker sandboxes, the
sandbox image.
"""

from __future__ import annotations

import io
import logging
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metasearch.config import ExecutorSection, SandboxSection
from metasearch.errors import ConfigError, InfrastructureError
from metasearch.events import Outcome
from metasearch.llm.service import RemoteLLM
from metasearch.runner import Runner, evaluate_in_sandbox
from metasearch.sandboxes.protocol import Limits
from metasearch.suites.protocol import Task, TaskResult
from metasearch.types import Evaluate

log = logging.getLogger(__name__)


def start_ray(section: ExecutorSection) -> None:
    """Connect to the cluster (``address``) or start a local one (``address: null``)."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError("executor.name: 'ray' needs Ray: pip install -e '.[ray]'") from exc
    if not ray.is_initialized():
        ray.init(
            address=section.address, ignore_reinit_error=True, include_dashboard=False, log_to_driver=False
        )


def stop_ray() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()


def _remote_evaluate(
    code: bytes,
    task: Task,
    suite_name: str,
    suite_options: dict[str, Any],
    sandbox_options: dict[str, Any],
    study: str,
    study_id: str,
    limits: Limits,
    labels: dict[str, str],
    llm: RemoteLLM | None = None,
) -> dict[str, Any]:
    """Runs on a worker node. Infrastructure faults come back as data, so the head keeps their kind."""
    from metasearch.registry import SUITES
    from metasearch.sandboxes.auto import make_sandbox

    cls = SUITES.resolve(suite_name)
    suite = cls(cls.Config.model_validate(suite_options))
    sandbox = make_sandbox(SandboxSection.model_validate(sandbox_options), study=study, study_id=study_id)
    with tempfile.TemporaryDirectory(prefix="ms-ray-") as tmp:
        agent_dir, log_dir = Path(tmp) / "agent", Path(tmp) / "logs"
        agent_dir.mkdir()
        log_dir.mkdir()
        with tarfile.open(fileobj=io.BytesIO(code)) as tar:
            tar.extractall(agent_dir, filter="data")
        infra: dict[str, Any] | None = None
        graded = TaskResult(0.0)
        try:
            graded = evaluate_in_sandbox(agent_dir, task, suite, sandbox, limits, labels, log_dir, llm=llm)
        except InfrastructureError as exc:
            infra = {"message": str(exc), "retryable": exc.retryable}
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            tar.add(log_dir, arcname=".")
    usage = llm.meter.study if llm is not None else None
    return {
        "score": graded.score,
        "metrics": dict(graded.metrics),
        "flags": list(graded.flags),
        "error": graded.error,
        "logs": buffer.getvalue(),
        "infra": infra,
        "usage": None if usage is None else [usage.prompt_tokens, usage.completion_tokens],
    }


@dataclass
class RayRunner(Runner):
    executor: ExecutorSection = field(default_factory=lambda: ExecutorSection())
    sandbox_section: SandboxSection = field(default_factory=lambda: SandboxSection())
    suite_name: str = "training"
    suite_options: dict[str, Any] = field(default_factory=dict)
    _remote: Any = None

    def evaluate(self, job: Evaluate) -> Outcome:
        import ray

        if self._remote is None:
            self._remote = ray.remote(_remote_evaluate)
        task = self.tasks[job.task_id]
        log_dir = self.archive.log_dir(job.job_id)
        started = time.monotonic()
        code = self.archive.archive_bytes(job.agent_id)
        ref = self._remote.options(
            num_cpus=self.executor.num_cpus, num_gpus=self.executor.num_gpus, max_retries=0
        ).remote(
            code,
            task,
            self.suite_name,
            self.suite_options,
            self.sandbox_section.model_dump(),
            self.archive.study,
            self.archive.study_id,
            self.limits,
            self._labels(job),
            self.llm.remote() if self.llm is not None else None,
        )
        ready, _ = ray.wait([ref], timeout=self.executor.wait_timeout_s)
        if not ready:
            ray.cancel(ref, force=True)
            raise InfrastructureError(
                f"Ray did not finish job {job.job_id} within {self.executor.wait_timeout_s:g}s; it requests "
                f"num_cpus={self.executor.num_cpus:g}, num_gpus={self.executor.num_gpus:g} and the cluster has "
                f"{ray.cluster_resources()}",
                retryable=False,
            )
        try:
            out = ray.get(ref, timeout=60)
        except Exception as exc:  # the task raised on the worker (e.g. Docker down there)
            raise InfrastructureError(f"Ray task for job {job.job_id} failed: {exc}") from exc
        with tarfile.open(fileobj=io.BytesIO(out["logs"])) as tar:
            tar.extractall(log_dir, filter="data")
        if out.get("usage") and self.llm is not None:  # metered on the worker: journal it here
            self.llm.meter.charge(job.job_id, *out["usage"])
        if out.get("infra"):
            raise InfrastructureError(out["infra"]["message"], retryable=out["infra"]["retryable"])
        graded = TaskResult(out["score"], out["metrics"], tuple(out["flags"]), out["error"])
        return self._evaluated(job, graded, started, log_dir)
