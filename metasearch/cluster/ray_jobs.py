"""The worker side of the RayRunner: what one Ray task does on whichever node runs it.

Each function gets its job's code as a tarball, builds the suite and a sandbox on its node, does one
thing, and returns plain data: the grade of an evaluation (``evaluate``), the edited workspace of an
expansion (``propose``), or the verdict of an admission-gate smoke run (``smoke``), with a tarball of the
job's logs. Infrastructure faults come back as data (``infra``) so the head keeps their kind; nothing here
writes to the archive. The sandbox's containers carry the job's labels, so the head sweeps what a lost node
left behind.
"""

from __future__ import annotations

import io
import socket
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from metasearch.errors import ConfigError, InfrastructureError, SandboxViolation
from metasearch.llm.usage import BudgetExhausted
from metasearch.manifest import parse_manifest
from metasearch.proposers.base import ProposalContext, ProposalFailed
from metasearch.proposers.gate import GateConfig, smoke_check
from metasearch.registry import PROPOSERS, SUITES
from metasearch.runner import evaluate_in_sandbox
from metasearch.sandboxes.auto import make_sandbox
from metasearch.sandboxes.config import SandboxSection
from metasearch.sandboxes.protocol import Limits, Sandbox
from metasearch.suites.protocol import Fact, Suite, Task, TaskResult
from metasearch.types import Agent


def where() -> dict[str, str]:
    """The node a task ran on (reported with every result, for per-node status)."""
    import ray

    return {"node_id": str(ray.get_runtime_context().get_node_id()), "host": socket.gethostname()}


Report = tuple[Any, str, str] | None
"""(the study's host actor, job id, job kind): where a task tells the head it started, and on which node."""


def report_start(report: Report) -> None:
    if report is not None:
        host, job_id, kind = report
        host.started.remote(job_id, kind, where()["node_id"])  # fire and forget


def pack(folder: Path, *, compress: bool = True) -> bytes:
    """A tarball of ``folder``'s content; links are stored as links, never followed."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz" if compress else "w") as tar:
        tar.add(folder, arcname=".")
    return buffer.getvalue()


def unpack(data: bytes, dest: Path) -> None:
    """Extract a tarball made by ``pack`` or ``git archive``; the ``data`` filter refuses absolute paths,
    ``..``, links out of ``dest`` and device files (tarfile.FilterError)."""
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")


def _suite(name: str, options: dict[str, Any]) -> Suite:
    suite: Suite = SUITES.create(name, options)
    return suite


def _sandbox(options: dict[str, Any], study: str, study_id: str) -> Sandbox:
    """The job's sandbox on this node. A task Ray gave GPUs (``num_gpus``) hands exactly those to Docker
    (device requests for those ids), so two tasks on one node never share a GPU Ray kept apart."""
    import ray

    granted = [str(int(i)) for i in ray.get_gpu_ids()] if ray.is_initialized() else []
    if granted and options.get("gpus", "none") != "none":
        options = {**options, "gpus": granted}
    return make_sandbox(SandboxSection.model_validate(options), study=study, study_id=study_id)


def evaluate(
    report: Report,
    code: bytes,
    task: Task,
    suite_name: str,
    suite_options: dict[str, Any],
    sandbox_options: dict[str, Any],
    study: str,
    study_id: str,
    limits: Limits,
    labels: dict[str, str],
    llm: Any = None,
    learned: dict[str, Fact] | None = None,
) -> dict[str, Any]:
    """Run and grade one (agent, task) pair on this node; the suite starts from what the head ``learned``
    of the task, and what it knows after the grading comes back as ``learned``."""
    report_start(report)
    suite = _suite(suite_name, suite_options)
    suite.learn(task.id, learned or {})
    sandbox = _sandbox(sandbox_options, study, study_id)
    with tempfile.TemporaryDirectory(prefix="ms-ray-") as tmp:
        agent_dir, log_dir = Path(tmp) / "agent", Path(tmp) / "logs"
        agent_dir.mkdir()
        log_dir.mkdir()
        unpack(code, agent_dir)
        infra: dict[str, Any] | None = None
        graded = TaskResult(0.0)
        try:
            graded = evaluate_in_sandbox(agent_dir, task, suite, sandbox, limits, labels, log_dir, llm=llm)
        except InfrastructureError as exc:
            infra = exc.to_dict()
        logs = pack(log_dir)
    return {
        "score": graded.score,
        "metrics": dict(graded.metrics),
        "flags": list(graded.flags),
        "error": graded.error,
        "logs": logs,
        "infra": infra,
        "learned": dict(suite.learned().get(task.id, {})),
        **where(),
    }


def propose(
    report: Report,
    code: bytes,
    parent: Agent,
    shipped: dict[str, Any],
    proposer_name: str,
    proposer_options: dict[str, Any],
    suite_name: str,
    suite_options: dict[str, Any],
    sandbox_options: dict[str, Any],
    study: str,
    study_id: str,
    llm: Any = None,
    host: Any = None,
) -> dict[str, Any]:
    """Run the proposer on a copy of the parent's code on this node; return the edited files.

    ``shipped`` is the head's ProposalContext without its sandbox and callables; the proposer keeps its
    state on the head (``host``: the Optuna study, the token ledger), never here."""
    report_start(report)

    suite = _suite(suite_name, suite_options)
    sandbox = _sandbox(sandbox_options, study, study_id)
    study_dir = Path(shipped.pop("study_dir"))
    proposer = PROPOSERS.create(
        proposer_name, proposer_options, study_dir=study_dir, llm=llm, knobs_host=host
    )
    out: dict[str, Any] = {"rejected": None, "infra": None, "workspace": None, "proposal": None, **where()}
    with tempfile.TemporaryDirectory(prefix="ms-ray-") as tmp:
        workspace, log_dir = Path(tmp) / "agent", Path(tmp) / "logs"
        workspace.mkdir()
        log_dir.mkdir()
        unpack(code, workspace)
        extra = dict(shipped.pop("extra"))
        extra["grader_files"] = suite.grader_files
        context = ProposalContext(
            study_dir=study_dir,
            log_dir=log_dir,
            sandbox=sandbox,
            suite_description=suite.description,
            extra=extra,
            **shipped,
        )
        try:
            out["proposal"] = proposer.propose(parent, workspace, context)
            out["workspace"] = pack(workspace, compress=True)
        except (ProposalFailed, ConfigError, SandboxViolation) as exc:
            out["rejected"] = f"proposer failed: {exc}"
            out["kind"] = getattr(exc, "kind", "other")
        except BudgetExhausted as exc:  # the job's cap is the candidate's limit; the study's is not
            if exc.scope == "job":
                out["rejected"] = f"proposer failed: {exc}"
                out["kind"] = "budget"
            else:
                out["infra"] = {"message": str(exc), "retryable": False}
        except InfrastructureError as exc:
            out["infra"] = exc.to_dict()
        out["logs"] = pack(log_dir)
    return out


def smoke(
    report: Report,
    code: bytes,
    spec_args: dict[str, Any],
    sandbox_options: dict[str, Any],
    study: str,
    study_id: str,
) -> dict[str, Any]:
    """The admission gate's smoke run of a proposed child on this node: (admitted, reason)."""
    report_start(report)

    sandbox = _sandbox(sandbox_options, study, study_id)
    with tempfile.TemporaryDirectory(prefix="ms-ray-") as tmp:
        workspace = Path(tmp) / "agent"
        workspace.mkdir()
        unpack(code, workspace)
        try:
            verdict = smoke_check(
                workspace,
                parse_manifest(spec_args["parent_manifest"]),
                sandbox,
                GateConfig.model_validate(spec_args["gate"]),
                spec_args["labels"],
            )
        except InfrastructureError as exc:
            return {"infra": exc.to_dict(), **where()}
    return {"admitted": verdict.admitted, "reason": verdict.reason, "infra": None, **where()}


def sweep(sandbox_options: dict[str, Any], study: str, study_id: str) -> int:
    """Remove the study's containers on this node (a task lost with its worker leaves its container)."""
    sweeper = getattr(_sandbox(sandbox_options, study, study_id), "sweep", None)
    return int(sweeper()) if callable(sweeper) else 0
