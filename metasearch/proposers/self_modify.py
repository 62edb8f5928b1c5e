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

from metasearch.errors import ConfigError
from metasearch.manifest import load_manifest
from metasearch.proposers.base import ProposalContext, ProposalFailed, module_available
from metasearch.proposers.prompt import diagnosis, lineage_summary, truncate
from metasearch.sandboxes.protocol import Limits, Mount, RunSpec
from metasearch.types import Agent, Proposal

SOCKET_DIR = "/run/metasearch"
SOCKET_PATH = f"{SOCKET_DIR}/llm.sock"


class SelfModifyProposer:
    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid")
        timeout_s: float = Field(1800, gt=0)
        max_tokens_per_job: int | None = Field(None, ge=1)
        context_chars: int = Field(30_000, ge=1_000)

    def __init__(self, config: Config, *, study_dir: Path, llm: Any = None, **_: Any) -> None:
        if not module_available("metasearch.llm.gateway"):
            raise ConfigError(
                "proposer.name: 'self' needs the LLM gateway, which is not available in this version"
            )
        self.config = config
        self.study_dir = Path(study_dir)
        self.llm = llm

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
            raise ProposalFailed(f"agent {manifest.name!r} declares no self_improve entry point")
        upstream = getattr(self.llm, "base_url", None)
        if not upstream:
            raise ConfigError("llm.base_url: self-modification needs an LLM endpoint for the agent's gateway")
        from metasearch.llm.gateway import Gateway, TokenBudget

        problem_dir = Path(tempfile.mkdtemp(prefix="ms-problem-", dir=context.log_dir))
        (problem_dir / "problem.md").write_text(self.problem_statement(parent, context))
        socket_dir = Path(tempfile.mkdtemp(prefix="gw-", dir="/tmp"))
        socket_dir.chmod(0o755)
        transcript = context.log_dir / "gateway.jsonl"
        budget = TokenBudget(per_job=self.config.max_tokens_per_job)
        with Gateway(
            upstream_base_url=upstream,
            api_key=_api_key(self.llm),
            socket_path=socket_dir / "llm.sock",
            job_id=context.job_id,
            budget=budget,
            transcript_path=transcript,
        ) as gateway:
            spec = RunSpec(
                command=manifest.command(
                    "self_improve", problem_file="/problem/problem.md", agent_dir="/agent"
                ),
                mounts=(
                    Mount(workspace, "/agent", read_only=False),
                    Mount(problem_dir, "/problem", read_only=True),
                    Mount(socket_dir, SOCKET_DIR, read_only=False),
                ),
                workdir="/agent",
                env={
                    "PYTHONPATH": "/agent",
                    "HOME": "/tmp",
                    "METASEARCH_LLM_SOCKET": SOCKET_PATH,
                    "PYTHONDONTWRITEBYTECODE": "1",
                },
                limits=Limits(timeout_s=self.config.timeout_s),
                labels={"metasearch.study": self.study_dir.name, "metasearch.job": context.job_id},
            )
            result = context.sandbox.run(spec)
            usage = gateway.usage
        (context.log_dir / "self_improve.log").write_text(f"{result.stdout}\n--- stderr ---\n{result.stderr}")
        tokens = int(getattr(usage, "total_tokens", 0))
        if not result.ok:
            raise ProposalFailed(
                f"self_improve failed ({result.reason or f'exit {result.exit_code}'}): {result.stderr[-500:]}"
            )
        summary = next((line for line in result.stdout.splitlines() if line.strip()), "self-modification")
        return Proposal(
            diff="",
            summary=summary.strip()[:200],
            rationale=truncate(result.stdout, 4000, keep="tail"),
            tokens=tokens,
            cost_usd=float(getattr(usage, "cost_usd", 0.0)),
            transcript_path=str(transcript),
        )


def _api_key(llm: Any) -> str | None:
    import os

    name = getattr(llm, "api_key_env", None)
    return os.environ.get(name) if name else None
