"""``metasearch bench schedulers``: every scheduler on the same simulated landscapes and seeds (paired).

Per scheduler: true quality of the final selected agent (mean and 95% CI over seeds), best true quality
in its tree, regret against the best agent any scheduler found on the same seed, evaluations and
expansions used, the weighted correlation of the clade estimate (and of the own score) with the best
descendant's empirical score, and the paired difference to ``hgm`` with its 95% CI.
``--scale`` instead measures decision latency with 10,000 and 100,000 agents against a naive baseline
that recomputes clade sums by walking the tree for every decision (as the public HGM code does).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import time
import tracemalloc
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from metasearch.registry import SCHEDULERS
from metasearch.schedulers.base import SearchState
from metasearch.schedulers.cmp import SearchTree
from metasearch.sim.engine import cmp_correlations, simulate
from metasearch.sim.landscape import default_family
from metasearch.types import Budget, Usage

VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "hgm": ("hgm", {}),
    "hgm+pending": ("hgm", {"pending_aware": True}),
    "hgm+failures": ("hgm", {"count_failed_expansions": True}),
    "mcts": ("mcts", {}),
    "dgm": ("dgm", {}),
    "greedy": ("greedy", {}),
    "random": ("random", {}),
}


def _factory(spec: str | None) -> Any:
    if not spec:
        return default_family
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)


def _one(args: tuple[str, str | None, int, int, int, int]) -> dict[str, Any]:
    variant, landscape_spec, seed, budget, workers, n_tasks = args
    name, options = VARIANTS[variant]
    cls = SCHEDULERS.resolve(name)
    landscape = _factory(landscape_spec)(np.random.default_rng([seed, 0]))
    result = simulate(
        landscape, cls(cls.Config(**options)), budget=budget, workers=workers, n_tasks=n_tasks, seed=seed
    )
    clade_corr, own_corr, n_corr = cmp_correlations(result.tree)
    return {
        "variant": variant,
        "seed": seed,
        "final": result.final_quality,
        "best": result.best_quality,
        "evaluations": result.evaluations,
        "expansions": result.expansions,
        "failed": result.failed,
        "clade_corr": clade_corr,
        "own_corr": own_corr,
        "n_corr": n_corr,
    }


def _ci(values: np.ndarray) -> tuple[float, float, float]:
    mean = float(np.mean(values))
    half = 1.96 * float(np.std(values, ddof=1)) / math.sqrt(len(values)) if len(values) > 1 else float("nan")
    return mean, mean - half, mean + half


def compare(
    variants: list[str], *, landscape: str | None, seeds: int, budget: int, workers: int, n_tasks: int
) -> list[dict[str, Any]]:
    jobs = [(v, landscape, s, budget, workers, n_tasks) for v in variants for s in range(seeds)]
    with ProcessPoolExecutor() as pool:
        rows = list(pool.map(_one, jobs, chunksize=8))
    by = {v: sorted((r for r in rows if r["variant"] == v), key=lambda r: r["seed"]) for v in variants}
    best_any = np.max([[r["best"] for r in by[v]] for v in variants], axis=0)
    base = np.array([r["final"] for r in by["hgm"]]) if "hgm" in by else None
    out = []
    for v in variants:
        final = np.array([r["final"] for r in by[v]])
        mean, lo, hi = _ci(final)
        clade = np.array([r["clade_corr"] for r in by[v]])
        own = np.array([r["own_corr"] for r in by[v]])
        entry: dict[str, Any] = {
            "scheduler": v,
            "final_quality_mean": mean,
            "final_quality_ci95": [lo, hi],
            "best_quality_mean": float(np.mean([r["best"] for r in by[v]])),
            "regret_mean": float(np.mean(best_any - final)),
            "evaluations": float(np.mean([r["evaluations"] for r in by[v]])),
            "expansions": float(np.mean([r["expansions"] for r in by[v]])),
            "cmp_correlation": float(np.nanmean(clade)) if np.isfinite(clade).any() else None,
            "own_correlation": float(np.nanmean(own)) if np.isfinite(own).any() else None,
        }
        if base is not None:
            d_mean, d_lo, d_hi = _ci(final - base)
            entry["diff_vs_hgm_mean"], entry["diff_vs_hgm_ci95"] = d_mean, [d_lo, d_hi]
        out.append(entry)
    return out


def scale(sizes: tuple[int, ...] = (10_000, 100_000), decisions: int = 200) -> list[dict[str, Any]]:
    """Decision latency and memory per agent at large trees, against a walk-the-tree baseline."""
    rows = []
    rng = np.random.default_rng(0)
    tasks = tuple(f"t{i}" for i in range(60))
    cls = SCHEDULERS.resolve("hgm")
    for n in sizes:
        parents = [int(rng.integers(0, i)) for i in range(1, n)]  # a random recursive tree
        tracemalloc.start()
        tree = SearchTree()
        tree.add_agent("a0", None)
        for i in range(1, n):
            tree.add_agent(f"a{i}", f"a{parents[i - 1]}")
        for i in range(n):
            tree.add_result(f"a{i}", "t0", float(rng.random() < 0.5))
        memory = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        scheduler = cls(cls.Config(initial_expansions=0))
        state = SearchState(tree, tasks, Budget(evaluations=10 * n), Usage(evaluations=n * 3), 0, 0)
        times = []
        for _ in range(decisions):
            t = time.perf_counter()
            scheduler.next_job(state, rng)
            times.append(time.perf_counter() - t)
        naive = []
        for _ in range(3):
            t = time.perf_counter()
            _naive_clade_sums(tree)
            naive.append(time.perf_counter() - t)
        rows.append(
            {
                "agents": n,
                "decision_ms_median": 1e3 * float(np.median(times)),
                "decision_ms_p95": 1e3 * float(np.percentile(times, 95)),
                "naive_walk_ms_median": 1e3 * float(np.median(naive)),
                "bytes_per_agent": memory / n,
            }
        )
    return rows


def _naive_clade_sums(tree: SearchTree) -> list[float]:
    """What a decision costs when clade lists are rebuilt by walking the tree (the baseline)."""
    sums = []
    for v in range(len(tree)):
        stack, s = [v], 0.0
        while stack:
            d = stack.pop()
            s += float(tree.own_s[d])
            stack.extend(tree.children[d])
        sums.append(s)
    return sums


def _fmt(x: Any) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if isinstance(x, list):
        return "[" + ", ".join(f"{v:+.3f}" for v in x) + "]"
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def print_table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(*columns)
    for r in rows:
        table.add_row(*[_fmt(r.get(c)) for c in columns])
    Console(width=220).print(table)


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="metasearch bench schedulers", description=__doc__.splitlines()[0])
    parser.add_argument("--landscape", default=None, help="module:factory, factory(rng) -> Landscape")
    parser.add_argument("--budget", type=int, default=800)
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--tasks", type=int, default=60)
    parser.add_argument("--schedulers", default=",".join(VARIANTS))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--scale", action="store_true")
    args = parser.parse_args(argv)
    if args.scale:
        rows = scale()
        if args.json:
            print(json.dumps(rows))
        else:
            for r in rows:
                r["speedup_vs_naive"] = r["naive_walk_ms_median"] / r["decision_ms_median"]
            print_table(
                rows,
                [
                    "agents",
                    "decision_ms_median",
                    "decision_ms_p95",
                    "naive_walk_ms_median",
                    "speedup_vs_naive",
                    "bytes_per_agent",
                ],
            )
        return 0
    variants = [v.strip() for v in args.schedulers.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown scheduler(s) {unknown}; choose from {', '.join(VARIANTS)}")
    started = time.monotonic()
    rows = compare(
        variants,
        landscape=args.landscape,
        seeds=args.seeds,
        budget=args.budget,
        workers=args.workers,
        n_tasks=args.tasks,
    )
    if args.json:
        print(json.dumps(rows))
    else:
        print_table(
            rows,
            [
                "scheduler",
                "final_quality_mean",
                "final_quality_ci95",
                "best_quality_mean",
                "regret_mean",
                "evaluations",
                "expansions",
                "cmp_correlation",
                "own_correlation",
                "diff_vs_hgm_mean",
                "diff_vs_hgm_ci95",
            ],
        )
        print(
            f"{args.seeds} paired seeds, budget {args.budget}, {args.workers} workers, {args.tasks} tasks; {time.monotonic() - started:.0f}s"
        )
    return 0
