"""`tracking_callbacks(study_dir, settings)`, the hook the CLI calls, on the real pipeline (quickstart, local sandbox)."""

from __future__ import annotations

from pathlib import Path

from mlflow import MlflowClient

from metasearch import launch
from metasearch.config import load_config
from metasearch.tracking import store, tracking_callbacks
from metasearch.tracking.mlflow_callback import MlflowMirror

QUICKSTART = Path(__file__).resolve().parents[2] / "configs" / "quickstart.yaml"
SMALL = [
    "sandbox.name=local",
    "suite.subset=smoke",
    "suite.time_budget_s=2",
    "budget.evaluations=1",
    "budget.wall_time_s=120",
]


def test_disabled_tracking_adds_no_callback(tmp_path: Path) -> None:
    resolved = load_config(QUICKSTART, [*SMALL, "tracking.mlflow.enabled=false"])
    launched = launch.create(resolved, tmp_path / "off")
    try:
        assert tracking_callbacks(launched.archive.root, launched.resolved.config.tracking) == []
    finally:
        launched.close()


def test_a_real_study_is_mirrored_through_the_cli_hook(tmp_path: Path) -> None:
    launched = launch.create(load_config(QUICKSTART, SMALL), tmp_path / "quick")
    try:
        [mirror] = tracking_callbacks(launched.archive.root, launched.resolved.config.tracking)
        assert isinstance(mirror, MlflowMirror)
        launched.study.callbacks.append(mirror)
        launched.study.run(launched.runner, workers=2)
    finally:
        launched.close()
    assert mirror.closed is True, mirror.last_error  # StudyFinished flushed and stopped it
    index = launched.archive.index
    client = MlflowClient(store.default_tracking_uri(launched.archive.root))
    exp = store.find_experiment(client, launched.archive.root, "quick")
    assert exp is not None
    [study_run] = store.runs_by_kind(client, exp, "study")
    assert study_run.data.params["proposer.name"] == "knobs"
    assert study_run.data.metrics["evaluations"] == len(index.evaluations) > 0
    runs = {r.data.tags[store.AGENT_ID]: r for r in store.runs_by_kind(client, exp, "agent")}
    assert set(runs) == set(index.agents)
    for agent in index.agents.values():
        params = runs[agent.id].data.params
        assert params["commit"] == agent.commit
        assert params["proposer"] == ("seed" if agent.parent_id is None else "knobs")
