"""``llm``: the meta-agent. An LLM reads the parent's code and its failures and edits the code.

Two modes:

* ``diff`` (one shot): the model answers with a unified diff in a fenced block; it is applied to the
  workspace with ``git apply``. Garbage or malformed diffs are proposal failures with the reason.
* ``tools`` (a tool loop, mini-swe-agent style): each model turn holds one fenced ``bash`` block, run in a
  sandbox session whose writable ``/agent`` is the workspace; the model ends with ``SUBMIT`` on a line of its
  own. Steps, tokens and output are bounded.

The model is reached from the host through an OpenAI-compatible client; commands the model runs never see
the network or any secret.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from metasearch.errors import ConfigError
from metasearch.llm.client import ChatResult
from metasearch.proposers.base import ProposalContext, ProposalFailed
from metasearch.proposers.prompt import code_listing, diagnosis, lineage_summary, truncate
from metasearch.sandboxes.protocol import GIT_SAFE_ENV, Limits, Mount, RunSpec
from metasearch.types import Agent, Proposal

SYSTEM = (
    "You improve a software agent's design. The agent is a small code repository; it is run on benchmark tasks "
    "and graded by hidden tests you cannot see. Make one focused change that should raise its score. Keep the "
    "agent's entry points and manifest name intact; do not edit tests or protected files."
)
DIFF_INSTRUCTIONS = (
    "Answer with a one-line summary on the first line, then your reasoning, then exactly one unified diff "
    "(git format, paths relative to the agent root, a/ and b/ prefixes) in a ```diff fenced block."
)
TOOLS_INSTRUCTIONS = (
    "Work in steps. Each reply holds your reasoning and exactly one ```bash fenced block; it runs in /agent (the "
    "agent's code, writable) and you get its output. Use cat/sed/python to view and edit files. When done, reply "
    "with a one-line summary after a line `SUBMIT` and no code block."
)
_FENCE = re.compile(r"```(\w+)?\n(.*?)```", re.DOTALL)


class ChatModel(Protocol):
    def chat(self, messages: list[dict[str, str]], *, job_id: str | None = None, **kw: Any) -> ChatResult: ...


def _require_endpoint(llm: Any) -> None:
    from metasearch.llm.service import LLMService, RemoteLLM, endpoint_configured

    if not isinstance(llm, LLMService | RemoteLLM) and (llm is None or not endpoint_configured(llm)):
        raise ConfigError(
            "llm.base_url: the llm proposer needs an OpenAI-compatible endpoint "
            "(llm.base_url, OPENAI_BASE_URL, or llm.serve)"
        )


class LLMProposer:
    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid")
        mode: Literal["diff", "tools"] = "diff"
        max_steps: int = Field(20, ge=1)
        context_chars: int = Field(60_000, ge=2_000)
        max_output_chars: int = Field(8_000, ge=500)
        step_timeout_s: float = Field(120, gt=0)
        allow_grader_files: bool = False
        """Show the meta-agent the hidden grader files of the parent's weakest tasks (off: never)."""
        temperature: float = Field(0.7, ge=0, le=2)

    def __init__(
        self, config: Config, *, study_dir: Path, llm: Any = None, model: ChatModel | None = None, **_: Any
    ) -> None:
        self.config = config
        self.study_dir = Path(study_dir)
        if model is None:
            _require_endpoint(llm)
        self._model = model
        self._llm = llm  # the study's LLMService (a config section when only checked)
        self._lock = threading.Lock()

    @property
    def model(self) -> ChatModel:
        with self._lock:
            if self._model is None:
                from metasearch.llm.service import LLMService, RemoteLLM

                if not isinstance(self._llm, LLMService | RemoteLLM):
                    raise ConfigError("llm: the llm proposer was built without the study's LLM service")
                self._model = self._llm.client
            return self._model

    def prompt(self, parent: Agent, workspace: Path, context: ProposalContext) -> str:
        budget = self.config.context_chars
        statements = dict(context.extra.get("task_statements", {}))
        return (
            f"## The benchmark\n{truncate(context.suite_description, budget // 10, keep='head')}\n\n"
            f"## How the parent did\n{diagnosis(context.parent_evaluations, statements, budget * 3 // 10)}\n"
            f"## Earlier attempts in this lineage (own mean score, change)\n"
            f"{lineage_summary(context.lineage, parent, context.lineage_scores, budget // 10)}\n"
            f"## The parent's code\n{code_listing(workspace, budget // 2)}"
            + self._grader_section(context, budget // 5)
        )

    def _grader_section(self, context: ProposalContext, budget: int) -> str:
        """Hidden grader files of the parent's weakest tasks: only when the config explicitly allows it."""
        files_of = context.extra.get("grader_files")
        if not self.config.allow_grader_files or not callable(files_of):
            return ""
        worst = sorted(context.parent_evaluations, key=lambda ev: ev.score)[:2]
        parts: list[str] = []
        for task_id in dict.fromkeys(ev.task_id for ev in worst):
            for path, text in files_of(task_id).items():
                parts.append(f"### {task_id}: {path}\n```\n{text}\n```\n")
        body = truncate("".join(parts), budget, keep="head")
        return (
            f"\n## Grader files (shown because proposer.allow_grader_files is set)\n{body}" if parts else ""
        )

    def propose(self, parent: Agent, workspace: Path, context: ProposalContext) -> Proposal:
        prompt = self.prompt(parent, workspace, context)
        transcript = context.log_dir / "transcript.jsonl"
        if self.config.mode == "diff":
            return self._one_shot(workspace, context, prompt, transcript)
        return self._tool_loop(workspace, context, prompt, transcript)

    def _chat(self, messages: list[dict[str, str]], context: ProposalContext, transcript: Path) -> ChatResult:
        result = self.model.chat(messages, job_id=context.job_id, temperature=self.config.temperature)
        with transcript.open("a") as f:
            f.write(json.dumps({"messages": messages[-2:], "reply": result.text}) + "\n")
        return result

    def _one_shot(self, workspace: Path, context: ProposalContext, prompt: str, transcript: Path) -> Proposal:
        messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"{prompt}\n\n{DIFF_INSTRUCTIONS}"},
        ]
        result = self._chat(messages, context, transcript)
        blocks = [
            body
            for lang, body in _FENCE.findall(result.text)
            if (lang or "").lower() in ("diff", "patch", "")
        ]
        if not blocks:
            raise ProposalFailed(
                f"model output holds no ```diff block: {truncate(result.text, 300, keep='head')!r}"
            )
        patch = blocks[-1] if blocks[-1].endswith("\n") else blocks[-1] + "\n"
        patch_file = context.log_dir / "model.patch"
        patch_file.write_text(patch)
        applied = subprocess.run(
            ["git", "-C", str(workspace), "apply", "--whitespace=nowarn", "--recount", str(patch_file)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if applied.returncode != 0:
            raise ProposalFailed(f"malformed diff (git apply: {applied.stderr.strip()[:300]})")
        return self._proposal(result.text, result, transcript)

    def _tool_loop(
        self, workspace: Path, context: ProposalContext, prompt: str, transcript: Path
    ) -> Proposal:
        messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"{prompt}\n\n{TOOLS_INSTRUCTIONS}"},
        ]
        tokens = 0
        cost = 0.0
        spec = RunSpec(
            command=["sleep", "infinity"],
            mounts=(Mount(workspace, "/agent", read_only=False),),
            workdir="/agent",
            env={"HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": "/agent", **GIT_SAFE_ENV},
            limits=Limits(timeout_s=self.config.step_timeout_s * self.config.max_steps),
            labels={"metasearch.study": self.study_dir.name, "metasearch.job": context.job_id},
        )
        with context.sandbox.session(spec) as session:
            for _step in range(self.config.max_steps):
                result = self._chat(messages, context, transcript)
                tokens += result.prompt_tokens + result.completion_tokens
                cost += result.cost_usd
                messages.append({"role": "assistant", "content": result.text})
                if re.search(r"^SUBMIT\s*$", result.text, re.MULTILINE):
                    summary = result.text.split("SUBMIT", 1)[1].strip() or "tool-loop edit"
                    return Proposal(
                        diff="",
                        summary=summary.splitlines()[0][:200],
                        rationale=result.text[:4000],
                        tokens=tokens,
                        cost_usd=cost,
                        transcript_path=str(transcript),
                    )
                commands = [
                    body
                    for lang, body in _FENCE.findall(result.text)
                    if (lang or "").lower() in ("bash", "sh")
                ]
                if len(commands) != 1:
                    observation = "Format error: reply with exactly one ```bash block, or SUBMIT when done."
                else:
                    out = session.exec(["bash", "-c", commands[0]], timeout_s=self.config.step_timeout_s)
                    observation = truncate(
                        f"exit code {out.exit_code}{' (timed out)' if out.timed_out else ''}\n{out.stdout}{out.stderr}",
                        self.config.max_output_chars,
                        keep="both",
                    )
                messages.append({"role": "user", "content": observation})
        raise ProposalFailed(f"the meta-agent did not SUBMIT within {self.config.max_steps} steps")

    def _proposal(self, text: str, result: ChatResult, transcript: Path) -> Proposal:
        first = next((line.strip("# ").strip() for line in text.splitlines() if line.strip()), "llm edit")
        return Proposal(
            diff="",
            summary=first[:200],
            rationale=truncate(text, 4000, keep="head"),
            tokens=result.prompt_tokens + result.completion_tokens,
            cost_usd=result.cost_usd,
            transcript_path=str(transcript),
        )
