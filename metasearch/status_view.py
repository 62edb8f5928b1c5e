"""``metasearch status`` for a person: aligned tables of the budget, agents by state, the best-belief agent
and the jobs running now with their age. Read-only (journal replay, no locks); ``status --json`` is the
stable interface for tools (``report.status_of``) and this module never changes it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from metasearch.archive.recovery import live_owner
from metasearch.report import StudyView, best_of, failure_kinds, load_view, status_of
from metasearch.types import Evaluate, Expand

LEASE_TIMEOUT_S = 30.0  # as `metasearch resume`: a process silent for longer no longer runs the study
STATES = ("flagged", "being evaluated", "evaluated", "not yet evaluated")


def print_status(study_dir: Path, out: Console, *, now: float | None = None) -> None:
    view = load_view(study_dir)
    best = view.best()
    data = status_of(view, study_dir, best)
    out.print(status_renderable(view, data, best_of(view, best), Path(study_dir), now or time.time()))


def status_renderable(
    view: StudyView, data: dict[str, Any], best: dict[str, Any], study_dir: Path, now: float
) -> Group:
    parts: list[Any] = [Text.from_markup(f"[bold]study {data['study']}[/]: {_run_state(view, study_dir)}")]
    parts += [Text(""), _budget_table(data["budget"]), Text(""), _agents_table(view), Text("")]
    parts.append(Text(_best_line(best)))
    if data.get("models"):
        parts += [Text(""), models_table(data["models"])]
    if data.get("provenance"):  # the conditions the scores were made under (metasearch/provenance.py)
        parts += [Text(""), _provenance_table(data["provenance"])]
    if view.index.open_jobs:
        parts += [Text(""), _jobs_table(view, now)]
    return Group(*parts)


def models_table(tallies: dict[str, dict[str, Any]]) -> Table:
    """Per meta-agent model: expansions, children admitted and better than their parent, mean gain,
    positive gain per million tokens (what the bandit weighs), tokens, cost."""
    table = Table(show_edge=False)
    table.add_column("model")
    columns = ("expansions", "children", "better", "mean gain", "gain / Mtok", "tokens", "cost")
    for column in columns:
        table.add_column(column, justify="right")
    for name, t in tallies.items():
        running = f" (+{t['running']} running)" if t.get("running") else ""
        table.add_row(
            name,
            f"{t['expansions']}{running}",
            str(t["children"]),
            str(t["better"]),
            "-" if t["mean_gain"] is None else f"{t['mean_gain']:+.3f}",
            "-" if t["gain_per_mtok"] is None else f"{t['gain_per_mtok']:.3f}",
            str(t["tokens"]),
            _num(t["cost_usd"], money=True),
        )
    return table


def _provenance_table(headline: dict[str, Any]) -> Table:
    table = Table(show_edge=False)
    table.add_column("conditions")
    table.add_column("")
    for key, value in headline.items():
        table.add_row(key, str(value))
    return table


def _run_state(view: StudyView, study_dir: Path) -> str:
    owner = live_owner(view.index, LEASE_TIMEOUT_S)
    if owner is not None:
        host, _, rest = owner.partition(":")
        return f"running (process {rest.split(':')[0]} on {host})"
    if view.index.finished:
        return f"finished: {view.index.finished}"
    if view.index.open_jobs:
        return f"stopped with jobs open (crash or kill); `metasearch resume {study_dir}` requeues them"
    return f"not running; `metasearch resume {study_dir}` continues it"


def _budget_table(budget: dict[str, list[Any]]) -> Table:
    table = Table(show_edge=False)
    table.add_column("budget")
    for column in ("used", "limit", "used %"):
        table.add_column(column, justify="right")
    for name, (used, limit) in budget.items():
        if name == "wall_time_s":
            table.add_row(name, "-", _num(limit), "per run" if limit is not None else "-")
            continue
        share = "-" if not limit else f"{100.0 * used / limit:.1f}%"
        money = name == "cost_usd"
        table.add_row(name, _num(used, money), "unlimited" if limit is None else _num(limit, money), share)
    return table


def agent_states(view: StudyView) -> dict[str, int]:
    """Agents by state, each in the first that applies: flagged (an evaluation carries integrity flags),
    being evaluated (an evaluation job is open), evaluated, not yet evaluated."""
    flagged = {ev.agent_id for ev in view.index.evaluations.values() if ev.flags}
    evaluated = {ev.agent_id for ev in view.index.evaluations.values()}
    busy = {job.agent_id for job in view.index.open_jobs.values() if isinstance(job, Evaluate)}
    counts = dict.fromkeys(STATES, 0)
    for agent_id in view.index.agents:
        if agent_id in flagged:
            counts["flagged"] += 1
        elif agent_id in busy:
            counts["being evaluated"] += 1
        elif agent_id in evaluated:
            counts["evaluated"] += 1
        else:
            counts["not yet evaluated"] += 1
    return counts


def _agents_table(view: StudyView) -> Table:
    table = Table(show_edge=False)
    table.add_column("agents by state")
    table.add_column("count", justify="right")
    for state, count in agent_states(view).items():
        table.add_row(state, str(count))
    table.add_row("[bold]all[/]", f"[bold]{len(view.index.agents)}[/]")
    table.add_row("failed expansions", str(len(view.index.failed_expansions)))
    for kind, count in failure_kinds(view.index.failed_expansions).items():
        table.add_row(f"  {kind}", str(count))
    table.add_row("evaluations recorded", str(len(view.index.evaluations)))
    for task_id, reason in view.index.retired_tasks.items():  # cannot be graded here (errors.TaskUnfit)
        table.add_row(f"retired task {task_id}", (reason.splitlines() or [""])[0][:80])
    return table


def _best_line(best: dict[str, Any]) -> str:
    left_out = f"; left out for integrity flags: {', '.join(best['flagged'])}" if best["flagged"] else ""
    if best["agent_id"] is None:
        return f"best-belief: none yet (no unflagged agent evaluated){left_out}"
    seed = "n/a" if best["seed_mean"] is None else f"{best['seed_mean']:.3f}"
    return (
        f"best-belief: {best['agent_id']} ({best['branch']} @ {best['commit'][:10]}) mean {best['mean']:.3f} "
        f"over {best['trials']} tasks, lower bound {best['lower_bound']:.3f}, seed on the same tasks {seed}"
        f"{left_out}"
    )


def _jobs_table(view: StudyView, now: float) -> Table:
    table = Table(title="running jobs", title_justify="left", show_edge=False)
    for column in ("job", "kind", "what", "process", "age"):
        table.add_column(column, justify="right" if column == "age" else "left")
    jobs = sorted(view.index.open_jobs.values(), key=lambda j: view.index.job_started_at.get(j.job_id, now))
    for job in jobs:
        what = f"child of {job.parent_id}" if isinstance(job, Expand) else f"{job.agent_id} on {job.task_id}"
        host, _, rest = view.index.job_owner.get(job.job_id, "").partition(":")
        started = view.index.job_started_at.get(job.job_id)
        age = "-" if started is None else duration(now - started)
        table.add_row(job.job_id, job.kind, what, f"{rest.split(':')[0]}@{host}" if host else "-", age)
    return table


def duration(seconds: float) -> str:
    """``42s``, ``3m 05s``, ``2h 07m``, ``3d 04h``."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86400}d {s % 86400 // 3600:02d}h"


def _num(value: Any, money: bool = False) -> str:
    if value is None:
        return "-"
    if money:
        return f"${value:,.2f}"
    if isinstance(value, float):
        return f"{value:.0f}" if value.is_integer() else f"{value:.2f}"
    return str(value)
