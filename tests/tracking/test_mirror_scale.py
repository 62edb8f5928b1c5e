"""Mirroring a 300-agent synthetic study while the study thread keeps working: every agent run lands and
the study thread is never blocked. Costs and speed are measured by ``bench/tracking.py`` (5,000 agents)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tracking_helpers import write_synthetic_study

BENCH = Path(__file__).resolve().parents[2] / "bench" / "tracking.py"


def _bench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_tracking", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_300_agents_are_mirrored_while_the_study_thread_keeps_going(tmp_path: Path) -> None:
    root = write_synthetic_study(tmp_path / "scale300", agents=300, evals_per_agent=3)
    numbers = _bench().mirror_under_load(root, 300)  # asserts every agent run is in MLflow
    assert numbers["events_timed"] > 100, "the study thread kept going while the mirror worked"
