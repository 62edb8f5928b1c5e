"""``llm``: the meta-agent. An LLM reads the parent's code and its failures and edits the code.

Two modes:

* ``diff`` (one shot): the model answers with edits in the format ``edit_format`` asks for (whole files,
  search/replace blocks or a unified diff; any of them is read, see ``edits``). An answer that does not
  apply is retried ``retries`` times with the error shown to the model; a reply cut off by ``max_tokens``
  or caught repeating itself is a named failure, never a corrupt child.
* ``tools`` (a tool loop, mini-swe-agent style): each model turn holds one fenced ``bash`` block, run in a
  sandbox session whose writable ``/agent`` is the workspace; the model ends with ``SUBMIT`` on a line of its
  own. Steps, tokens and output are bounded.

The prompt is fitted to the served model's context in tokens (``prompt.fit``); what was left out is named
in the transcript. Every proposal that does not become a child fails with a ``ProposalFailed`` whose
``kind`` classifies it. The model is reached from the host through an OpenAI-compatible client; commands
the model runs never see the network or any secret.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from metasearch.errors import ConfigError
from metasearch.llm.client import ChatResult, LLMError
from metasearch.llm.config import endpoint_configured
from metasearch.llm.service import LLMService, RemoteLLM
from metasearch.proposers import edits
from metasearch.proposers.base import ProposalContext, ProposalFailed
from metasearch.proposers.prompt import Fitted, code_listing, diagnosis, fit, lineage_summary, truncate
from metasearch.sandboxes.protocol import GIT_SAFE_ENV, Limits, Mount, RunSpec
from metasearch.types import Agent, Proposal

SYSTEM = (
    "You improve a software agent's design. The agent is a small code repository; it is run on benchmark tasks "
    "and graded by hidden tests you cannot see. Make one focused change that should raise its score. Keep the "
    "agent's entry points and manifest name intact; do not edit tests or protected files."
)
EDIT_INSTRUCTIONS = {
    "whole": (
        "Answer with a one-line summary of your change on the first line. Then write the path of the ONE file "
        "you change on a line of its own, followed by that file's complete new content in a fenced block, "
        'for example:\n\nknobs.json\n```json\n{"lr": 0.01}\n```'
    ),
    "search_replace": (
        "Answer with a one-line summary of your change on the first line. Then, for each change, write the "
        "file's path on a line of its own, then a block:\n\n<<<<<<< SEARCH\n(lines copied exactly from the "
        "file)\n=======\n(the lines that replace them)\n>>>>>>> REPLACE"
    ),
    "diff": (
        "Answer with a one-line summary on the first line, then your reasoning, then exactly one unified diff "
        "(git format, paths relative to the agent root, a/ and b/ prefixes) in a ```diff fenced block."
    ),
}
TOOLS_INSTRUCTIONS = (
    "Work in steps. Each reply holds your reasoning and exactly one ```bash fenced block; it runs in /agent (the "
    "agent's code, writable) and you get its output. Use cat/sed/python to view and edit files. When done, reply "
    "with a one-line summary after a line `SUBMIT` and no code block."
)
_FENCE = re.compile(r"```(\w+)?\n(.*?)```", re.DOTALL)
RETRY_NOTE_TOKENS = 200  # room kept in the context for the error a retry shows the model


class ChatModel(Protocol):
    def chat(self, messages: list[dict[str, str]], *, job_id: str | None = None, **kw: Any) -> ChatResult: ...


def _require_endpoint(llm: Any) -> None:
    if not isinstance(llm, LLMService | RemoteLLM) and (llm is None or not endpoint_configured(llm)):
        raise ConfigError(
            "llm.base_url: the llm proposer needs an OpenAI-compatible endpoint "
            "(llm.base_url, OPENAI_BASE_URL, or llm.serve)"
        )


class LLMProposer:
    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid")
        mode: Literal["diff", "tools"] = "diff"
        edit_format: Literal["whole", "search_replace", "diff"] = "search_replace"
        """What the one-shot prompt asks for (every format is read): see ``metasearch bench proposers``."""
        retries: int = Field(1, ge=0, le=5)
        """One-shot answers that do not apply are asked again this many times, with the error."""
        max_steps: int = Field(20, ge=1)
        context_chars: int = Field(60_000, ge=2_000)
        """The prompt's size before it is fitted to the served context (in tokens) as well."""
        context_tokens: int | None = Field(None, ge=256)
        """The model's context; unset: what the server reports (vLLM's ``max_model_len``)."""
        reply_tokens: int = Field(1024, ge=64)
        """``max_tokens`` of each reply, kept free in the context."""
        max_output_chars: int = Field(8_000, ge=500)
        step_timeout_s: float = Field(120, gt=0)
        allow_grader_files: bool = False
        """Show the meta-agent the hidden grader files of the parent's weakest tasks (off: never)."""
        temperature: float = Field(0.7, ge=0, le=2)
        frequency_penalty: float | None = Field(None, ge=-2, le=2)
        """Sent when set: small models loop less with a penalty (see ``metasearch bench proposers``)."""

    def __init__(
        self,
        config: Config,
        *,
        study_dir: Path,
        llm: Any = None,
        knobs_host: Any = None,
        model: ChatModel | None = None,
    ) -> None:
        # knobs_host: given to every proposer on a Ray worker; only knobs keeps state in the host actor.
        self.config = config
        self.study_dir = Path(study_dir)
        if model is None:
            _require_endpoint(llm)
        self._model = model
        self._llm = llm  # the study's LLMService (a config section when only checked)
        self._lock = threading.Lock()
        self._merge_system = False  # set when the served chat template refuses a system message

    def uses_model(self, job_id: str) -> bool:
        return True

    @property
    def model(self) -> ChatModel:
        """The study's (first) model, or the one this proposer was given."""
        return self.model_for(None)

    def model_for(self, name: str | None) -> ChatModel:
        """The chat model called ``name`` in ``llm.models`` (None: the first), or the one given."""
        with self._lock:
            if self._model is not None:
                return self._model
        if not isinstance(self._llm, LLMService | RemoteLLM):
            raise ConfigError("llm: the llm proposer was built without the study's LLM service")
        return self._llm.client_for(name)

    def prompt(
        self, parent: Agent, workspace: Path, context: ProposalContext, budget: int | None = None
    ) -> str:
        budget = budget or self.config.context_chars
        statements = dict(context.extra.get("task_statements", {}))
        return (
            f"## The benchmark\n{truncate(context.suite_description, budget // 10, keep='head')}\n\n"
            f"## How the parent did\n{diagnosis(context.parent_evaluations, statements, budget * 3 // 10)}\n"
            f"## Earlier attempts in this lineage (own mean score, change)\n"
            f"{lineage_summary(context.lineage, parent, context.lineage_scores, budget // 10)}\n"
            f"## The parent's code\n{code_listing(workspace, budget // 2, protected=context.protected)}"
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
        transcript = context.log_dir / "transcript.jsonl"
        mode = self.config.mode
        instructions = EDIT_INSTRUCTIONS[self.config.edit_format] if mode == "diff" else TOOLS_INSTRUCTIONS
        model = self.model_for(context.model)
        if context.model is not None:
            _log(transcript, {"model": context.model, "served": _served(model)})
        fitted = self._fit(lambda chars: self.prompt(parent, workspace, context, chars), instructions, model)
        _log(transcript, {"fit": fitted.as_record()})
        if mode == "diff":
            return self._one_shot(workspace, context, fitted, instructions, transcript, model)
        return self._tool_loop(workspace, context, fitted, transcript, model)

    def _messages(self, user: str) -> list[dict[str, str]]:
        if self._merge_system:
            return [{"role": "user", "content": f"{SYSTEM}\n\n{user}"}]
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]

    def _fit(self, build: Any, instructions: str, model: ChatModel) -> Fitted:
        context = self.config.context_tokens or _call(model, "context_tokens")
        room = None if context is None else context - self.config.reply_tokens - RETRY_NOTE_TOKENS
        if room is not None and room < 256:
            raise ConfigError(
                f"proposer.reply_tokens: {self.config.reply_tokens} leaves {room} of the model's {context} "
                "context tokens for the prompt; lower it or serve a longer context (llm.serve.max_model_len)"
            )

        def count(prompt: str) -> int | None:
            return _call(model, "count_tokens", self._messages(f"{prompt}\n\n{instructions}"))

        return fit(build, count, chars=self.config.context_chars, room=room, context=context)

    def _chat(
        self, messages: list[dict[str, str]], context: ProposalContext, transcript: Path, model: ChatModel
    ) -> ChatResult:
        kw: dict[str, Any] = {"temperature": self.config.temperature, "max_tokens": self.config.reply_tokens}
        if self.config.frequency_penalty is not None:
            kw["frequency_penalty"] = self.config.frequency_penalty
        try:
            result = model.chat(messages, job_id=context.job_id, **kw)
        except LLMError as exc:
            if not _refuses_system(exc) or self._merge_system or messages[0]["role"] != "system":
                raise ProposalFailed(f"the endpoint refused the request: {exc}", kind="llm_refused") from exc
            self._merge_system = True  # e.g. a template that raises on a system role: fold it in, once
            messages = [{"role": "user", "content": f"{SYSTEM}\n\n{messages[1]['content']}"}, *messages[2:]]
            result = model.chat(messages, job_id=context.job_id, **kw)
        _log(
            transcript,
            {"messages": messages[-2:], "reply": result.text, "finish_reason": result.finish_reason,
             "prompt_tokens": result.prompt_tokens, "completion_tokens": result.completion_tokens},
        )  # fmt: skip
        return result

    def _one_shot(
        self,
        workspace: Path,
        context: ProposalContext,
        fitted: Fitted,
        instructions: str,
        transcript: Path,
        model: ChatModel,
    ) -> Proposal:
        files = edits.workspace_files(workspace) - set(context.protected_files(workspace))
        user = f"{fitted.prompt}\n\n{instructions}"
        tokens, cost, last = 0, 0.0, None
        for attempt in range(1 + self.config.retries):
            result = self._chat(self._messages(user), context, transcript, model)
            tokens += result.prompt_tokens + result.completion_tokens
            cost += result.cost_usd
            try:
                changed = _apply_reply(workspace, result, files)
            except edits.EditError as exc:
                last = exc
                _log(transcript, {"attempt": attempt, "failure": exc.kind, "error": str(exc)})
                user = (
                    f"{fitted.prompt}\n\nYour previous answer could not be used: {truncate(str(exc), 600)}\n"
                    f"Try again. {instructions}"
                )
                continue
            _log(transcript, {"attempt": attempt, "changed": changed})
            return self._proposal(result.text, tokens, cost, transcript)
        assert last is not None
        answers = 1 + self.config.retries
        raise ProposalFailed(
            f"{last} ({answers} answer{'s' if answers > 1 else ''})", kind=last.kind, tokens=tokens
        )

    def _tool_loop(
        self, workspace: Path, context: ProposalContext, fitted: Fitted, transcript: Path, model: ChatModel
    ) -> Proposal:
        messages = self._messages(f"{fitted.prompt}\n\n{TOOLS_INSTRUCTIONS}")
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
                result = self._chat(messages, context, transcript, model)
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
        raise ProposalFailed(
            f"the meta-agent did not SUBMIT within {self.config.max_steps} steps",
            kind="tool_loop",
            tokens=tokens,
        )

    def _proposal(self, text: str, tokens: int, cost: float, transcript: Path) -> Proposal:
        first = next((line.strip("# ").strip() for line in text.splitlines() if line.strip()), "llm edit")
        return Proposal(
            diff="",
            summary=first[:200],
            rationale=truncate(text, 4000, keep="head"),
            tokens=tokens,
            cost_usd=cost,
            transcript_path=str(transcript),
        )


def _apply_reply(workspace: Path, result: ChatResult, files: set[str]) -> list[str]:
    """Parse and apply one reply; EditError (classified) when it cannot become a child."""
    cut = result.finish_reason == "length"
    looping = repetition(result.text)
    try:
        found, diffs = edits.parse(result.text, files)
    except edits.EditError as exc:
        if cut:
            kind = "repetition" if looping else "truncated"
            raise edits.EditError(
                kind, f"the reply hit max_tokens ({looping or 'cut mid-answer'}) before an edit was complete"
            ) from exc
        raise
    if cut and looping:
        raise edits.EditError("repetition", f"the reply hit max_tokens while {looping}")
    return edits.apply(workspace, found, diffs)


def repetition(text: str, *, min_span: int = 120) -> str | None:
    """A description of the loop ``text`` ends in (the same line or passage over and over), or None."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    tail = lines[-12:]
    if len(tail) >= 8 and len(set(tail)) == 1:
        return f"repeating the line {tail[0][:60]!r}"
    body = text.rstrip()
    for period in range(8, 400):
        if 3 * period > len(body):
            break
        chunk = body[-period:]
        if 3 * period >= min_span and body[-2 * period : -period] == chunk == body[-3 * period : -2 * period]:
            return f"repeating a {period}-character passage"
    return None


def _refuses_system(exc: LLMError) -> bool:
    text = str(exc).lower()
    return "system" in text and ("role" in text or "template" in text)


def _call(model: Any, name: str, *args: Any) -> Any:
    """An optional method of the chat model (a test double may lack it): None when absent or failing."""
    method = getattr(model, name, None)
    if not callable(method):
        return None
    try:
        return method(*args)
    except Exception:
        return None


def _served(model: Any) -> str | None:
    """The model's name at its endpoint, or None when it cannot tell now (the first call will say why)."""
    try:
        name = getattr(model, "model", None)
    except Exception:
        return None
    return name if isinstance(name, str) else None


def _log(transcript: Path, entry: dict[str, Any]) -> None:
    with transcript.open("a") as f:
        f.write(json.dumps(entry) + "\n")
