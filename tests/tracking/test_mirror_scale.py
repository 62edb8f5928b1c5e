"""Scale: what the mirror costs the study thread, and how fast the background catches up.

The default run mirrors a 300-agent synthetic journal; ``-m slow`` mirrors 5,000 agents (several minutes).
Numbers are printed (run with ``-s``) for the report; the asserts are loose bounds a regression would break
(a callback that did MLflow I/O on the study thread costs milliseconds, not microseconds).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient
from tracking_helpers import write_synthetic_study

from metasearch.events import EvaluationRecorded
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
        "mirror_seconds": elapsed,
        "agent_runs_per_s": agents / elapsed,
        "journal_lines_per_s": lines / elapsed,
    }
    print({k: round(v, 2) for k, v in numbers.items()})
    return numbers


def test_300_agents_cost_the_study_thread_microseconds(tmp_path: Path) -> None:
    root = write_synthetic_study(tmp_path / "scale300", agents=300, evals_per_agent=3)
    numbers = mirror_under_load(root, 300)
    assert numbers["callback_median_us"] < 50
    assert numbers["events_timed"] > 100, "the study thread kept going while the mirror worked"


@pytest.mark.slow
def test_5000_agents(tmp_path: Path) -> None:
    root = write_synthetic_study(tmp_path / "scale5000", agents=5000, evals_per_agent=3)
    numbers = mirror_under_load(root, 5000)
    assert numbers["callback_median_us"] < 50
