"""Tracking benchmark: `python bench/tracking.py [--agents 5000] [--json]`.

* What mirroring to MLflow costs the search: the study thread's callback cost, and a fixed chunk of
  study-thread work timed while the background mirror works, against the same work timed before it starts
  (ratio ~1.0 means the search does not slow down); and how fast the mirror catches up (agent runs/s).
* ``metasearch status`` on a large study against a study a tenth of its size (linear: ~10x; target < 1 s).

The synthetic studies are journals in the archive's documented format (``tests/tracking/tracking_helpers``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mlflow import MlflowClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "tracking"))
from tracking_helpers import write_synthetic_study

from metasearch.events import EvaluationRecorded
from metasearch.report import print_bench_rows, status_dict
from metasearch.tracking import store
from metasearch.tracking.mlflow_callback import MlflowMirror
from metasearch.types import Evaluation


def busy_work() -> float:
    """A fixed chunk of pure-Python work (~1 ms) standing in for the study thread's own bookkeeping."""
    started = time.perf_counter()
    total = 0
    for i in range(20_000):
        total += i * i % 7
    return time.perf_counter() - started


def mirror_under_load(root: Path, agents: int) -> dict[str, float]:
    baseline = statistics.median(busy_work() for _ in range(200))
    lines = len((root / "journal.jsonl").read_bytes().splitlines())
    event = EvaluationRecorded(Evaluation("job", "a00000", "t0", 1.0))
    costs: list[float] = []
    work: list[float] = []
    started = time.monotonic()
    mirror = MlflowMirror(
        root, poll_s=0.2, batch_delay_s=0.05, lineage_interval_s=10.0, final_flush_s=1800
    ).start()
    size = (root / "journal.jsonl").stat().st_size
    # The study thread while the background mirrors: one event, then some work, every few milliseconds.
    while mirror.engine is None or mirror.engine.mirrored < size:
        t = time.perf_counter()
        mirror(None, event)
        costs.append(time.perf_counter() - t)
        work.append(busy_work())
        time.sleep(0.002)
        assert time.monotonic() - started < 1800, "mirroring did not finish"
    assert mirror.close(600), mirror.last_error
    elapsed = time.monotonic() - started
    client = MlflowClient(store.default_tracking_uri(root))
    exp = store.find_experiment(client, root, root.name)
    assert exp is not None
    assert len(store.runs_by_kind(client, exp, "agent")) == agents
    costs.sort()
    numbers = {
        "agents": agents,
        "journal_lines": lines,
        "events_timed": len(costs),
        "callback_median_us": 1e6 * costs[len(costs) // 2],
        "callback_p99_us": 1e6 * costs[int(len(costs) * 0.99)],
        "callback_max_us": 1e6 * costs[-1],
        "study_work_slowdown": statistics.median(work) / baseline,
        "work_baseline_ms": baseline * 1000,
        "mirror_seconds": elapsed,
        "agent_runs_per_s": agents / elapsed,
        "journal_lines_per_s": lines / elapsed,
    }
    print({k: round(v, 2) for k, v in numbers.items()})
    return numbers


def status_seconds(root: Path, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        status_dict(root)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="metasearch bench tracking", description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=5000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ms-bench-tracking-") as tmp:
        small = write_synthetic_study(
            Path(tmp) / "small", agents=max(1, args.agents // 10), evals_per_agent=3
        )
        large = write_synthetic_study(Path(tmp) / "large", agents=args.agents, evals_per_agent=3)
        status_small, status_large = status_seconds(small), status_seconds(large)
        numbers = mirror_under_load(large, args.agents)
    rows = [
        {"measure": "study-thread work while mirroring, median ms", "baseline": numbers["work_baseline_ms"],
         "value": numbers["work_baseline_ms"] * numbers["study_work_slowdown"],
         "ratio": numbers["study_work_slowdown"], "target": "<= 1.2x (search not slowed)"},
        {"measure": "callback on the study thread, median us", "baseline": None,
         "value": numbers["callback_median_us"], "ratio": None, "target": "< 50 us"},
        {"measure": f"mirror {args.agents} agent runs, agent runs/s", "baseline": None,
         "value": numbers["agent_runs_per_s"], "ratio": None, "target": ""},
        {"measure": f"status, {args.agents} vs {max(1, args.agents // 10)} agents, s", "baseline": status_small,
         "value": status_large, "ratio": status_large / status_small, "target": "< 1 s; ~10x (linear)"},
    ]  # fmt: skip
    if args.json:
        print(json.dumps(rows))
    else:
        print_bench_rows(rows)
    ok = numbers["study_work_slowdown"] <= 1.2 and numbers["callback_median_us"] < 50 and status_large < 1.0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
