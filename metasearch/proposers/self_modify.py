"""``self``: self-modification, as in DGM/HGM. The parent agent improves its own code.

The parent's ``self_improve`` entry point (declared in its ``agent.toml``) runs inside a sandbox with the
workspace (a checkout of the parent) writable at ``/agent`` and a problem statement at
``/problem/problem.md``: the diagnosis of its failed evaluations and its lineage. The agent reaches the
LLM only through the per-job gateway socket mounted at ``/run/metasearch/llm.sock``; tokens are metered
there and count against the study's budget.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from metasearch.errors import ConfigError, InfrastructureError
from metasearch.llm.config import endpoint_configured
from metasearch.llm.gateway import FORWARDER_PATH, SOCKET_DIR, SOCKET_PATH
from metasearch.llm.service import LLMService, RemoteLLM
from metasearch.manifest import load_manifest
from metasearch.proposers.base import ProposalContext, ProposalFailed
from metasearch.proposers.prompt import diagnosis, lineage_summary, truncate
from metasearch.sandboxes.protocol import GIT_SAFE_ENV, Limits, Mount, RunSpec
from metasearch.types import Agent, Proposal


class SelfModifyProposer:
    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid")
        timeout_s: float = Field(1800, gt=0)
        max_tokens_per_job: int | None = Field(None, ge=1)
        """This proposer's cap on one self-modification's tokens, enforced by its gateway (the tighter of
        this and ``llm.max_tokens_per_job`` applies)."""
        context_chars: int = Field(30_000, ge=1_000)

    def __init__(self, config: Config, *, study_dir: Path, llm: Any = None, knobs_host: Any = None) -> None:
        # knobs_host: given to every proposer on a Ray worker; only knobs keeps state in the host actor.
        if not isinstance(llm, LLMService | RemoteLLM) and (llm is None or not endpoint_configured(llm)):
            raise ConfigError(
                "llm.base_url: self-modification needs an OpenAI-compatible endpoint for the agent's gateway "
                "(llm.base_url, OPENAI_BASE_URL, or llm.serve)"
            )
        self.config = config
        self.study_dir = Path(study_dir)
        self.llm = llm

    def uses_model(self, job_id: str) -> bool:
        return True

    def problem_statement(self, parent: Agent, context: ProposalContext) -> str:
        budget = self.config.context_chars
        statements = dict(context.extra.get("task_statements", {}))
        return (
            "# Improve yourself\n\nYou are the agent whose code is in /agent. Change your own code so that you "
            "score higher on the benchmark below. Keep your entry points and manifest name.\n\n"
            f"## The benchmark\n{truncate(context.suite_description, budget // 8, keep='head')}\n\n"
            f"## How you did\n{diagnosis(context.parent_evaluations, statements, budget // 2)}\n"
            f"## Your lineage (own mean score, change)\n"
            f"{lineage_summary(context.lineage, parent, context.lineage_scores, budget // 8)}"
        )

    def propose(self, parent: Agent, workspace: Path, context: ProposalContext) -> Proposal:
        manifest = load_manifest(workspace)
        if manifest.entry.self_improve is None:
            raise ProposalFailed(
                f"agent {manifest.name!r} declares no self_improve entry point", kind="self_improve"
            )

        if not isinstance(self.llm, LLMService | RemoteLLM):
            raise ConfigError("llm: the self proposer was built without the study's LLM service")
        problem_dir = Path(tempfile.mkdtemp(prefix="ms-problem-", dir=context.log_dir))
        (problem_dir / "problem.md").write_text(self.problem_statement(parent, context))
        problem_dir.chmod(0o755)
        (problem_dir / "problem.md").chmod(0o644)
        with self.llm.gateway(
            context.job_id, context.log_dir, job_limit=self.config.max_tokens_per_job, model=context.model
        ) as gateway:
            assert gateway.mount_dir is not None
            spec = RunSpec(
                command=manifest.command(
                    "self_improve", problem_file="/problem/problem.md", agent_dir="/agent"
                ),
                mounts=(
                    Mount(workspace, "/agent", read_only=False),
                    Mount(problem_dir, "/problem", read_only=True),
                    Mount(gateway.mount_dir, SOCKET_DIR),  # read-only: connecting needs no more
                ),
                workdir="/agent",
                env={
                    "PYTHONPATH": "/agent",
                    "HOME": "/tmp",
                    "METASEARCH_LLM_SOCKET": SOCKET_PATH,
                    "METASEARCH_LLM_FORWARDER": FORWARDER_PATH,
                    "PYTHONDONTWRITEBYTECODE": "1",
                    **GIT_SAFE_ENV,
                },
                limits=Limits(timeout_s=self.config.timeout_s),
                labels={"metasearch.study": self.study_dir.name, "metasearch.job": context.job_id},
            )
            result = context.sandbox.run(spec)
            usage = gateway.usage
            if gateway.upstream_failures:
                raise InfrastructureError(
                    f"LLM upstream unavailable during self-modification: {gateway.last_upstream_error}"
                )
        transcript = context.log_dir / "llm.jsonl"
        (context.log_dir / "self_improve.log").write_text(f"{result.stdout}\n--- stderr ---\n{result.stderr}")
        tokens = usage.tokens
        if not result.ok:
            raise ProposalFailed(
                f"self_improve failed ({result.reason or f'exit {result.exit_code}'}): {result.stderr[-500:]}",
                kind="self_improve",
                tokens=tokens,
            )
        summary = next((line for line in result.stdout.splitlines() if line.strip()), "self-modification")
        return Proposal(
            diff="",
            summary=summary.strip()[:200],
            rationale=truncate(result.stdout, 4000, keep="tail"),
            tokens=tokens,
            cost_usd=usage.cost_usd,
            transcript_path=str(transcript),
        )
