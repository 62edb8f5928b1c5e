"""``metasearch bench schedulers``: every scheduler on the same simulated landscapes and seeds (paired).

One table per landscape family (``--families default,disagreement``, also ``grouped`` and ``deceptive``
from ``grouped.py``; ``--calibrated fit.json`` from ``metasearch sim calibrate`` adds ``calibrated``;
``--landscape module:factory`` replaces them with one of your own). Per scheduler: true quality of the final selected agent (mean and 95% CI over seeds), best true
quality in its tree, regret against the best agent any scheduler found on the same seed, evaluations and
expansions used, simulated wall time and busy (sandbox) time, the weighted correlation of the clade estimate (and of the own
score) with the best descendant's empirical score, and the paired difference to ``hgm-paper`` (the
published policy) with its 95% CI. The simulator's realism (``realism.py``) is on unless ``--kind``.
``--wall-time S`` adds a budget of S simulated seconds (no job starts after it), the kind of budget under
which preferring the cheaper of equally promising evaluations (``cost_exponent``) can pay.
``--scale`` instead measures decision latency at 10,000 and 100,000 agents (``scale.py``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from metasearch.registry import SCHEDULERS
from metasearch.sim.calibrate import calibrated_family, fit_warnings
from metasearch.sim.engine import cmp_correlations, simulate
from metasearch.sim.grouped import deceptive_family, grouped_family
from metasearch.sim.landscape import default_family, disagreement_family
from metasearch.sim.realism import Realism
from metasearch.sim.scale import report as scale_report
from metasearch.sim.table import print_table

BASELINE = "hgm-paper"
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "hgm-paper": ("hgm-paper", {}),
    "hgm": ("hgm", {}),
    "hgm-paper+pending": ("hgm-paper", {"pending_aware": True}),
    "hgm-paper+eval-vl": ("hgm-paper", {"eval_virtual_loss": True}),
    "hgm-paper-no-cooldown": ("hgm-paper", {"cool_down": False}),
    "hgm-paper+cost": ("hgm-paper", {"cost_exponent": 1.0}),
    "hgm-paper+novelty": ("hgm-paper", {"novelty": 0.2}),
    "hgm-paper+pareto": ("hgm-paper", {"pareto_parents": True}),
    "mcts": ("mcts", {}),
    "hgm-paper+final-clade-prior": ("hgm-paper", {"final": "clade_prior"}),
    "hgm-paper+final-clade-top-k": ("hgm-paper", {"final": "clade_top_k"}),
    "dgm": ("dgm", {}),
    "gea": ("gea", {}),
    "greedy": ("greedy", {}),
    "random": ("random", {}),
}
FAMILIES = {
    "default": default_family,
    "disagreement": disagreement_family,
    "grouped": grouped_family,
    "deceptive": deceptive_family,
}


@dataclass(frozen=True)
class Case:
    """One paired run: a scheduler (registry name + options) on one family member and seed."""

    label: str
    scheduler: str
    options: tuple[tuple[str, Any], ...]
    family: str  # "default", "disagreement", "calibrated:<path>" or "module:factory"
    seed: int
    budget: int
    workers: int
    n_tasks: int
    realism: bool
    wall_time_s: float | None = None  # a wall-time budget (simulated seconds) on top of the evaluations
    heldout_tasks: int = 0  # tasks the scheduler never sees, for the final agent's held-out quality


def family_factory(spec: str, n_tasks: int) -> Any:
    if spec in FAMILIES:
        return FAMILIES[spec]
    if spec.startswith("calibrated:"):
        return calibrated_family(spec.removeprefix("calibrated:"), n_tasks=n_tasks)
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)


def run_case(case: Case) -> dict[str, Any]:
    cls = SCHEDULERS.resolve(case.scheduler)
    factory = family_factory(case.family, case.n_tasks)
    realism = getattr(factory, "realism", Realism()) if case.realism else Realism.off()
    landscape = factory(np.random.default_rng([case.seed, 0]))
    result = simulate(
        landscape,
        cls(cls.Config(**dict(case.options))),
        budget=case.budget,
        workers=case.workers,
        n_tasks=case.n_tasks,
        seed=case.seed,
        realism=realism,
        wall_time_s=case.wall_time_s,
        heldout_tasks=case.heldout_tasks,
    )
    clade_corr, own_corr, _ = cmp_correlations(result.tree)
    return {
        "final": result.final_quality,
        "heldout": result.final_heldout,
        "best": result.best_quality,
        "evaluations": result.evaluations,
        "expansions": result.expansions,
        "wall_time": result.extra["wall_time"],
        "busy_time": result.extra["busy_time"],
        "clade_corr": clade_corr,
        "own_corr": own_corr,
    }


def ci95(values: np.ndarray) -> tuple[float, float, float]:
    mean = float(np.mean(values))
    half = 1.96 * float(np.std(values, ddof=1)) / math.sqrt(len(values)) if len(values) > 1 else float("nan")
    return mean, mean - half, mean + half


def run_cases(cases: list[Case], processes: int | None = None) -> list[dict[str, Any]]:
    """``run_case`` over all cases on every core (in order)."""
    processes = processes or os.cpu_count() or 1
    if processes == 1 or len(cases) < 4:
        return [run_case(c) for c in cases]
    with ProcessPoolExecutor(max_workers=processes) as pool:
        return list(pool.map(run_case, cases, chunksize=max(1, len(cases) // (8 * processes))))


def compare(
    variants: dict[str, tuple[str, dict[str, Any]]],
    *,
    family: str,
    seeds: int,
    budget: int,
    workers: int,
    n_tasks: int,
    realism: bool = True,
    baseline: str = BASELINE,
    wall_time_s: float | None = None,
    heldout_tasks: int = 0,
    first_seed: int = 0,
) -> list[dict[str, Any]]:
    cases = [
        Case(
            v,
            name,
            tuple(sorted(opts.items())),
            family,
            s,
            budget,
            workers,
            n_tasks,
            realism,
            wall_time_s,
            heldout_tasks,
        )
        for v, (name, opts) in variants.items()
        for s in range(first_seed, first_seed + seeds)
    ]
    results = run_cases(cases)
    by: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    for case, r in zip(cases, results, strict=True):
        by[case.label].append(r)
    best_any = np.max([[r["best"] for r in by[v]] for v in variants], axis=0)
    base = np.array([r["final"] for r in by[baseline]]) if baseline in by else None
    base_held = np.array([r["heldout"] for r in by[baseline]]) if baseline in by else None
    out = []
    for v in variants:
        final = np.array([r["final"] for r in by[v]])
        held = np.array([r["heldout"] for r in by[v]])
        mean, lo, hi = ci95(final)
        clade = np.array([r["clade_corr"] for r in by[v]])
        own = np.array([r["own_corr"] for r in by[v]])
        entry: dict[str, Any] = {
            "family": family.split(":")[0] if family.startswith("calibrated:") else family,
            "scheduler": v,
            "final_quality_mean": mean,
            "final_quality_ci95": [lo, hi],
            "best_quality_mean": float(np.mean([r["best"] for r in by[v]])),
            "regret_mean": float(np.mean(best_any - final)),
            "evaluations": float(np.mean([r["evaluations"] for r in by[v]])),
            "expansions": float(np.mean([r["expansions"] for r in by[v]])),
            "wall_time": float(np.mean([r["wall_time"] for r in by[v]])),
            "busy_time": float(np.mean([r["busy_time"] for r in by[v]])),
            "cmp_correlation": float(np.nanmean(clade)) if np.isfinite(clade).any() else None,
            "own_correlation": float(np.nanmean(own)) if np.isfinite(own).any() else None,
        }
        if base is not None:
            d_mean, d_lo, d_hi = ci95(final - base)
            entry["diff_vs_baseline_mean"], entry["diff_vs_baseline_ci95"] = d_mean, [d_lo, d_hi]
        if heldout_tasks > 0:
            h_mean, h_lo, h_hi = ci95(held)
            g_mean, g_lo, g_hi = ci95(final - held)
            entry["heldout_mean"], entry["heldout_ci95"] = h_mean, [h_lo, h_hi]
            entry["gap_mean"], entry["gap_ci95"] = g_mean, [g_lo, g_hi]
            if base_held is not None:
                d_mean, d_lo, d_hi = ci95(held - base_held)
                entry["heldout_diff_mean"], entry["heldout_diff_ci95"] = d_mean, [d_lo, d_hi]
        out.append(entry)
    return out


COLUMNS = [
    "scheduler",
    "final_quality_mean",
    "final_quality_ci95",
    "diff_vs_baseline_mean",
    "diff_vs_baseline_ci95",
    "heldout_mean",
    "heldout_ci95",
    "gap_mean",
    "heldout_diff_mean",
    "heldout_diff_ci95",
    "best_quality_mean",
    "regret_mean",
    "expansions",
    "wall_time",
    "busy_time",
    "cmp_correlation",
    "own_correlation",
]


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="metasearch bench schedulers", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--families", default="default,disagreement", help=f"comma-separated: {', '.join(FAMILIES)}"
    )
    parser.add_argument(
        "--calibrated", default=None, help="a fit from `metasearch sim calibrate` (adds a family)"
    )
    parser.add_argument("--landscape", default=None, help="module:factory, factory(rng) -> Landscape")
    parser.add_argument("--budget", type=int, default=800)
    parser.add_argument(
        "--wall-time",
        type=float,
        default=None,
        help="a wall-time budget in simulated seconds as well (the evaluations then rarely bind: raise --budget)",
    )
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="seeds run from here (fresh seeds check a choice made on others)",
    )
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--tasks", type=int, default=60)
    parser.add_argument(
        "--heldout-tasks",
        type=int,
        default=240,
        help="tasks the scheduler never sees, for the final agent's held-out quality (0: none)",
    )
    parser.add_argument("--schedulers", default=",".join(VARIANTS))
    parser.add_argument("--kind", action="store_true", help="the old simulator: no realism effects")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--scale", action="store_true")
    args = parser.parse_args(argv)
    if args.scale:
        return scale_report(args.json)
    labels = [v.strip() for v in args.schedulers.split(",") if v.strip()]
    unknown = [v for v in labels if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown scheduler(s) {unknown}; choose from {', '.join(VARIANTS)}")
    families = (
        [args.landscape] if args.landscape else [f.strip() for f in args.families.split(",") if f.strip()]
    )
    bad = [f for f in families if f not in FAMILIES and ":" not in f]
    if bad:
        parser.error(f"--families: unknown family {bad}; choose from {', '.join(FAMILIES)}")
    if args.calibrated:
        if not os.path.isfile(args.calibrated):
            parser.error(f"--calibrated: no such file {args.calibrated}")
        families.append(f"calibrated:{args.calibrated}")
    rows: list[dict[str, Any]] = []
    for family in families:
        if family.startswith("calibrated:"):
            for line in fit_warnings(calibrated_family(family.removeprefix("calibrated:")).fit):
                print(f"{family}: {line}", file=sys.stderr)
        started = time.monotonic()
        got = compare(
            {v: VARIANTS[v] for v in labels},
            family=family,
            seeds=args.seeds,
            budget=args.budget,
            workers=args.workers,
            n_tasks=args.tasks,
            realism=not args.kind,
            wall_time_s=args.wall_time,
            heldout_tasks=args.heldout_tasks,
            first_seed=args.first_seed,
        )
        rows += got
        if not args.json:
            print_table(got, COLUMNS, title=f"family {got[0]['family']} (difference to {BASELINE})")
            print(
                f"{args.seeds} paired seeds"
                + (f" from {args.first_seed}" if args.first_seed else "")
                + f", budget {args.budget}"
                + (f" and {args.wall_time:g} s of wall time" if args.wall_time else "")
                + f", {args.workers} workers, {args.tasks} tasks ({args.heldout_tasks} held out), "
                f"realism {'off' if args.kind else 'on'}; {time.monotonic() - started:.0f}s"
            )
    if args.json:
        print(json.dumps(rows))
    return 0
