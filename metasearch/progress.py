"""Terminal output of a run: the dry-run plan, a live progress bar and table, and the closing summary."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from metasearch import launch
from metasearch.errors import ConfigError
from metasearch.events import (
    AgentAdded,
    EvaluationRecorded,
    Event,
    ExpansionFailed,
    JobAbandoned,
    StudyFinished,
    TaskRetired,
)
from metasearch.machine import ray_cluster
from metasearch.report import best_dict
from metasearch.sandboxes.images import resolve

if TYPE_CHECKING:
    from metasearch.config import ResolvedConfig
    from metasearch.launch import Launched
    from metasearch.study import Study


class LiveProgress:
    """A study callback that keeps a progress bar and a small live table up to date."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[note]}"),
            console=console,
        )
        self._task = self._progress.add_task("evaluations", total=None, note="")
        self._lock = threading.Lock()
        self._rows: dict[str, Any] = {}
        self._live: Live | None = None

    def callback(self, study: Study, event: Event) -> None:
        with self._lock:
            if isinstance(
                event,
                EvaluationRecorded
                | AgentAdded
                | ExpansionFailed
                | JobAbandoned
                | TaskRetired
                | StudyFinished,
            ):
                self._refresh(study)
            if isinstance(event, ExpansionFailed):
                self._rows["last failure"] = event.reason.splitlines()[0][:100]
            if isinstance(event, JobAbandoned):
                self._rows["last infra error"] = event.reason.splitlines()[0][:100]
            if isinstance(event, TaskRetired):
                self._rows["tasks retired"] = len(study.archive.index.retired_tasks)

    def _refresh(self, study: Study) -> None:
        usage = study.usage()
        total = study.budget.evaluations
        self._progress.update(
            self._task,
            completed=usage.evaluations,
            total=total,
            note=f"agents {len(study.archive.index.agents)}",
        )
        best = study.best()
        stats = _agent_stats(study, best) if best else None
        self._rows.update(
            {
                "agents": len(study.archive.index.agents),
                "evaluations (all)": len(study.archive.index.evaluations),
                "expansions (failed)": f"{usage.expansions} ({len(study.archive.index.failed_expansions)})",
                "running": len(study.in_flight),
                "best-belief": f"{best}  mean {stats[0]:.3f} over {stats[1]}" if stats else "-",
            }
        )
        if self._live is not None:
            self._live.update(self._render())

    def _render(self) -> Group:
        table = Table(show_header=False, box=None, pad_edge=False)
        for key, value in self._rows.items():
            table.add_row(f"[bold]{key}[/]", str(value))
        return Group(self._progress, table)

    @contextmanager
    def live(self, study: Study) -> Iterator[None]:
        with Live(self._render(), console=self.console, refresh_per_second=4, transient=False) as live:
            self._live = live
            with self._lock:
                self._refresh(study)
            try:
                yield
            finally:
                self._live = None


def _agent_stats(study: Study, agent_id: str) -> tuple[float, int] | None:
    scores = [ev.score for ev in study.archive.index.evaluations.values() if ev.agent_id == agent_id]
    return (sum(scores) / len(scores), len(scores)) if scores else None


def print_plan(resolved: ResolvedConfig, study_dir: Path, out: Console) -> ConfigError | None:
    """What a run would do, without starting anything (the ``--dry-run`` output)."""
    cfg = resolved.config
    table = Table(title=f"plan for study {study_dir}", show_header=False)
    seeds = []
    for name in cfg.study.seeds:
        try:
            seeds.append(str(launch.resolve_seed(name)))
        except ConfigError:
            seeds.append(f"{name} [yellow](not found)[/]")
    table.add_row("seeds", ", ".join(seeds))
    try:  # data and harnesses live on the machine that runs the study: the readiness checks report them
        suite = resolved.plugins["suite"].create()
        tasks = list(suite.tasks())
        shown = ", ".join(t.id for t in tasks[:6]) + (" …" if len(tasks) > 6 else "")
        note = suite.plan_note()  # e.g. which device a suite grades on
        detail = f"; {note}" if note else ""
        table.add_row("suite", f"{suite.name} ({len(tasks)} tasks: {shown}{detail})")
    except ConfigError:
        table.add_row("suite", f"{cfg.suite.name} {cfg.suite.options()} [yellow](not ready here)[/]")
    table.add_row("scheduler", f"{cfg.scheduler.name} {resolved.plugins['scheduler'].config.model_dump()}")
    table.add_row("proposer", f"{cfg.proposer.name} {resolved.plugins['proposer'].config.model_dump()}")
    table.add_row(
        "budget", ", ".join(f"{k}={v}" for k, v in cfg.budget.model_dump().items() if v is not None)
    )
    table.add_row("workers", str(cfg.study.workers))
    image = resolve(cfg.sandbox.image)
    table.add_row(
        "sandbox", f"{cfg.sandbox.name} (image {image}, {cfg.sandbox.cpus} CPU, {cfg.sandbox.memory_mb} MB)"
    )
    kept = cfg.llm.served_gpus()
    reserved = f"; GPUs {', '.join(kept)} kept for the model server" if kept else ""
    table.add_row("GPUs", f"sandboxes: {cfg.sandbox.gpus} (share {cfg.sandbox.gpu_share}){reserved}")
    arms = cfg.llm.arms()
    for name, arm in arms:
        serve = arm.serve
        llm = (
            f"vLLM serving {serve.model} on GPUs {serve.gpus} (tp={serve.tensor_parallel_size})"
            if serve
            else (arm.base_url or "none")
        )
        table.add_row("LLM" if len(arms) == 1 else f"LLM {name}", llm)
    if len(arms) > 1:
        table.add_row("LLM choice", f"{cfg.llm.choose} over {len(arms)} models")
    table.add_row(
        "tracking",
        "MLflow " + (cfg.tracking.mlflow.tracking_uri or f"sqlite:///{study_dir}/mlflow.db")
        if cfg.tracking.mlflow.enabled
        else "off",
    )
    cluster_error = _executor_row(resolved, table)
    out.print(table)
    return cluster_error


def _executor_row(resolved: ResolvedConfig, table: Table) -> ConfigError | None:
    """With Ray: join the cluster and check it can hold each kind of job (the error, if it cannot)."""
    executor = resolved.config.executor
    if executor.name != "ray":
        table.add_row("executor", f"{executor.name} ({resolved.config.study.workers} worker threads)")
        return None

    asks = "; ".join(
        f"{kind} {', '.join(f'{k}={v:g}' for k, v in ask.items() if v)}"
        for kind, ask in executor.requests().items()
    )
    if ray_cluster(executor.address).state != "ok":  # readiness names it; joining would only wait
        table.add_row("executor", f"ray at {executor.address}: not answering; per job: {asks}")
        return None
    try:
        total = launch.preflight_executor(resolved) or {}
    except ConfigError as exc:
        table.add_row("executor", f"ray at {executor.address or 'a local instance'}: [red]{exc}[/]")
        return exc
    import ray

    nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
    shown = ", ".join(
        f"{k}={v:g}" for k, v in sorted(total.items()) if not k.startswith(("node:", "memory", "object"))
    )
    table.add_row(
        "executor",
        f"ray at {executor.address or 'a local instance'}: {nodes} nodes ({shown}); per job: {asks}",
    )
    return None


def print_summary(launched: Launched, elapsed_s: float, out: Console) -> None:
    study = launched.study
    summary = study.summary()
    best = best_dict(launched.archive.root, study=study)
    table = Table(title=f"study {summary['study']} finished: {study.stop_reason}", show_header=False)
    if best["agent_id"]:
        table.add_row("best-belief agent", f"{best['agent_id']} ({best['branch']} @ {best['commit'][:10]})")
        seed = "n/a" if best["seed_mean"] is None else f"{best['seed_mean']:.3f}"
        table.add_row(
            "score", f"{best['mean']:.3f} over {best['trials']} tasks (seed on the same tasks: {seed})"
        )
    table.add_row("tree", f"{summary['agents']} agents, {summary['expansions_failed']} failed expansions")
    table.add_row("evaluations", str(summary["evaluations"]))
    table.add_row("time", f"{elapsed_s:.1f} s")
    root = launched.archive.root
    table.add_row(
        "next",
        f"metasearch tree {root}\nmetasearch ui {root}\nmetasearch promote {root} {best['agent_id'] or 'AGENT_ID'} --name my-agent",
    )
    out.print(table)
