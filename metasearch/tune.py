"""``metasearch tune <config.yaml>``: choose the scheduler's hyperparameters in simulation before a real run.

An Optuna study (multivariate TPE; with ``--cost`` two objectives, final-agent quality and simulated wall
time) over the options of the config's scheduler (alpha, cool-down, initial expansions, min parent mean,
pending-awareness, failure counting, evaluation virtual loss, final-selection rule, cost exponent). Each
trial is a batch of paired simulator runs (the same seeds for every trial, so trials differ only by their
setting) at the config's budget, worker count and task count, on the default landscape family or on a
calibrated one (``--calibrated fit.json`` from ``metasearch sim calibrate``). The best setting is then
checked against the config's own on fresh seeds (paired 95% CI) and written as a config snippet. The Optuna
storage is an SQLite file that ``optuna-dashboard sqlite:///<file>`` opens.
"""

from __future__ import annotations

import math
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from metasearch.config import load_config
from metasearch.errors import ConfigError
from metasearch.registry import SCHEDULERS
from metasearch.schedulers.hgm import HGMConfig
from metasearch.sim.bench import Case, ci95, run_case

FRESH_SEED_OFFSET = 1_000_000  # the check runs on seeds no trial saw


@dataclass(frozen=True)
class TuneSetup:
    scheduler: str
    options: dict[str, Any]  # the config's own scheduler options
    budget: int
    workers: int
    n_tasks: int
    family: str


def setup_from_config(path: Path, *, n_tasks: int | None, calibrated: Path | None) -> TuneSetup:
    """What to simulate, read from a metasearch config. Raises ConfigError naming the key."""
    resolved = load_config(path)
    cfg = resolved.config
    name = cfg.scheduler.name
    if not issubclass(SCHEDULERS.resolve(name).Config, HGMConfig):
        raise ConfigError(
            f"{path}: scheduler.name: tune knows the options of hgm, hgm-paper and mcts, not {name!r}"
        )
    if cfg.budget.evaluations is None:
        raise ConfigError(f"{path}: budget.evaluations: tune needs an evaluation budget to simulate")
    if n_tasks is None:
        try:
            n_tasks = len(resolved.plugins["suite"].create().tasks())
        except Exception as exc:  # a suite that needs data or services: ask for --tasks
            raise ConfigError(f"{path}: suite: cannot list its tasks ({exc}); pass --tasks N") from None
    return TuneSetup(
        scheduler=name,
        options=dict(cfg.scheduler.options()),
        budget=int(cfg.budget.evaluations),
        workers=int(cfg.study.workers),
        n_tasks=int(n_tasks),
        family=f"calibrated:{calibrated}" if calibrated else "default",
    )


def suggest(trial: Any) -> dict[str, Any]:
    """The search space (Optuna's define-by-run API)."""
    return {
        "alpha": trial.suggest_float("alpha", 0.3, 0.9),
        "cool_down": trial.suggest_categorical("cool_down", [True, False]),
        "initial_expansions": trial.suggest_int("initial_expansions", 0, 8),
        "min_parent_mean": trial.suggest_float("min_parent_mean", 0.0, 0.3),
        "pending_aware": trial.suggest_categorical("pending_aware", [True, False]),
        "count_failed_expansions": trial.suggest_categorical("count_failed_expansions", [True, False]),
        "eval_virtual_loss": trial.suggest_categorical("eval_virtual_loss", [True, False]),
        "final": trial.suggest_categorical("final", ["lower_percentile", "mean"]),
        "cost_exponent": trial.suggest_float("cost_exponent", 0.0, 2.0),
    }


def evaluate(
    setup: TuneSetup, options: dict[str, Any], seeds: range, pool: ProcessPoolExecutor | None
) -> tuple[np.ndarray, np.ndarray]:
    """(final quality, simulated wall time) per seed for one setting."""
    cases = [
        Case(
            "tune",
            setup.scheduler,
            tuple(sorted(options.items())),
            setup.family,
            s,
            setup.budget,
            setup.workers,
            setup.n_tasks,
            True,
        )
        for s in seeds
    ]
    rows = (
        list(pool.map(run_case, cases, chunksize=max(1, len(cases) // 16)))
        if pool
        else [run_case(c) for c in cases]
    )
    return np.array([r["final"] for r in rows]), np.array([r["wall_time"] for r in rows])


def tune(
    setup: TuneSetup,
    *,
    trials: int,
    seeds: int,
    check_seeds: int,
    storage: str,
    study_name: str,
    cost: bool,
    processes: int,
    sampler_seed: int = 0,
) -> dict[str, Any]:
    """Run the Optuna study and the fresh-seed check; returns the report (see ``print_report``)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.TPESampler(
        seed=sampler_seed, multivariate=True, n_startup_trials=min(10, trials)
    )
    directions: list[Literal["minimize", "maximize"]] = ["maximize", "minimize"] if cost else ["maximize"]
    study = optuna.create_study(
        storage=storage, study_name=study_name, directions=directions, sampler=sampler, load_if_exists=True
    )
    study.set_user_attr("setup", {**setup.__dict__})
    base_options = dict(setup.options)
    with ProcessPoolExecutor(max_workers=processes) if processes > 1 else _NoPool() as pool:
        own = {k: v for k, v in _resolved(setup, base_options).items() if k in _SPACE}
        study.enqueue_trial(own)  # trial 0 is the config's own setting
        for _ in range(trials):
            trial = study.ask()
            options = base_options | suggest(trial)
            quality, wall = evaluate(setup, options, range(seeds), pool)
            trial.set_user_attr("quality_ci95", list(ci95(quality)[1:]))
            study.tell(trial, [float(quality.mean()), float(wall.mean())] if cost else float(quality.mean()))
        best = max(study.best_trials, key=lambda t: t.values[0]) if cost else study.best_trial
        best_options = _full(setup, base_options) if best.params == own else base_options | best.params
        fresh = range(FRESH_SEED_OFFSET, FRESH_SEED_OFFSET + check_seeds)
        q_best, w_best = evaluate(setup, best_options, fresh, pool)
        q_base, w_base = evaluate(setup, base_options, fresh, pool)
    return {
        "setup": setup,
        "trials": len(study.trials),
        "best_options": best_options,
        "config_options": _resolved(setup, base_options),
        "best_quality": ci95(q_best),
        "config_quality": ci95(q_base),
        "difference": ci95(q_best - q_base),
        "best_wall_time": float(w_best.mean()),
        "config_wall_time": float(w_base.mean()),
        "pareto": [t.params | {"quality": t.values[0], "wall_time": t.values[1]} for t in study.best_trials]
        if cost
        else [],
    }


_SPACE = set(HGMConfig.model_fields) - {"epsilon", "min_trials"}


def _full(setup: TuneSetup, options: dict[str, Any]) -> dict[str, Any]:
    cls = SCHEDULERS.resolve(setup.scheduler)
    return cls.Config(**options).model_dump()


def _resolved(setup: TuneSetup, options: dict[str, Any]) -> dict[str, Any]:
    """All options, ``initial_expansions: auto`` as the count it means for these workers (the space's)."""
    full = _full(setup, options)
    if full["initial_expansions"] == "auto":
        full["initial_expansions"] = min(5, math.floor(max(1, setup.workers) ** full["alpha"]))
    return full


class _NoPool:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def snippet(report: dict[str, Any]) -> str:
    import yaml

    setup: TuneSetup = report["setup"]
    full = report["best_options"]
    body = {"scheduler": {"name": setup.scheduler, **{k: full[k] for k in sorted(full) if k in _SPACE}}}
    d, lo, hi = report["difference"]
    head = (
        f"# metasearch tune: {report['trials']} trials on family {setup.family}, budget {setup.budget}, "
        f"{setup.workers} workers, {setup.n_tasks} tasks.\n# final quality vs the config's own setting on fresh "
        f"seeds: {d:+.3f} (95% CI {lo:+.3f} to {hi:+.3f}).\n"
    )
    return head + yaml.safe_dump(body, sort_keys=False)


def report_lines(report: dict[str, Any]) -> list[str]:
    def fmt(ci: tuple[float, float, float]) -> str:
        m, lo, hi = ci
        return f"{m:.3f} (95% CI {lo:.3f} to {hi:.3f})" if not math.isnan(lo) else f"{m:.3f}"

    d, lo, hi = report["difference"]
    best = _resolved(report["setup"], report["best_options"])
    changed = {k: v for k, v in best.items() if k in _SPACE and report["config_options"].get(k) != v}
    verdict = "better" if lo > 0 else ("worse" if hi < 0 else "not distinguishable")
    return [
        f"best setting: {changed or 'the config already has it'}",
        f"final quality, best setting:   {fmt(report['best_quality'])}",
        f"final quality, config setting: {fmt(report['config_quality'])}",
        f"paired difference: {d:+.3f} (95% CI {lo:+.3f} to {hi:+.3f}): {verdict}",
        f"simulated wall time: {report['best_wall_time']:.0f} vs {report['config_wall_time']:.0f}",
    ]
