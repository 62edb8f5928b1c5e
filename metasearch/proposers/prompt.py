"""Building the meta-agent's prompt within a character budget.

Sections, in order of priority: the suite's description, the parent's failed evaluations (task statement,
the agent's own log excerpt, score and flags), the lineage's earlier attempts with score changes, and the
parent's code. Long parts are truncated with explicit markers so the model knows something is missing.
Hidden tests and grader files never appear: evaluations contribute only what the agent itself printed and
the grade's one-line reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

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


def code_listing(root: Path, budget: int) -> str:
    """The agent's text files, each fenced and labelled with its path, within ``budget`` characters."""
    parts: list[str] = []
    used = 0
    files = sorted(
        p for p in root.rglob("*") if p.is_file() and not SKIP_PARTS.intersection(p.relative_to(root).parts)
    )
    for path in files:
        rel = path.relative_to(root).as_posix()
        if path.suffix not in TEXT_SUFFIXES and path.name not in {"Makefile", "Dockerfile"}:
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
