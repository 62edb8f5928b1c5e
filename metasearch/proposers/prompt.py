"""Building the meta-agent's prompt within a character budget.

Sections, in order of priority: the suite's description, the parent's failed evaluations (task statement,
the agent's own log excerpt, score and flags), the lineage's earlier attempts with score changes, and the
parent's code. Long parts are truncated with explicit markers so the model knows something is missing.
``fit`` shrinks the character budget until the prompt fits the served model's context in tokens, and names
what was left out.
Hidden tests and grader files never appear: evaluations contribute only what the agent itself printed and
the grade's one-line reason.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metasearch.types import Agent, Evaluation

TEXT_SUFFIXES = {".py", ".toml", ".json", ".md", ".txt", ".yaml", ".yml", ".cfg", ".sh", ".ini"}
SKIP_PARTS = {".git", "__pycache__", ".pytest_cache", "transcripts"}


def truncate(text: str, limit: int, *, keep: str = "tail") -> str:
    """``text`` cut to ``limit`` characters with a marker saying how much was dropped."""
    if len(text) <= limit:
        return text
    dropped = len(text) - limit
    marker = f"\n[... {dropped} characters truncated ...]\n"
    if keep == "head":
        return text[:limit] + marker
    if keep == "both":
        half = limit // 2
        return text[:half] + marker + text[-half:]
    return marker + text[-limit:]


CHARS_PER_TOKEN = 3.0  # an estimate on the safe side for code, when the server cannot count
OMITTED = re.compile(r"^--- (\S+)\n\[file omitted|\[\.\.\. (\d+) characters truncated", re.MULTILINE)


@dataclass(frozen=True)
class Fitted:
    """A prompt fitted to the context: its size in characters and tokens (``counted`` says whether the
    server counted them), the model's context, and what was left out to fit."""

    prompt: str
    chars: int
    tokens: int
    counted: bool
    context: int | None
    left_out: list[str] = field(default_factory=list)

    def as_record(self) -> dict[str, Any]:
        return {
            "chars": self.chars,
            "prompt_tokens": self.tokens,
            "counted_by_server": self.counted,
            "context_tokens": self.context,
            "left_out": self.left_out,
        }


def fit(
    build: Callable[[int], str],
    count: Callable[[str], int | None],
    *,
    chars: int,
    room: int | None,
    context: int | None,
) -> Fitted:
    """The prompt ``build(budget)`` for the largest budget (at most ``chars``) whose tokens fit ``room``:
    counted by ``count`` (the server's tokenizer, chat template included) or estimated when it cannot."""
    budget = chars
    for _ in range(6):
        prompt = build(budget)
        counted = count(prompt)
        tokens = counted if counted is not None else int(len(prompt) / CHARS_PER_TOKEN) + 1
        if room is None or tokens <= room:
            return Fitted(prompt, budget, tokens, counted is not None, context, left_out(prompt))
        budget = max(200, int(budget * room / tokens * 0.9))
    return Fitted(prompt, budget, tokens, counted is not None, context, left_out(prompt))


def left_out(prompt: str) -> list[str]:
    """What a fitted prompt says it left out: omitted files and truncated passages."""
    found = []
    for match in OMITTED.finditer(prompt):
        found.append(f"file {match.group(1)}" if match.group(1) else f"{match.group(2)} characters")
    return found


def code_listing(root: Path, budget: int, *, protected: Sequence[str] = ()) -> str:
    """The agent's text files, each fenced and labelled with its path, within ``budget`` characters; files
    matching ``protected`` (which no edit may touch) are named but not shown."""
    parts: list[str] = []
    used = 0
    files = sorted(
        p for p in root.rglob("*") if p.is_file() and not SKIP_PARTS.intersection(p.relative_to(root).parts)
    )
    for path in files:
        rel = path.relative_to(root).as_posix()
        if path.suffix not in TEXT_SUFFIXES and path.name not in {"Makefile", "Dockerfile"}:
            continue
        if any(fnmatch.fnmatch(rel, pattern) for pattern in protected):
            parts.append(f"--- {rel} (protected: not shown, not editable)\n")
            continue
        try:
            body = path.read_text()
        except UnicodeDecodeError:
            continue
        chunk = f"--- {rel}\n```\n{body}\n```\n"
        if used + len(chunk) > budget:
            parts.append(
                f"--- {rel}\n[file omitted: the code listing reached its budget of {budget} characters]\n"
            )
            continue
        parts.append(chunk)
        used += len(chunk)
    return "".join(parts)


def diagnosis(
    evaluations: Sequence[Evaluation], statements: Mapping[str, str], budget: int, *, per_log: int = 2500
) -> str:
    """The parent's weakest evaluations first: statement, score, flags, reason and its own log tail."""
    if not evaluations:
        return "The parent has no evaluations yet.\n"
    worst = sorted(evaluations, key=lambda ev: ev.score)
    mean = sum(ev.score for ev in evaluations) / len(evaluations)
    parts = [f"The parent scored a mean of {mean:.3f} over {len(evaluations)} tasks.\n"]
    used = len(parts[0])
    for ev in worst:
        if ev.score >= 1.0:
            break
        chunk = (
            f"\n### task {ev.task_id}: score {ev.score:.3f}"
            + (f", flags {', '.join(ev.flags)}" if ev.flags else "")
            + "\n"
            + f"Statement: {truncate(statements.get(ev.task_id, '(not available)'), 1200, keep='head')}\n"
            + (
                f"Reason: {truncate(ev.error.splitlines()[0] if ev.error else '', 300, keep='head')}\n"
                if ev.error
                else ""
            )
            + f"Agent log (its own output, tail):\n{truncate(_agent_log(ev), per_log)}\n"
        )
        if used + len(chunk) > budget:
            parts.append(
                f"\n[... {len(worst)} evaluations in all; the rest omitted for the context budget ...]\n"
            )
            break
        parts.append(chunk)
        used += len(chunk)
    return "".join(parts)


def _agent_log(ev: Evaluation) -> str:
    if not ev.log_path:
        return "(no log)"
    path = Path(ev.log_path) / "agent.log"
    try:
        return path.read_text(errors="replace")
    except OSError:
        return "(no log)"


def lineage_summary(lineage: Iterable[Agent], parent: Agent, scores: Mapping[str, float], budget: int) -> str:
    """Earlier attempts along the lineage with their score changes, oldest first."""
    lines: list[str] = []
    previous: float | None = None
    for agent in [*lineage, parent]:
        score = scores.get(agent.id)
        delta = "" if score is None or previous is None else f" ({score - previous:+.3f})"
        shown = "unscored" if score is None else f"{score:.3f}"
        lines.append(f"- {agent.id}: {shown}{delta}  {str(agent.meta.get('summary', 'seed'))[:160]}")
        previous = score if score is not None else previous
    return truncate("\n".join(lines), budget, keep="tail") + "\n"
