"""Executor benchmark: `metasearch bench executor [--slots 16] [--rounds 8] [--job-s 0.5] [--json]`.

Worker-slot utilisation and per-job overhead of the Ray executor against the local (threads) executor on
this machine, for many short jobs. Both drive ``--slots`` jobs at a time from that many driver threads, as
``Study.run`` does; a Ray job is submitted and awaited through ``run_task`` (the RayRunner's path) on a local
Ray instance with ``--slots`` logical CPUs. A job sleeps ``--job-s`` seconds (no CPU, so a 2-core machine
can hold 16 slots). Utilisation = job seconds / (slots x wall seconds); overhead per job = what the driver
waited for a job minus the job's own time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def sleeper(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def drive(slots: int, jobs: int, job: Callable[[], float]) -> dict[str, float]:
    """Run ``jobs`` jobs on ``slots`` driver threads; wall time, utilisation and overhead per job."""
    waits: list[float] = []
    busy: list[float] = []

    def one(_: int) -> None:
        started = time.perf_counter()
        inside = job()
        waits.append(time.perf_counter() - started)
        busy.append(inside)

    started = time.perf_counter()
    with ThreadPoolExecutor(slots) as pool:
        list(pool.map(one, range(jobs)))
    wall = time.perf_counter() - started
    return {
        "wall_s": wall,
        "utilisation": sum(busy) / (slots * wall),
        "overhead_ms": statistics.mean(w - b for w, b in zip(waits, busy, strict=True)) * 1000,
    }


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="metasearch bench executor", description=__doc__.splitlines()[0])
    parser.add_argument("--slots", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=8, help="jobs per slot")
    parser.add_argument("--job-s", type=float, default=0.5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    from metasearch.cluster.ray_executor import run_task
    from metasearch.config import RayTaskResources

    jobs = args.slots * args.rounds
    local = drive(args.slots, jobs, lambda: sleeper(args.job_s))
    ray.init(num_cpus=args.slots, include_dashboard=False, log_to_driver=False)
    try:
        remote = ray.remote(sleeper)
        ask = RayTaskResources(num_cpus=1)
        # Warm-up: rounds of jobs as long as the measured ones make Ray start a worker process per slot
        # (it starts them lazily, a few at a time); a long study pays that once, not per job.
        drive(args.slots, 2 * args.slots, lambda: run_task(remote, (max(args.job_s, 1.0),), ask, 300, "warm"))
        on_ray = drive(args.slots, jobs, lambda: run_task(remote, (args.job_s,), ask, 300, "bench"))
    finally:
        ray.shutdown()
    rows: list[dict[str, Any]] = [
        {"executor": "threads (local)", "slots": args.slots, "jobs": jobs, **local},
        {"executor": "ray (local instance)", "slots": args.slots, "jobs": jobs, **on_ray},
    ]
    for row in rows:
        row["overhead_vs_local"] = row["overhead_ms"] / max(local["overhead_ms"], 1e-3)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{args.slots} slots, {jobs} jobs of {args.job_s:g} s each")
    print(f"{'executor':<22} {'wall s':>8} {'utilisation':>12} {'overhead/job ms':>16} {'x local':>8}")
    for row in rows:
        print(
            f"{row['executor']:<22} {row['wall_s']:>8.2f} {row['utilisation']:>11.1%} "
            f"{row['overhead_ms']:>16.1f} {row['overhead_vs_local']:>8.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(run())
