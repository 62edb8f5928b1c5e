"""run_job: the one place that wires archive, sandbox, proposer and suite together for one job.

Called on worker threads. Candidate failures come back as data (an Evaluation with ``error`` set, an
ExpansionRejected); infrastructure faults come back as InfraFailure so the study re-queues the work.
"""

from __future__ import annotations

import logging
import tempfile
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from metasearch.archive import GitArchive
from metasearch.archive.git import kept_diff
from metasearch.archive.tally import ModelLedger
from metasearch.errors import ArchiveError, ConfigError, InfrastructureError, SandboxViolation, TaskUnfit
from metasearch.events import Evaluated, Expanded, ExpansionRejected, InfraFailure, Outcome
from metasearch.llm.gateway import FORWARDER_PATH, SOCKET_DIR, SOCKET_PATH
from metasearch.llm.usage import BudgetExhausted
from metasearch.manifest import MANIFEST_NAME, Manifest, load_manifest, parse_manifest
from metasearch.proposers.base import ProposalContext, ProposalFailed, Proposer
from metasearch.proposers.gate import GateConfig, Verdict, check, smoke_check
from metasearch.sandboxes.protocol import GIT_SAFE_ENV, ExecResult, Limits, Mount, RunSpec, Sandbox
from metasearch.sandboxes.transfer import copy_nofollow, links_out_of, worktree_tampering
from metasearch.schedulers import model_choice
from metasearch.suites.protocol import Suite, Task, TaskResult
from metasearch.types import Agent, Evaluate, Evaluation, Expand, Job, Proposal

if TYPE_CHECKING:
    from metasearch.llm.service import LLMService, RemoteLLM

log = logging.getLogger(__name__)

AGENT_MOUNT = "/agent"
TASK_MOUNT = "/task"
MAX_LOG_BYTES = 2_000_000
MAX_ARTIFACT_COPY_BYTES = 5_000_000


@dataclass
class Runner:
    """Runs jobs for one study. ``limits`` are the sandbox limits for agent runs (timeouts come from tasks)."""

    archive: GitArchive
    suite: Suite
    sandbox: Sandbox
    proposer: Proposer
    proposer_name: str
    tasks: dict[str, Task]
    limits: Limits = field(default_factory=Limits)
    gate: GateConfig = field(default_factory=lambda: GateConfig())
    llm: LLMService | None = None
    """The study's LLM access: agents that declare ``resources.llm`` get a per-job gateway from it."""

    def abort(self) -> None:
        """End what the study's jobs run in their sandboxes (the study abandoned them: a second Ctrl-C), so
        their workers return at once instead of when each job ends."""
        sweep = getattr(self.sandbox, "sweep", None)
        if callable(sweep):
            sweep()

    def __call__(self, job: Job) -> Outcome:
        try:
            if isinstance(job, Evaluate):
                return self.evaluate(job)
            return self.expand(job)
        except InfrastructureError as exc:
            log.warning("job %s: infrastructure error: %s", job.job_id, exc)
            unfit = isinstance(exc, TaskUnfit)
            return InfraFailure(str(exc), retryable=exc.retryable, transient=exc.transient, task_unfit=unfit)
        except OSError as exc:  # disk full, permissions on the host: not the candidate's fault
            log.warning("job %s: host error: %s", job.job_id, exc)
            return InfraFailure(f"host error: {exc}")

    def _labels(self, job: Job) -> dict[str, str]:
        return {"metasearch.study": self.archive.study, "metasearch.job": job.job_id}

    # -- evaluation -------------------------------------------------------------------------------

    def evaluate(self, job: Evaluate) -> Outcome:
        task = self.tasks[job.task_id]
        log_dir = self.archive.log_dir(job.job_id)
        started = time.monotonic()
        try:
            graded = self._grade(job, task, log_dir)
        finally:  # also after a grading that failed: the next one starts from what it learned
            self._journal_learned(job)
        return self._evaluated(job, graded, started, log_dir)

    def _grade(self, job: Evaluate, task: Task, log_dir: Path) -> TaskResult:
        """The agent's solve and the grading of its artifact (here; the RayRunner runs them as a Ray task)."""
        with self.archive.checkout(job.agent_id) as agent_dir:
            return evaluate_in_sandbox(
                agent_dir,
                task,
                self.suite,
                self.sandbox,
                self.limits,
                self._labels(job),
                log_dir,
                llm=self.llm,
            )

    def _journal_learned(self, job: Evaluate) -> None:
        """Journal the facts about the job's task that the suite knows and the journal does not yet
        (``Suite.learned``): a resumed study hands them back to its suite before it grades."""
        known = self.archive.index.learned.get(job.task_id, {})
        facts = self.suite.learned().get(job.task_id, {})
        new = {key: value for key, value in facts.items() if known.get(key) != value}
        if new:
            self.archive.learn_task(job.task_id, new, job_id=job.job_id)

    def _evaluated(self, job: Evaluate, graded: TaskResult, started: float, log_dir: Path) -> Evaluated:
        """The grade as the study records it (score clipped to [0, 1], duration and log location added)."""
        return Evaluated(
            Evaluation(
                job_id=job.job_id,
                agent_id=job.agent_id,
                task_id=job.task_id,
                score=min(1.0, max(0.0, float(graded.score))),
                metrics=dict(graded.metrics),
                flags=tuple(graded.flags),
                error=graded.error,
                duration_s=round(time.monotonic() - started, 3),
                log_path=str(log_dir),
                finished_at=time.time(),
            )
        )

    # -- expansion --------------------------------------------------------------------------------

    def expand(self, job: Expand) -> Outcome:
        parent = self.archive.get(job.parent_id)
        log_dir = self.archive.log_dir(job.job_id)
        try:  # from git, not the worktree: the gate must hold the parent's rules, whatever the child wrote
            parent_manifest = parse_manifest(self.archive.read_text(parent.id, MANIFEST_NAME))
        except (ConfigError, ArchiveError) as exc:
            return ExpansionRejected(f"parent manifest invalid: {exc}", kind="other")
        model = self._choose_model(job)
        with self.archive.checkout(parent.id) as workspace:
            git_link = (workspace / ".git").read_bytes()
            context = self._context(job, parent, log_dir, tuple(parent_manifest.protected), model)
            proposed = self._propose(parent, workspace, context)
            if isinstance(proposed, ExpansionRejected):
                return proposed
            proposal = proposed
            tampered = worktree_tampering(workspace, git_link)
            if tampered:
                return ExpansionRejected(f"tampered worktree: {tampered}", kind="tampered")
            try:
                diff, verdict, tree = self._gate(job, workspace, parent_manifest, log_dir)
            except SandboxViolation as exc:
                return ExpansionRejected(f"proposer failed: {exc}", kind="gate")
            proposal = replace(proposal, diff=diff)
            if self.llm is None and (proposal.tokens or proposal.cost_usd):  # else metered per call
                self.archive.add_usage(job.job_id, proposal.tokens, proposal.cost_usd)
            if not verdict.admitted:
                return ExpansionRejected(verdict.reason, diff, proposal, kind=verdict.kind)
            meta = {
                "proposer": self.proposer_name,
                **({"model": model} if model is not None else {}),
                **proposal.meta,
                "job_id": job.job_id,
                "summary": proposal.summary,
                "rationale": proposal.rationale,
                "tokens": proposal.tokens,
                "cost_usd": proposal.cost_usd,
                "transcript_path": proposal.transcript_path,
            }
            agent = self.archive.add_child(parent.id, workspace, job_id=job.job_id, meta=meta, tree=tree)
        return Expanded(agent, proposal)

    def _choose_model(self, job: Expand) -> str | None:
        """The model the expansion calls (``llm.choose`` over what the journal says so far, see
        ``schedulers.model_choice``), journaled before the proposer starts; None when its proposer calls
        no model (``uses_model``)."""
        uses = getattr(self.proposer, "uses_model", None)
        if self.llm is None or not callable(uses) or not uses(job.job_id):
            return None
        llm = self.llm
        basis = llm.section.cost_basis()

        def decide(ledger: ModelLedger) -> str:
            pulls = ledger.pulls(basis)
            return model_choice.choose(
                llm.names, pulls, rule=llm.section.choose, seed=llm.seed, key=job.job_id
            )

        return self.archive.choose_model(job.job_id, decide)

    def _propose(
        self, parent: Agent, workspace: Path, context: ProposalContext
    ) -> Proposal | ExpansionRejected:
        """Run the proposer on ``workspace`` (here; the RayRunner runs it on a worker node)."""
        try:
            return self.proposer.propose(parent, workspace, context)
        except (ProposalFailed, ConfigError, SandboxViolation) as exc:
            return ExpansionRejected(f"proposer failed: {exc}", kind=getattr(exc, "kind", "other"))
        except BudgetExhausted as exc:  # the job's cap is the candidate's limit; the study's is not
            if exc.scope == "job":
                return ExpansionRejected(f"proposer failed: {exc}", kind="budget")
            raise InfrastructureError(str(exc), retryable=False) from exc

    def _gate(
        self, job: Expand, workspace: Path, parent_manifest: Manifest, log_dir: Path
    ) -> tuple[str, Verdict, str]:
        """The workspace's diff (kept as ``proposal.diff``), the admission gate's verdict on the child's
        commit as it will be (the paths git says changed, and a copy of exactly the files the commit holds:
        the workspace may also hold files that the child's own .gitignore keeps out of it), and the id of
        the tree judged, which the child commits. SandboxViolation for a tree git would refuse to check
        out."""
        with tempfile.TemporaryDirectory(prefix="ms-child-") as tmp:
            code = Path(tmp) / "agent"
            code.mkdir()
            diff, paths, tree = self.archive.workspace_change(workspace, code)
            (log_dir / "proposal.diff").write_text(kept_diff(diff))
            verdict = check(diff, code, parent_manifest, None, self.gate, self._labels(job), paths=paths)
            if verdict.admitted:
                verdict = self._smoke(job, code, parent_manifest)
        return diff, verdict, tree

    def _smoke(self, job: Expand, code: Path, parent_manifest: Manifest) -> Verdict:
        """The admission gate's smoke run on ``code``, the child's files as its commit will hold them (here;
        the RayRunner runs it as a Ray task)."""
        return smoke_check(code, parent_manifest, self.sandbox, self.gate, self._labels(job))

    def _context(
        self,
        job: Expand,
        parent: Agent,
        log_dir: Path,
        protected: tuple[str, ...] = (),
        model: str | None = None,
    ) -> ProposalContext:
        index = self.archive.index
        agents = dict(index.agents)
        evaluations = list(index.evaluations.values())
        lineage: list[Agent] = []
        cursor = parent.parent_id
        while cursor is not None:
            lineage.insert(0, agents[cursor])
            cursor = agents[cursor].parent_id
        means: dict[str, list[float]] = {}
        for ev in evaluations:
            means.setdefault(ev.agent_id, []).append(ev.score)
        return ProposalContext(
            protected=protected,
            model=model,
            job_id=job.job_id,
            study_dir=self.archive.root,
            log_dir=log_dir,
            sandbox=self.sandbox,
            suite_description=self.suite.description,
            parent_evaluations=[ev for ev in evaluations if ev.agent_id == parent.id],
            lineage=lineage,
            lineage_scores={a: sum(s) / len(s) for a, s in means.items() if s},
            agents=agents,
            evaluations=evaluations,
            extra={
                "failed_job_ids": [f.get("job_id") for f in list(index.failed_expansions)],
                "task_statements": {t.id: t.statement for t in self.tasks.values()},
                "grader_files": self.suite.grader_files,
            },
        )


def evaluate_in_sandbox(
    agent_dir: Path,
    task: Task,
    suite: Suite,
    sandbox: Sandbox,
    limits: Limits,
    labels: dict[str, str],
    log_dir: Path,
    *,
    llm: LLMService | RemoteLLM | None = None,
) -> TaskResult:
    """Run an agent's ``solve`` on one task in a sandbox, then grade its artifact in a fresh one.

    Everything here is local to one machine (the RayExecutor calls it on worker nodes). Candidate
    failures come back as a TaskResult with ``error`` set; infrastructure faults raise. An agent that
    declares ``resources.llm`` gets the job's gateway socket at ``/run/metasearch/llm.sock``.
    """
    try:
        manifest = load_manifest(agent_dir)
    except ConfigError as exc:
        return TaskResult(score=0.0, error=f"invalid manifest: {exc}")
    gateway: AbstractContextManager[Any] = nullcontext()
    if manifest.resources.llm:
        if llm is None:
            raise InfrastructureError(
                f"agent {manifest.name!r} uses an LLM (resources.llm) but this runner has no LLM gateway "
                "(configure llm.base_url or llm.serve)",
                retryable=False,
            )
        gateway = llm.gateway(labels.get("metasearch.job", "job"), log_dir)
    with gateway as gw, tempfile.TemporaryDirectory(prefix="ms-task-") as tmp:
        task_dir = Path(tmp) / "task"
        task_dir.mkdir()
        suite.prepare(task.id, task_dir)
        mounts = [Mount(agent_dir, AGENT_MOUNT, read_only=True), Mount(task_dir, TASK_MOUNT, read_only=False)]
        env = agent_env()
        if gw is not None:
            mounts.append(Mount(gw.mount_dir, SOCKET_DIR))  # read-only: connecting to a socket needs no more
            env.update({"METASEARCH_LLM_SOCKET": SOCKET_PATH, "METASEARCH_LLM_FORWARDER": FORWARDER_PATH})
        spec = RunSpec(
            command=manifest.command("solve", task_dir=TASK_MOUNT, agent_dir=AGENT_MOUNT),
            mounts=tuple(mounts),
            workdir=AGENT_MOUNT,
            env=env,
            limits=replace(limits, timeout_s=task.timeout_s),
            labels=labels,
        )
        result = sandbox.run(spec)
        if gw is not None:
            _check_gateway(gw)
        _write_log(log_dir / "agent.log", result)
        artifact = task_dir / suite.artifact_path
        copy_nofollow(artifact, log_dir / "artifact", max_bytes=MAX_ARTIFACT_COPY_BYTES)
        if not result.ok:
            return TaskResult(
                score=0.0, error=f"agent run failed: {result.reason or f'exit code {result.exit_code}'}"
            )
        escaping = links_out_of(task_dir, "/task")  # a LocalSandbox run leaves what it wrote as it is
        if artifact.is_symlink() or escaping:
            refused = escaping[0] if escaping else f"link out of the tree: {TASK_MOUNT}/{suite.artifact_path}"
            return TaskResult(score=0.0, error=f"agent run failed: {refused}")
        return suite.grade(task.id, artifact, sandbox)


def agent_env() -> dict[str, str]:
    """Environment of an agent run: no secrets, caches under the writable /tmp."""
    return {
        "PYTHONPATH": AGENT_MOUNT,
        "METASEARCH_TASK_DIR": TASK_MOUNT,
        "HOME": "/tmp",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": "1",
        "MPLCONFIGDIR": "/tmp",
        **GIT_SAFE_ENV,
    }


def _write_log(path: Path, result: ExecResult) -> None:
    text = (
        f"# exit_code={result.exit_code} duration_s={result.duration_s:.2f} timed_out={result.timed_out} "
        f"oom_killed={result.oom_killed} truncated={result.truncated} reason={result.reason}\n"
        f"## stdout\n{result.stdout[-MAX_LOG_BYTES:]}\n## stderr\n{result.stderr[-MAX_LOG_BYTES:]}\n"
    )
    path.write_text(text)


def _check_gateway(gw: Any) -> None:
    """Faults of the LLM path are not the candidate's: they abandon the job instead of scoring it."""
    if gw.upstream_failures:
        raise InfrastructureError(f"LLM upstream unavailable during the job: {gw.last_upstream_error}")
    if gw.budget_refusals and (gw.study_refusals or gw.meter.study_exhausted):
        raise InfrastructureError(
            "the study's token budget is exhausted (resume with a larger budget.tokens)", retryable=False
        )
