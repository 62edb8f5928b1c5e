"""The commands on studies: run, resume, doctor, status, diff-runs, best, tree, export, task, promote, ui."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from metasearch.cli.common import Overrides, StudyDir, console, fail, out, setup_logging
from metasearch.errors import MetasearchError

app = typer.Typer()
task_app = typer.Typer(help="Benchmark tasks as folders a promoted agent runs on.", no_args_is_help=True)


@app.command()
def run(
    config: Annotated[Path, typer.Argument(help="A YAML config, e.g. configs/quickstart.yaml.")],
    override: Overrides = None,
    study: Annotated[str | None, typer.Option(help="Study name (default: study.name).")] = None,
    archive_dir: Annotated[
        Path | None, typer.Option(help="Where studies live (default: archive_dir).")
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(help="Print the plan and what this machine lacks; exit 0 only if `run` would start."),
    ] = False,
    verbose: Annotated[bool, typer.Option("-v", "--verbose")] = False,
) -> None:
    """Start a new search study from CONFIG."""
    from metasearch import launch
    from metasearch.config import load_config

    setup_logging(verbose)
    try:
        resolved = load_config(config, override or [])
        study_dir = launch.study_dir_for(resolved, str(archive_dir) if archive_dir else None, study)
        if dry_run:
            from metasearch.readiness import dry_run as check_run

            raise typer.Exit(check_run(resolved, study_dir, out))
        if study_dir.exists() and any(study_dir.iterdir()):
            raise MetasearchError(
                f"{study_dir} already exists; resume it with `metasearch resume {study_dir}` or pick --study"
            )
        _drive(lambda cbs: launch.create(resolved, study_dir, callbacks=cbs))
    except MetasearchError as exc:
        raise fail(exc) from None


@app.command()
def resume(
    study_dir: StudyDir,
    override: Overrides = None,
    accept_drift: Annotated[
        bool, typer.Option(help="Go on although conditions that decide scores changed (journaled).")
    ] = False,
    verbose: Annotated[bool, typer.Option("-v", "--verbose")] = False,
) -> None:
    """Continue a study (after a crash, Ctrl-C or a spent budget: raise it with -o budget.evaluations=N).

    Refuses when the image, task content, model, sampling or metasearch revision changed since the study
    was created (see `metasearch diff-runs`), unless --accept-drift."""
    from metasearch import launch

    setup_logging(verbose)
    try:
        _drive(lambda cbs: launch.reopen(study_dir, override or [], callbacks=cbs, accept_drift=accept_drift))
    except MetasearchError as exc:
        raise fail(exc) from None


def _drive(make: Any) -> None:
    from metasearch.progress import LiveProgress, print_summary
    from metasearch.study import StopSignal
    from metasearch.tracking import tracking_callbacks

    stop = StopSignal()

    def on_sigint(signum: int, frame: Any) -> None:
        if stop.drain.is_set():
            console.print("[yellow]second interrupt: abandoning running jobs (they return to the queue)[/]")
            stop.abort.set()
        else:
            console.print("[yellow]interrupt: finishing running jobs; press Ctrl-C again to abandon them[/]")
            stop.drain.set()

    previous = signal.signal(signal.SIGINT, on_sigint)
    progress = LiveProgress(console)
    launched = make([progress.callback])
    mirrors = tracking_callbacks(launched.archive.root, launched.resolved.config.tracking)
    try:
        launched.study.callbacks.extend(mirrors)
        started = time.monotonic()
        with progress.live(launched.study):
            launched.study.run(
                launched.runner,
                workers=launched.resolved.config.study.workers,
                stop=stop,
                heartbeat_s=launched.resolved.config.study.heartbeat_s,
            )
        print_summary(launched, time.monotonic() - started, out)
    finally:
        signal.signal(signal.SIGINT, previous)
        for mirror in mirrors:
            close = getattr(mirror, "close", None)
            if callable(close):
                close(10.0)
        launched.close()
    if launched.study.stop_reason and launched.study.stop_reason.startswith("infrastructure"):
        raise typer.Exit(3)


@app.command()
def doctor() -> None:
    """What this machine offers a study: Docker, the sandbox image, GPUs, vLLM, Ray, an LLM endpoint.

    A report (exit 0); whether a given config can run here is `run CONFIG --dry-run`'s exit status."""
    from metasearch.machine import machine_checks
    from metasearch.readiness import render

    render(machine_checks(), out, "this machine")


@app.command()
def status(study_dir: StudyDir, json_: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Budget used, agents by state, best-belief agent and running jobs of a study (fast; read-only)."""
    from metasearch.cluster.ray_nodes import node_lines, node_summary
    from metasearch.report import status_dict
    from metasearch.status_view import print_status

    try:
        nodes = node_summary(study_dir)  # only a study run on Ray has any
        if json_:
            out.print_json(json.dumps({**status_dict(study_dir), **({"ray_nodes": nodes} if nodes else {})}))
            return
        print_status(study_dir, out)
    except MetasearchError as exc:
        raise fail(exc) from None
    for key, value in node_lines(nodes):
        out.print(f"[bold]{key:>18}[/]  {value}")


@app.command("diff-runs")
def diff_runs(
    study_a: StudyDir,
    study_b: StudyDir,
    json_: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """What differs between two studies' conditions: are their scores comparable? (exit 1 when not)."""
    from metasearch.drift import describe
    from metasearch.drift import diff_runs as compare_runs

    try:
        data = compare_runs(study_a, study_b)
    except MetasearchError as exc:
        raise fail(exc) from None
    if json_:
        out.print_json(json.dumps(data))
    else:
        a, b = data["conditions"]
        verdict = "comparable" if data["comparable"] else "NOT comparable"
        out.print(f"conditions {a} vs {b}: scores are {verdict}", highlight=False)
        for title, rows in (("score-deciding", data["score_deciding"]), ("harmless", data["harmless"])):
            if rows:
                out.print(f"{title} differences:\n{describe(rows)}", highlight=False, markup=False)
    raise typer.Exit(0 if data["comparable"] else 1)


@app.command()
def best(study_dir: StudyDir, json_: Annotated[bool, typer.Option("--json")] = False) -> None:
    """The best-belief agent (highest lower posterior percentile) with its statistics."""
    from metasearch.report import best_dict

    try:
        data = best_dict(study_dir)
    except MetasearchError as exc:
        raise fail(exc) from None
    if json_:
        out.print_json(json.dumps(data))
        return
    excluded = f"; left out for integrity flags: {', '.join(data['flagged'])}" if data["flagged"] else ""
    if data["agent_id"] is None:
        out.print(f"no unflagged agent has been evaluated yet{excluded}")
        return
    out.print(
        f"best-belief agent [bold]{data['agent_id']}[/] ({data['branch']} @ {data['commit'][:10]}): "
        f"mean {data['mean']:.3f} over {data['trials']} tasks, lower bound {data['lower_bound']:.3f}; "
        f"seed mean on the same tasks {_fmt(data['seed_mean'])}{excluded}"
    )


@app.command()
def tree(study_dir: StudyDir) -> None:
    """The lineage tree with each agent's own mean score and trials."""
    from metasearch.report import tree_text

    try:
        out.print(tree_text(study_dir), highlight=False, soft_wrap=True)
    except MetasearchError as exc:
        raise fail(exc) from None


@app.command()
def export(
    study_dir: StudyDir,
    agent_id: Annotated[str, typer.Argument(help="Agent id, e.g. a00007.")],
    dest: Annotated[Path, typer.Argument(help="An empty (or new) folder to write the agent's files to.")],
    force: Annotated[bool, typer.Option(help="Replace what DEST holds.")] = False,
) -> None:
    """Write an agent's code and its requirements.txt as a standalone folder (no git, no metasearch)."""
    from metasearch.export import export_agent

    try:
        requirements = export_agent(study_dir, agent_id, dest, force=force)
    except MetasearchError as exc:
        raise fail(exc) from None
    out.print(f"wrote {agent_id} to {dest} (requirements: {', '.join(requirements) or 'none'})")


@task_app.command("prepare")
def task_prepare(
    suite: Annotated[str, typer.Argument(help="Suite name, e.g. training.")],
    task: Annotated[str, typer.Argument(help="Task id, e.g. training/moons.")],
    dest: Annotated[Path, typer.Argument(help="An empty (or new) folder.")],
    study: Annotated[Path | None, typer.Option(help="Take the suite's options from this study.")] = None,
    force: Annotated[bool, typer.Option(help="Replace what DEST holds.")] = False,
) -> None:
    """Write a task folder (DEST/task) and its model input (DEST/input.json) for a promoted agent."""
    from metasearch.export import prepare_task

    try:
        data = prepare_task(suite, task, dest, study_dir=study, force=force)
    except MetasearchError as exc:
        raise fail(exc) from None
    out.print(f"wrote {data['task_id']} to {data['task_dir']}", highlight=False)
    out.print(
        f"  predict: mlflow models predict -m models:/metasearch-agent@production -i {data['input']} "
        "-t json --env-manager local",
        highlight=False,
        soft_wrap=True,
    )
    out.print(
        "  serve:   mlflow models serve -m models:/metasearch-agent@production -p 5001 --env-manager local, "
        f"then curl -H 'Content-Type: application/json' -d @{data['input']} http://127.0.0.1:5001/invocations",
        highlight=False,
        soft_wrap=True,
    )


@app.command()
def promote(
    study_dir: StudyDir,
    agent_id: Annotated[str, typer.Argument(help="Agent id, e.g. a00007.")],
    name: Annotated[str, typer.Option("--name", help="Registered model name.")] = "metasearch-agent",
    gate: Annotated[
        str | None,
        typer.Option(help="SUITE:THRESHOLD: re-evaluate on held-out tasks first, e.g. training:0.6."),
    ] = None,
    json_: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Register an agent as an MLflow model, alias it `production`, and tag its commit in the archive."""
    from metasearch.tracking.promote import promote_agent

    setup_logging(False)
    try:
        data = promote_agent(study_dir, agent_id, name, gate)
    except MetasearchError as exc:
        raise fail(exc) from None
    if json_:
        out.print_json(json.dumps(data))
        return
    gate_line = "" if data["gate"] is None else f" (gate {gate}: mean {data['gate']['mean']:.3f})"
    out.print(f"promoted {agent_id} as [bold]{data['name']}[/] version {data['version']}{gate_line}")
    out.print(f"  model:   {data['model_uri']}  (tracking URI {data['tracking_uri']})")
    out.print(f"  archive: tag {data['git_tag']} on {data['commit'][:10]}")
    out.print(
        f"  try it:  metasearch task prepare SUITE TASK DIR, then MLFLOW_TRACKING_URI={data['tracking_uri']} "
        f"mlflow models predict -m {data['model_uri']} -i DIR/input.json -t json --env-manager local",
        highlight=False,
        soft_wrap=True,
    )


@app.command()
def ui(
    study_dir: StudyDir,
    port: Annotated[int, typer.Option(help="Port for the MLflow UI.")] = 5000,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
) -> None:
    """Start the MLflow UI on the study's store (mirroring the journal first) and print its URL."""
    from metasearch.tracking.ui import serve_ui

    setup_logging(False)
    try:
        serve_ui(study_dir, port, host)
    except MetasearchError as exc:
        raise fail(exc) from None


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
