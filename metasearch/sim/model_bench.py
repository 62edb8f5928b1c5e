"""``metasearch bench models``: the model bandit against each model alone and a uniform mix, at equal tokens.

Every run draws a landscape (``--family``) and two models (``models.model_family``: a small cheap one and a
large one; which earns more per token differs from run to run) from its seed; each rule then runs the same
scheduler on the same landscape, models and tasks until ``--tokens`` are spent (paired). Per rule: true
quality of the final selected agent and the best in its tree (mean, 95% CI), expansions and evaluations
used, the share of expansions the large model wrote, and the paired difference of the final quality to the
bandit's with its 95% CI. ``only:<model>`` rows are one model alone; ``best single`` is, per family, the
single model with the higher mean final quality over the seeds (chosen after the fact, so an optimistic
baseline).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from metasearch.registry import SCHEDULERS
from metasearch.schedulers.model_choice import Rule
from metasearch.sim.bench import ci95, family_factory, print_table
from metasearch.sim.engine import simulate
from metasearch.sim.models import MODEL_FAMILIES, ModelArms
from metasearch.sim.realism import Realism

RULES: dict[str, Rule] = {"bandit": "bandit", "uniform": "uniform"}
MODELS = ("small", "large")


@dataclass(frozen=True)
class ModelCase:
    label: str  # a rule name or "only:<model>"
    family: str
    models: str  # a key of MODEL_FAMILIES
    scheduler: str
    seed: int
    tokens: float
    evaluations: int
    workers: int
    n_tasks: int


def run_model_case(case: ModelCase) -> dict[str, Any]:
    cls = SCHEDULERS.resolve(case.scheduler)
    landscape = family_factory(case.family, case.n_tasks)(np.random.default_rng([case.seed, 0]))
    models = MODEL_FAMILIES[case.models](np.random.default_rng([case.seed, 5]))
    if case.label.startswith("only:"):
        arms = ModelArms(
            [m for m in models if m.name == case.label.removeprefix("only:")], "first", case.seed
        )
    else:
        arms = ModelArms(models, RULES[case.label], case.seed)
    result = simulate(
        landscape,
        cls(cls.Config()),
        budget=case.evaluations,
        workers=case.workers,
        n_tasks=case.n_tasks,
        seed=case.seed,
        realism=Realism(),
        models=arms,
        tokens=case.tokens,
    )
    counts = arms.counts()
    return {
        "final": result.final_quality,
        "best": result.best_quality,
        "expansions": result.expansions,
        "evaluations": result.evaluations,
        "tokens": result.extra["tokens"],
        "large_share": counts.get("large", 0) / max(1, sum(counts.values())),
    }


def run_all(cases: list[ModelCase], processes: int | None = None) -> list[dict[str, Any]]:
    """``run_model_case`` over all cases on every core (in order)."""
    processes = processes or os.cpu_count() or 1
    if processes == 1 or len(cases) < 4:
        return [run_model_case(c) for c in cases]
    with ProcessPoolExecutor(max_workers=processes) as pool:
        return list(pool.map(run_model_case, cases, chunksize=max(1, len(cases) // (8 * processes))))


def compare(
    *,
    family: str,
    models: str,
    scheduler: str,
    seeds: int,
    tokens: float,
    evaluations: int,
    workers: int,
    n_tasks: int,
) -> list[dict[str, Any]]:
    labels = [*RULES, *(f"only:{m}" for m in MODELS)]
    cases = [
        ModelCase(label, family, models, scheduler, s, tokens, evaluations, workers, n_tasks)
        for label in labels
        for s in range(seeds)
    ]
    results = run_all(cases)
    by: dict[str, list[dict[str, Any]]] = {label: [] for label in labels}
    for case, r in zip(cases, results, strict=True):
        by[case.label].append(r)
    final = {label: np.array([r["final"] for r in by[label]]) for label in labels}
    singles = [f"only:{m}" for m in MODELS]
    best_single = max(singles, key=lambda label: float(final[label].mean()))
    rows = []
    for label in [*labels, "best single"]:
        source = best_single if label == "best single" else label
        mean, lo, hi = ci95(final[source])
        d_mean, d_lo, d_hi = ci95(final["bandit"] - final[source])
        rows.append(
            {
                "family": family,
                "models": models,
                "rule": label if label != "best single" else f"best single ({best_single})",
                "final_quality_mean": mean,
                "final_quality_ci95": [lo, hi],
                "bandit_minus_this_mean": None if source == "bandit" else d_mean,
                "bandit_minus_this_ci95": None if source == "bandit" else [d_lo, d_hi],
                "best_quality_mean": float(np.mean([r["best"] for r in by[source]])),
                "expansions": float(np.mean([r["expansions"] for r in by[source]])),
                "evaluations": float(np.mean([r["evaluations"] for r in by[source]])),
                "tokens": float(np.mean([r["tokens"] for r in by[source]])),
                "large_share": float(np.mean([r["large_share"] for r in by[source]])),
            }
        )
    return rows


COLUMNS = [
    "rule",
    "final_quality_mean",
    "final_quality_ci95",
    "bandit_minus_this_mean",
    "bandit_minus_this_ci95",
    "best_quality_mean",
    "expansions",
    "evaluations",
    "tokens",
    "large_share",
]


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="metasearch bench models", description=__doc__.splitlines()[0])
    parser.add_argument("--family", default="default", help="the landscape family (see bench schedulers)")
    parser.add_argument(
        "--models", default="distinct,similar", help=f"comma-separated: {', '.join(MODEL_FAMILIES)}"
    )
    parser.add_argument("--scheduler", default="hgm")
    parser.add_argument("--tokens", type=float, default=8e6, help="the token budget of every run")
    parser.add_argument(
        "--evaluations", type=int, default=100_000, help="an evaluation budget too (default: never binds)"
    )
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--tasks", type=int, default=60)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    for models in [m.strip() for m in args.models.split(",") if m.strip()]:
        if models not in MODEL_FAMILIES:
            parser.error(f"--models: unknown {models!r}; choose from {', '.join(MODEL_FAMILIES)}")
        started = time.monotonic()
        got = compare(
            family=args.family,
            models=models,
            scheduler=args.scheduler,
            seeds=args.seeds,
            tokens=args.tokens,
            evaluations=args.evaluations,
            workers=args.workers,
            n_tasks=args.tasks,
        )
        rows += got
        if not args.json:
            title = f"models {models}, landscape {args.family}: {args.tokens:,.0f} tokens per run ({args.scheduler})"
            print_table(got, COLUMNS, title=title)
            print(
                f"{args.seeds} paired seeds, {args.workers} workers, {args.tasks} tasks; {time.monotonic() - started:.0f}s"
            )
    if args.json:
        print(json.dumps(rows))
    return 0
