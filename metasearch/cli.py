"""The ``metasearch`` command line: run, resume, status, tree, best, export, promote, ui, bench, images.

``--json`` outputs are a stable interface for other tools; their fields are documented in README.md.
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
    dry_run: Annotated[bool, typer.Option(help="Validate and print the plan; start nothing.")] = False,
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
            from metasearch.progress import print_plan

            print_plan(resolved, study_dir, out)
            return
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
    verbose: Annotated[bool, typer.Option("-v", "--verbose")] = False,
) -> None:
    """Continue a study (after a crash, Ctrl-C or a spent budget: raise it with -o budget.evaluations=N)."""
    from metasearch import launch

    _setup_logging(verbose)
    try:
        _drive(lambda cbs: launch.reopen(study_dir, override or [], callbacks=cbs))
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
    mirrors = tracking_callbacks(launched)
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
def status(study_dir: StudyDir, json_: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Counts, budget and best-belief agent of a study (fast; read-only)."""
    from metasearch.report import status_dict

    try:
        data = status_dict(study_dir)
    except MetasearchError as exc:
        raise _fail(exc) from None
    if json_:
        out.print_json(json.dumps(data))
        return
    for key, value in data.items():
        out.print(f"[bold]{key:>18}[/]  {value}")


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
    dest: Annotated[Path, typer.Argument(help="Directory to write the agent's files to.")],
) -> None:
    """Write an agent's code as a standalone directory (no git, no metasearch needed to run it)."""
    from metasearch.archive import GitArchive

    try:
        with GitArchive.open(study_dir, readonly=True) as archive:
            archive.export(agent_id, dest)
    except MetasearchError as exc:
        raise _fail(exc) from None
    out.print(f"wrote {agent_id} to {dest}")


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
        f"  try it:  MLFLOW_TRACKING_URI={data['tracking_uri']} mlflow models predict "
        f"-m {data['model_uri']} -i TASKS.json -t json --env-manager local"
    )
    out.print('           (TASKS.json: {"dataframe_records": [{"task_dir": "/path/to/task"}]})', markup=False)


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
    which: Annotated[str, typer.Argument(help="archive | schedulers | sandbox | llm | tracking | integrity")],
) -> None:
    """Run a performance benchmark; extra options go to it (e.g. `bench schedulers --seeds 50`)."""
    import importlib.util

    import metasearch

    names = ("archive", "schedulers", "sandbox", "llm", "tracking", "integrity", "polyglot")
    path = Path(metasearch.__file__).resolve().parents[1] / "bench" / f"{which}.py"
    if which not in names or not path.is_file():
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
