from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from metasearch.errors import ConfigError
from metasearch.sandboxes.local import LocalSandbox
from metasearch.sandboxes.protocol import Limits, Mount, RunSpec
from metasearch.suites.training import TrainingSuite
from metasearch.suites.training.data import TASKS, generate, score

SEEDS = Path(__file__).resolve().parents[2] / "seeds"
GOOD = {
    "optimizer": "adam",
    "lr": 0.003,
    "standardize": True,
    "hidden": 128,
    "depth": 2,
    "activation": "relu",
    "epochs": 200,
    "patience": 20,
    "schedule": "cosine",
}
BAD = {"optimizer": "sgd", "lr": 0.0003, "standardize": False, "hidden": 8, "depth": 1, "epochs": 5}


def test_data_are_deterministic_and_hidden_labels_stay_hidden(tmp_path: Path) -> None:
    a, b = generate("spirals"), generate("spirals")
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    suite = TrainingSuite()
    suite.prepare("training/spirals", tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "TASK.md",
        "output",
        "task.json",
        "test_x.npy",
        "train_x.npy",
        "train_y.npy",
    ]
    assert np.array_equal(np.load(tmp_path / "test_x.npy"), a[2])
    assert json.loads((tmp_path / "task.json").read_text())["classes"] == 2


def test_subsets() -> None:
    assert [t.id for t in TrainingSuite(TrainingSuite.Config(subset="smoke")).tasks()] == [
        "training/spirals",
        "training/regression",
    ]
    heldout = {t.id for t in TrainingSuite(TrainingSuite.Config(subset="heldout")).tasks()}
    assert heldout.isdisjoint({t.id for t in TrainingSuite().tasks()}) and heldout
    with pytest.raises(ConfigError, match=r"suite\.subset"):
        TrainingSuite(TrainingSuite.Config(subset="nope"))


def test_score_mapping() -> None:
    _, _, _, truth = generate("multiclass")
    assert score("multiclass", truth, truth)[0] == 1.0
    assert score("multiclass", np.zeros_like(truth), truth)[0] < 0.05
    _, _, _, y = generate("regression")
    assert score("regression", y, y)[0] == pytest.approx(1.0)
    assert score("regression", np.full_like(y, y.mean()), y)[0] == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (None, "no predictions"),
        (b"garbage", "unreadable"),
        (np.zeros(3), "shape"),
        (np.full(1000, np.nan), "NaN"),
    ],
)
def test_grading_bad_artifacts_scores_zero_with_a_reason(tmp_path: Path, content, needle: str) -> None:
    out = tmp_path / "output"
    out.mkdir()
    if isinstance(content, bytes):
        (out / "predictions.npy").write_bytes(content)
    elif content is not None:
        np.save(out / "predictions.npy", content)
    result = TrainingSuite().grade("training/spirals", out, LocalSandbox())
    assert result.score == 0.0 and result.error and needle in result.error


def test_grading_a_perfect_artifact(tmp_path: Path) -> None:
    np.save(tmp_path / "predictions.npy", generate("xor")[3])
    result = TrainingSuite().grade("training/xor", tmp_path, LocalSandbox())
    assert result.score == 1.0 and result.metrics["accuracy"] == 1.0 and result.error is None


def _run_trainer(tmp_path: Path, knobs: dict, task_id: str) -> float:
    agent = tmp_path / f"agent-{hash(json.dumps(knobs, sort_keys=True)) & 0xFFFF}"
    if not agent.exists():
        shutil.copytree(SEEDS / "trainer", agent)
        values = json.loads((agent / "knobs.json").read_text())
        (agent / "knobs.json").write_text(json.dumps({**values, **knobs}))
    suite = TrainingSuite(TrainingSuite.Config(time_budget_s=20))
    task_dir = tmp_path / task_id.replace("/", "_") / str(len(knobs))
    suite.prepare(task_id, task_dir)
    sandbox = LocalSandbox()
    run = sandbox.run(
        RunSpec(
            command=["python3", "-m", "trainer.solve", "/task"],
            mounts=(Mount(agent, "/agent"), Mount(task_dir, "/task", read_only=False)),
            workdir="/agent",
            env={"PYTHONPATH": "/agent"},
            limits=Limits(timeout_s=120),
        )
    )
    assert run.ok, run.stderr[-2000:]
    return suite.grade(task_id, task_dir / "output", sandbox).score


@pytest.mark.parametrize("task", ["training/spirals", "training/xor"])
def test_a_good_recipe_beats_a_bad_one_by_a_wide_margin(tmp_path: Path, task: str) -> None:
    assert set(TASKS)  # the suite has tasks
    good, bad = _run_trainer(tmp_path, GOOD, task), _run_trainer(tmp_path, BAD, task)
    assert good > 0.6 and good - bad > 0.4, (good, bad)
