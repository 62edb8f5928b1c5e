"""Read-only views of a study for ``status``, ``best`` and ``tree`` (journal replay; no locks taken)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from metasearch.archive import ArchiveIndex, read_index
from metasearch.config import ResolvedConfig, load_config_data
from metasearch.drift import baseline_record
from metasearch.errors import ConfigError
from metasearch.llm.config import endpoint_configured
from metasearch.provenance import headline
from metasearch.schedulers.base import SearchState
from metasearch.schedulers.cmp import SearchTree, replay_results
from metasearch.schedulers.final import agent_stats
from metasearch.types import Usage

if TYPE_CHECKING:
    from metasearch.study import Study


@dataclass(frozen=True)
class StudyView:
    resolved: ResolvedConfig
    index: ArchiveIndex
    tree: SearchTree
    usage: Usage

    def state(self) -> SearchState:
        return SearchState(
            tree=self.tree,
            tasks=tuple(sorted({ev.task_id for ev in self.index.evaluations.values()})),
            budget=self.resolved.config.budget.to_budget(),
            usage=self.usage,
            expansions_in_flight=0,
            evaluations_in_flight=0,
        )

    def best(self) -> str | None:
        scheduler = self.resolved.plugins["scheduler"].create()
        result: str | None = scheduler.select_final(self.state())
        return result


def load_view(study_dir: Path) -> StudyView:
    config_path = Path(study_dir) / "config.yaml"
    if not config_path.is_file():
        raise ConfigError(f"{study_dir}: not a study directory (no config.yaml)")
    resolved = load_config_data(yaml.safe_load(config_path.read_text()) or {})
    index = read_index(Path(study_dir))
    tree = replay_results(
        [(a.id, a.parent_id) for a in index.agents.values()],
        [(ev.agent_id, ev.task_id, ev.score, ev.flags) for ev in index.evaluations.values()],
    )
    free_seeds = resolved.config.study.seed_evaluations == "all"
    evaluations = sum(
        1
        for ev in index.evaluations.values()
        if not (free_seeds and index.agents[ev.agent_id].parent_id is None)
    )
    expansions = len(index.failed_expansions) + sum(
        1 for a in index.agents.values() if a.parent_id is not None
    )
    usage = Usage(
        evaluations=evaluations, expansions=expansions, tokens=index.tokens, cost_usd=index.cost_usd
    )
    return StudyView(resolved, index, tree, usage)


def status_dict(study_dir: Path) -> dict[str, Any]:
    return status_of(load_view(study_dir), Path(study_dir))


def status_of(view: StudyView, study_dir: Path, best: str | None = None) -> dict[str, Any]:
    """``status --json`` (a stable interface: docs/commands.md documents its fields); ``best`` when known already."""
    budget = view.resolved.config.budget
    return {
        "study": Path(study_dir).name,
        "agents": len(view.index.agents),
        "evaluations": len(view.index.evaluations),
        "expansions": view.usage.expansions,
        "expansions_failed": len(view.index.failed_expansions),
        "running": len(view.index.open_jobs),
        "budget": {
            "evaluations": [view.usage.evaluations, budget.evaluations],
            "expansions": [view.usage.expansions, budget.expansions],
            "tokens": [view.usage.tokens, budget.tokens],
            "cost_usd": [view.usage.cost_usd, budget.cost_usd],
            "wall_time_s": [None, budget.wall_time_s],
        },
        "best": best if best is not None else view.best(),
        "finished": view.index.finished,
        "provenance": _provenance_headline(Path(study_dir), view.index),
        "retired_tasks": dict(view.index.retired_tasks),  # cannot be graded here (errors.TaskUnfit)
        "expansions_failed_by_kind": failure_kinds(view.index.failed_expansions),
        "models": model_tallies(view),
    }


def model_tallies(view: StudyView) -> dict[str, dict[str, Any]]:
    """Per meta-agent model (``llm.models``, or the one model): what its expansions spent and earned
    (``archive.tally.ModelLedger.tallies``); empty when the study has no LLM and chose none."""
    section = view.resolved.config.llm
    names = [name for name, _ in section.arms()] if endpoint_configured(section) else []
    return view.index.models.tallies(names) if names or view.index.models.jobs else {}


def failure_kinds(failed: list[dict[str, Any]]) -> dict[str, int]:
    """Failed expansions counted by class, most frequent first."""
    counts: dict[str, int] = {}
    for f in failed:
        kind = str(f.get("kind", "other"))
        counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _provenance_headline(study_dir: Path, index: ArchiveIndex) -> dict[str, Any] | None:
    """The record in force (after accepted drift) in one line each: revision, image, model, suite."""
    found = headline(baseline_record(study_dir, index.drift))
    if found is not None:
        found["drift_accepted"] = len(index.drift)
    return found


def best_dict(study_dir: Path, *, study: Study | None = None) -> dict[str, Any]:
    """The best-belief agent with its statistics and the seed's mean on the same tasks; ``flagged``
    lists the agents left out because an evaluation of theirs carries integrity flags."""
    view = load_view(study_dir)
    return best_of(view, study.best() if study is not None else view.best())


def best_of(view: StudyView, agent_id: str | None) -> dict[str, Any]:
    """``best_dict`` for an agent chosen already (``view.best()``), without reading the study again."""
    flagged = sorted({ev.agent_id for ev in view.index.evaluations.values() if ev.flags})
    empty: dict[str, Any] = dict.fromkeys(
        ("agent_id", "commit", "branch", "mean", "trials", "lower_bound", "seed_mean")
    )
    if agent_id is None:
        return {**empty, "flagged": flagged}
    agent = view.index.agents[agent_id]
    stats = agent_stats(view.tree, agent_id, epsilon=_epsilon(view))
    own = {ev.task_id: ev.score for ev in view.index.evaluations.values() if ev.agent_id == agent_id}
    root = agent_id
    while view.index.agents[root].parent_id is not None:
        root = view.index.agents[root].parent_id  # type: ignore[assignment]
    seed_scores = [
        ev.score for ev in view.index.evaluations.values() if ev.agent_id == root and ev.task_id in own
    ]
    return {
        "agent_id": agent_id,
        "commit": agent.commit,
        "branch": agent.branch,
        "mean": stats.mean,
        "trials": stats.trials,
        "lower_bound": stats.lower_bound,
        "seed_mean": sum(seed_scores) / len(seed_scores) if seed_scores else None,
        "flagged": flagged,
    }


def _epsilon(view: StudyView) -> float:
    return float(getattr(view.resolved.plugins["scheduler"].config, "epsilon", 0.01))


def tree_text(study_dir: Path) -> str:
    view = load_view(study_dir)
    best = view.best()
    children: dict[str | None, list[str]] = {}
    for agent in view.index.agents.values():
        children.setdefault(agent.parent_id, []).append(agent.id)
    failed: dict[str, int] = {}
    for f in view.index.failed_expansions:
        failed[f["parent_id"]] = failed.get(f["parent_id"], 0) + 1
    lines: list[str] = []

    def walk(agent_id: str, prefix: str, last: bool, top: bool) -> None:
        s, n = view.tree.own(agent_id)
        cs, cn = view.tree.clade(agent_id)
        agent = view.index.agents[agent_id]
        label = f"{agent_id}  own {s / n:.3f} ({n})" if n else f"{agent_id}  own - (0)"
        label += f"  clade {cs / cn:.3f} ({cn})" if cn else ""
        if failed.get(agent_id):
            label += f"  failed expansions {failed[agent_id]}"
        if agent_id == best:
            label += "  <- best-belief"
        summary = str(agent.meta.get("summary", ""))[:60]
        connector = "" if top else ("└── " if last else "├── ")
        lines.append(f"{prefix}{connector}{label}  {summary}".rstrip())
        kids = children.get(agent_id, [])
        for i, kid in enumerate(kids):
            walk(kid, prefix + ("" if top else ("    " if last else "│   ")), i == len(kids) - 1, False)

    for root in children.get(None, []):
        walk(root, "", True, True)
    return "\n".join(lines) if lines else "(empty study)"


def print_bench_rows(rows: list[dict[str, Any]]) -> None:
    """A benchmark's rows (measure, baseline, value, ratio, target) as a table on the terminal."""
    from rich.console import Console
    from rich.table import Table

    table = Table("measure", "baseline", "value", "ratio", "target")
    for r in rows:
        cells = ["-" if r[k] is None else f"{r[k]:.3f}" for k in ("baseline", "value", "ratio")]
        table.add_row(str(r["measure"]), *cells, str(r["target"]))
    Console(width=160).print(table)
