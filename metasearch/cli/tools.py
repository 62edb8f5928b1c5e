"""The commands on this machine and the scheduler: bench, images, models, tune, sim."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from metasearch.cli.common import StudyDir, console, fail, out, setup_logging
from metasearch.errors import MetasearchError

app = typer.Typer()
images_app = typer.Typer(help="Sandbox images (built locally; never pulled).", no_args_is_help=True)
app.add_typer(images_app, name="images")
sim_app = typer.Typer(help="The scheduler simulator: calibrate it on a real study.", no_args_is_help=True)
app.add_typer(sim_app, name="sim")
models_app = typer.Typer(
    help="Small local models from the package registry, served offline.", no_args_is_help=True
)
app.add_typer(models_app, name="models")


PACKAGED_BENCHES = {"schedulers": "metasearch.sim.bench"}
"""Benchmarks that come with the package (a module with ``run(argv) -> exit status``). The others are scripts
in the bench/ folder of a source checkout, which an installed package does not have."""


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def bench(
    ctx: typer.Context,
    which: Annotated[
        str,
        typer.Argument(help="schedulers, or a script of a source checkout's bench/: archive, integrity, ..."),
    ],
) -> None:
    """Run a benchmark; extra options go to it (e.g. `bench schedulers --seeds 50`)."""
    raise typer.Exit(_benchmark(which).run(list(ctx.args)))


def _benchmark(which: str) -> Any:
    """The benchmark's module: a packaged one, else a script of the source checkout's bench/ folder."""
    import importlib
    import importlib.util

    import metasearch

    if which in PACKAGED_BENCHES:
        return importlib.import_module(PACKAGED_BENCHES[which])
    root = Path(metasearch.__file__).resolve().parents[1]
    if not (root / "pyproject.toml").is_file():  # an installed package: no bench/ beside it
        raise fail(
            MetasearchError(
                f"benchmark {which!r}: this installation has only {', '.join(sorted(PACKAGED_BENCHES))}; the "
                "other benchmarks are scripts in the bench/ folder of a source checkout: run them from a clone "
                "of the repository"
            )
        )
    folder = root / "bench"
    scripts = sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))
    if which not in scripts:
        choices = ", ".join(sorted({*PACKAGED_BENCHES, *scripts}))
        raise fail(MetasearchError(f"unknown benchmark {which!r}; choose from {choices}"))
    spec = importlib.util.spec_from_file_location(f"metasearch_bench_{which}", folder / f"{which}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@images_app.command("build")
def images_build(
    name: Annotated[str, typer.Argument(help="Which image: default or polyglot.")] = "default",
    force: Annotated[bool, typer.Option(help="Rebuild even if the tag exists.")] = False,
) -> None:
    """Build a sandbox image offline from Debian packages (idempotent: content-hash tag)."""
    from metasearch.sandboxes.images import build_image

    setup_logging(False)
    try:
        tag = build_image(name, force=force)
    except MetasearchError as exc:
        raise fail(exc) from None
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

    setup_logging(False)
    try:
        done = local_models.prepare(name, python=python, root=models_dir, force=force)
    except MetasearchError as exc:
        raise fail(exc) from None
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
        raise fail(exc) from None
    if calibrated is not None and not calibrated.is_file():
        raise fail(MetasearchError(f"--calibrated: no such file {calibrated}"))
    if calibrated is not None:
        from metasearch.sim.calibrate import calibrated_family, fit_warnings

        try:
            for line in fit_warnings(calibrated_family(calibrated).fit):
                console.print(f"{calibrated}: {line}", highlight=False, markup=False, soft_wrap=True)
        except MetasearchError as exc:
            raise fail(exc) from None
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
        raise fail(exc) from None
    out_path.write_text(json.dumps(fit, indent=1) + "\n")
    for line in summary_lines(fit):
        out.print(line, highlight=False, soft_wrap=True)
    out.print(f"wrote {out_path}", highlight=False, soft_wrap=True)
