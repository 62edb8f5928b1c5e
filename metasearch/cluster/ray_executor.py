"""Beyond one machine: every job kind runs as a Ray task on the cluster; the archive stays on the head.

``RayRunner`` is the Runner with its three sandboxed steps moved to Ray tasks, each with its own resource
request (``executor.num_cpus``/``num_gpus``/``resources`` for evaluations, ``executor.expand`` for
expansions, ``executor.smoke`` for the admission gate's smoke runs):

* an evaluation ships the agent's code (``git archive`` of its commit) and returns the grade and logs;
* an expansion ships the parent's code and the search context; the proposer edits a copy on the worker
  and the edited files come back; the head replaces its checkout's files with them, computes the diff and
  runs the gate's static checks, then
* the smoke run ships the child's files to a worker and returns the verdict; the head commits the child.

What proposers keep between jobs (the token ledger, the Optuna study) lives in the study's host actor on the
head node (``ray_host``); the driver journals each job's usage from it when the job ends, so the archive has
one writer. Every Ray wait has a timeout: a request the cluster cannot satisfy becomes an infrastructure
error instead of a hang. A task lost with its node (raylet or worker process killed) comes back as a
``transient`` infrastructure failure: the study re-queues the job (the scheduler may start it elsewhere)
without counting it toward the stop after repeated failures. Worker nodes need the same metasearch, Python
and Ray versions as the head and, for Docker sandboxes, the sandbox image.
"""

from __future__ import annotations

import io
import logging
import shutil
import tarfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metasearch.cluster import ray_jobs
from metasearch.cluster.ray_host import start_host
from metasearch.cluster.ray_nodes import NodeLog
from metasearch.config import ExecutorSection, RayTaskResources
from metasearch.errors import ConfigError, InfrastructureError
from metasearch.events import ExpansionRejected, Outcome
from metasearch.llm.usage import Prices
from metasearch.manifest import Manifest
from metasearch.proposers.base import ProposalContext
from metasearch.proposers.gate import Verdict, smoke_spec
from metasearch.runner import Runner
from metasearch.sandboxes.config import SandboxSection
from metasearch.suites.protocol import Task, TaskResult
from metasearch.types import Agent, Evaluate, Expand, Job, Proposal

log = logging.getLogger(__name__)


def start_ray(section: ExecutorSection) -> None:
    """Connect to the cluster (``address``) or start a local one (``address: null``)."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError("executor.name: 'ray' needs Ray: pip install -e '.[ray]'") from exc
    if not ray.is_initialized():
        try:
            ray.init(
                address=section.address,
                ignore_reinit_error=True,
                include_dashboard=False,
                log_to_driver=False,
            )
        except ConnectionError as exc:
            raise ConfigError(
                f"executor.address: no Ray cluster answers at {section.address!r} ({exc}); start one with "
                "`ray start --head` (see configs/ray-cluster.yaml)"
            ) from exc


def stop_ray() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()


def check_cluster(section: ExecutorSection) -> dict[str, float]:
    """Fail at start, naming both numbers, when no node can hold one job of a kind (a GPU asked of a
    CPU-only cluster would otherwise wait forever). Returns the cluster's total resources."""
    import ray

    total = {k: float(v) for k, v in ray.cluster_resources().items()}
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    for kind, ask in section.requests().items():
        for name, amount in ask.items():
            if amount <= 0:
                continue
            best = max((float(n.get(name, 0.0)) for n in nodes), default=0.0)
            if best < amount:
                field_name = {"CPU": "num_cpus", "GPU": "num_gpus"}.get(name)
                prefix = "executor" if kind == "evaluate" else f"executor.{kind}"
                key = f"{prefix}.{field_name}" if field_name else f"{prefix}.resources.{name}"
                raise ConfigError(
                    f"{key}: each {kind} job asks for {amount:g} {name} but the largest node of the "
                    f"cluster has {best:g} (the cluster has {total.get(name, 0.0):g} in all)"
                )
    return total


class TaskTimeout(Exception):
    """A Ray task did not finish within its wait (cancelled)."""


def run_task(remote: Any, args: tuple[Any, ...], ask: RayTaskResources, timeout_s: float, name: str) -> Any:
    """Submit one task of ``remote`` (a ``ray.remote`` function) with ``ask``'s resources and no Ray
    retries (the study re-queues lost work itself), wait at most ``timeout_s``, return its value.
    Raises TaskTimeout, or what ``ray.get`` raises (a RayError when the worker or node was lost)."""
    import ray

    ref = remote.options(
        num_cpus=ask.num_cpus,
        num_gpus=ask.num_gpus,
        resources=dict(ask.resources) or None,
        max_retries=0,
        name=name,
    ).remote(*args)
    ready, _ = ray.wait([ref], timeout=timeout_s)
    if not ready:
        ray.cancel(ref, force=True)
        raise TaskTimeout(name)
    return ray.get(ref, timeout=60)


def _lost(exc: BaseException) -> bool:
    """Whether a Ray error means the task's worker or node went away (not that our code raised)."""
    import ray.exceptions as rex

    return isinstance(exc, rex.RayError) and not isinstance(exc, rex.RayTaskError)


@dataclass
class RayRunner(Runner):
    executor: ExecutorSection = field(default_factory=lambda: ExecutorSection())
    sandbox_section: SandboxSection = field(default_factory=lambda: SandboxSection())
    suite_name: str = "training"
    suite_options: dict[str, Any] = field(default_factory=dict)
    proposer_options: dict[str, Any] = field(default_factory=dict)
    knobs_options: dict[str, Any] | None = None
    """The knobs proposer's options when the study uses it (alone or in ``mix``): its Optuna study lives
    in the host actor."""
    _host: Any = None
    _host_lock: threading.Lock = field(default_factory=threading.Lock)
    _remotes: dict[str, Any] = field(default_factory=dict)
    _nodes: NodeLog | None = None

    # -- plumbing ---------------------------------------------------------------------------------

    @property
    def host(self) -> Any:
        """The study's one host actor, started by the first job that needs it (jobs start concurrently)."""
        with self._host_lock:
            return self._start_host()

    def _start_host(self) -> Any:
        if self._host is None:
            meter = self.llm.meter if self.llm is not None else None
            self._host = start_host(
                study_limit=meter.study_limit if meter else None,
                job_limit=meter.job_limit if meter else None,
                prices=meter.prices if meter else Prices(),
                used_before=self.archive.index.tokens,
                study_dir=str(self.archive.root),
                knobs_options=self.knobs_options,
            )
        return self._host

    @property
    def nodes(self) -> NodeLog:
        if self._nodes is None:
            self._nodes = NodeLog(self.archive.root)
        return self._nodes

    def _remote_llm(self, model: str | None = None) -> Any:
        """The LLM of ``model`` (None: the first, the one agents call) as a worker reaches it."""
        return self.llm.remote(self.host, model=model) if self.llm is not None else None

    def _submit(self, kind: str, job: Job, fn: Any, *args: Any) -> dict[str, Any]:
        """Run ``fn`` as a Ray task with ``kind``'s resource request; wait (bounded); return its result.
        Records the job on its node; raises InfrastructureError (``transient`` when the node was lost)."""
        import ray

        if kind not in self._remotes:
            self._remotes[kind] = ray.remote(fn)
        ask: RayTaskResources = self.executor.for_kind(kind)
        started = time.time()
        try:
            out: dict[str, Any] = run_task(
                self._remotes[kind],
                ((self.host, job.job_id, kind), *args),
                ask,
                self.executor.wait_timeout_s,
                f"{kind}-{job.job_id}",
            )
        except TaskTimeout as exc:
            self.nodes.record(job.job_id, kind, None, started, "failed", ask.num_cpus)
            raise InfrastructureError(
                f"Ray did not finish job {job.job_id} within {self.executor.wait_timeout_s:g}s; its {kind} "
                f"task requests num_cpus={ask.num_cpus:g}, num_gpus={ask.num_gpus:g}, resources="
                f"{dict(ask.resources)} and the cluster has {ray.cluster_resources()}",
                retryable=False,
            ) from exc
        except Exception as exc:
            state = "lost" if _lost(exc) else "failed"
            self.nodes.record(job.job_id, kind, None, started, state, ask.num_cpus)
            if _lost(exc):
                raise InfrastructureError(
                    f"job {job.job_id} lost with its Ray worker ({type(exc).__name__}: {str(exc)[:300]})",
                    transient=True,
                ) from exc
            raise InfrastructureError(f"Ray task for job {job.job_id} failed: {exc}") from exc
        state = "failed" if out.get("infra") else "done"
        self.nodes.record(job.job_id, kind, out.get("node_id"), started, state, ask.num_cpus)
        return out

    def sweep_nodes(self) -> int:
        """Remove the study's containers on every live node (called when the run ends): a task lost with
        its Ray worker leaves its container running on that node's Docker. Returns how many."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if self.sandbox_section.name != "docker":
            return 0
        remote = ray.remote(ray_jobs.sweep)
        refs = [
            remote.options(
                num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
            ).remote(*self._study_args())
            for node in ray.nodes()
            if node.get("Alive")
        ]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=120)
        return sum(int(ray.get(ref)) for ref in ready)

    def _study_args(self) -> tuple[dict[str, Any], str, str]:
        return self.sandbox_section.model_dump(), self.archive.study, self.archive.study_id

    def __call__(self, job: Job) -> Outcome:
        try:
            return super().__call__(job)
        finally:
            self._journal_usage(job)

    def _journal_usage(self, job: Job) -> None:
        """What the job's LLM calls spent (metered in the host actor, on any node), journaled here."""
        if self.llm is None or self._host is None:
            return
        import ray

        try:
            tally = ray.get(self._host.take.remote(job.job_id), timeout=60)
        except Exception as exc:  # the host is on this node: its loss ends the run at the next job
            log.warning("job %s: could not read its token usage from the study host: %s", job.job_id, exc)
            return
        if tally.calls:
            self.archive.add_usage(job.job_id, tally.tokens, tally.cost_usd)

    @staticmethod
    def _raise_infra(out: dict[str, Any]) -> None:
        if out.get("infra"):
            raise InfrastructureError.from_dict(out["infra"])

    # -- evaluation -------------------------------------------------------------------------------

    def _grade(self, job: Evaluate, task: Task, log_dir: Path) -> TaskResult:
        """The evaluation as a Ray task: the worker's suite starts from what the head's suite knows of the
        task (``Suite.learned``) and what it learns comes back, for the runner to journal."""
        sandbox, study, study_id = self._study_args()
        out = self._submit(
            "evaluate",
            job,
            ray_jobs.evaluate,
            self.archive.archive_bytes(job.agent_id),
            task,
            self.suite_name,
            self.suite_options,
            sandbox,
            study,
            study_id,
            self.limits,
            self._labels(job),
            self._remote_llm(),
            dict(self.suite.learned().get(task.id, {})),
        )
        ray_jobs.unpack(out["logs"], log_dir)
        self.suite.learn(task.id, out.get("learned") or {})
        self._raise_infra(out)
        return TaskResult(out["score"], out["metrics"], tuple(out["flags"]), out["error"])

    # -- expansion --------------------------------------------------------------------------------

    def _propose(
        self, parent: Agent, workspace: Path, context: ProposalContext
    ) -> Proposal | ExpansionRejected:
        shipped = {
            "job_id": context.job_id,
            "study_dir": str(context.study_dir),
            "parent_evaluations": list(context.parent_evaluations),
            "lineage": list(context.lineage),
            "lineage_scores": dict(context.lineage_scores),
            "agents": dict(context.agents),
            "evaluations": list(context.evaluations),
            "extra": {k: v for k, v in context.extra.items() if not callable(v)},
            "protected": tuple(context.protected),
            "model": context.model,
        }
        sandbox, study, study_id = self._study_args()
        job = Expand(parent_id=parent.id, job_id=context.job_id)
        out = self._submit(
            "expand",
            job,
            ray_jobs.propose,
            self.archive.archive_bytes(parent.id),
            parent,
            shipped,
            self.proposer_name,
            self.proposer_options,
            self.suite_name,
            self.suite_options,
            sandbox,
            study,
            study_id,
            self._remote_llm(context.model),
            self.host,
        )
        ray_jobs.unpack(out["logs"], context.log_dir)
        self._raise_infra(out)
        if out["rejected"]:
            return ExpansionRejected(out["rejected"], kind=out.get("kind", "other"))
        try:
            _replace_files(workspace, out["workspace"])
        except (tarfile.TarError, OSError) as exc:
            return ExpansionRejected(f"unsafe workspace from the proposer: {exc}", kind="gate")
        proposal: Proposal = out["proposal"]
        return proposal

    def _smoke(self, job: Expand, workspace: Path, parent_manifest: Manifest) -> Verdict:
        if smoke_spec(workspace, parent_manifest, self.gate) is None:
            return Verdict(True)
        code = ray_jobs.pack(workspace, compress=True)
        spec_args = {
            "parent_manifest": self.archive.read_text(job.parent_id, "agent.toml"),
            "gate": self.gate.model_dump(),
            "labels": self._labels(job),
        }
        sandbox, study, study_id = self._study_args()
        out = self._submit("smoke", job, ray_jobs.smoke, code, spec_args, sandbox, study, study_id)
        self._raise_infra(out)
        return Verdict(bool(out["admitted"]), str(out["reason"]))


def _replace_files(workspace: Path, data: bytes) -> None:
    """Make ``workspace`` (a checkout) hold exactly the files of ``data``, keeping its ``.git`` link."""
    for child in workspace.iterdir():
        if child.name == ".git":
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = [m for m in tar.getmembers() if Path(m.name).parts[:1] != (".git",) and m.name != "."]
        tar.extractall(workspace, members=members, filter="data")
