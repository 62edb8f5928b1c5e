from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from metasearch.errors import ConfigError
from metasearch.sandboxes.local import LocalSandbox
from metasearch.suites.protocol import Suite
from metasearch.suites.training import TrainingSuite
from metasearch.suites.training.data import TASKS, generate, score

TRAINER = Path(__file__).resolve().parents[2] / "seeds" / "trainer"
DEFAULT_TASKS = [t.id for t in TrainingSuite().tasks()]
# A reasonable MLP recipe and a deliberately poor one (linear model, tiny learning rate, raw features).
GOOD = {
    "optimizer": "adam",
    "lr": 0.003,
    "hidden": 64,
    "depth": 2,
    "activation": "relu",
    "epochs": 100,
    "schedule": "cosine",
    "standardize": True,
}
BAD = {"depth": 0, "optimizer": "sgd", "lr": 0.0003, "epochs": 10, "standardize": False}


def _visible(task_dir: Path) -> dict[str, np.ndarray]:
    return {p.name: np.load(p) for p in sorted(task_dir.glob("*.npy"))}


def test_suite_satisfies_the_protocol() -> None:
    suite = TrainingSuite()
    assert isinstance(suite, Suite)
    assert (suite.name, suite.artifact_path, suite.needs_docker, suite.needs_gpu) == (
        "training",
        "output",
        False,
        False,
    )
    assert len(DEFAULT_TASKS) >= 5 and all(t.startswith("training/") for t in DEFAULT_TASKS)
    assert all(t.timeout_s > suite.config.time_budget_s for t in suite.tasks())


def test_data_are_deterministic_and_distinct_per_task(tmp_path: Path) -> None:
    a, b = generate("spirals"), generate("spirals")
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    suite = TrainingSuite()
    suite.prepare("training/multiclass", tmp_path / "one")
    suite.prepare("training/multiclass", tmp_path / "two")
    one, two = _visible(tmp_path / "one"), _visible(tmp_path / "two")
    assert one.keys() == two.keys() and all(np.array_equal(one[k], two[k]) for k in one)
    assert (tmp_path / "one" / "task.json").read_text() == (tmp_path / "two" / "task.json").read_text()
    assert not np.array_equal(generate("xor")[0][:, :2], generate("imbalanced")[0][:, :2])


def test_scale_multiplies_the_sample_counts(tmp_path: Path) -> None:
    small = TrainingSuite(TrainingSuite.Config(scale=0.2))
    small.prepare("training/xor", tmp_path)
    info = json.loads((tmp_path / "task.json").read_text())
    assert (info["n_train"], info["n_test"]) == (300, 200)
    assert np.load(tmp_path / "train_x.npy").shape == (300, 10)


def test_prepare_writes_only_visible_files(tmp_path: Path) -> None:
    suite = TrainingSuite()
    for task_id in [t.id for t in suite.tasks("all")]:
        dest = tmp_path / task_id.split("/")[1]
        suite.prepare(task_id, dest)
        assert sorted(p.name for p in dest.iterdir()) == [
            "TASK.md",
            "output",
            "task.json",
            "test_x.npy",
            "train_x.npy",
            "train_y.npy",
        ]
        train_x, train_y, test_x, test_y = generate(task_id.split("/")[1])
        visible = _visible(dest)
        assert np.array_equal(visible["train_x.npy"], train_x) and np.array_equal(
            visible["test_x.npy"], test_x
        )
        # The only label file holds exactly the training labels: the hidden ones have nowhere to hide.
        assert np.array_equal(visible["train_y.npy"], train_y) and len(train_y) == len(train_x)
        assert not np.array_equal(train_y[: len(test_y)], test_y)
        info = json.loads((dest / "task.json").read_text())
        assert {"kind", "metric", "classes", "time_budget_s", "description"} <= info.keys()
        assert list(dest.joinpath("output").iterdir()) == []


def test_subsets() -> None:
    assert [t.id for t in TrainingSuite(TrainingSuite.Config(subset="smoke")).tasks()] == [
        "training/spirals",
        "training/regression",
    ]
    heldout = {t.id for t in TrainingSuite(TrainingSuite.Config(subset="heldout")).tasks()}
    assert heldout and heldout.isdisjoint(DEFAULT_TASKS)
    assert len(TrainingSuite().tasks("all")) == len(TASKS)
    with pytest.raises(ConfigError, match=r"suite\.subset"):
        TrainingSuite(TrainingSuite.Config(subset="nope"))
    with pytest.raises(ConfigError, match="unknown subset"):
        TrainingSuite().tasks("nope")
    assert [t.id for t in TrainingSuite().tasks("extra")] == ["training/patterns"]
    with pytest.raises(ConfigError, match="unknown task"):
        TrainingSuite().prepare("training/nope", Path("/nonexistent"))


@pytest.mark.parametrize("name", sorted(TASKS))
def test_score_mapping_is_one_when_perfect_and_zero_at_chance(name: str) -> None:
    truth = generate(name)[3]
    rng = np.random.default_rng(0)
    assert score(name, truth, truth)[0] == pytest.approx(1.0)
    if TASKS[name]["kind"] == "regression":
        assert score(name, np.full_like(truth, truth.mean()), truth)[0] == pytest.approx(0.0, abs=1e-6)
        assert score(name, rng.permutation(truth), truth)[0] == 0.0  # worse than the mean: clipped
        half = score(name, truth + rng.normal(0, truth.std() / np.sqrt(2), truth.shape), truth)
        assert half[0] == pytest.approx(0.5, abs=0.1) and half[0] == half[1]["r2"]
    else:
        k = TASKS[name]["classes"]
        assert score(name, rng.integers(0, k, truth.shape), truth)[0] < 0.1
        assert score(name, np.zeros_like(truth), truth)[0] < 0.1  # the majority class is no escape
        flipped = truth.copy()
        flipped[: len(truth) // 4] = (truth[: len(truth) // 4] + 1) % k
        mapped, metrics = score(name, flipped, truth)
        if TASKS[name]["metric"] == "accuracy":  # 3/4 right
            assert metrics["accuracy"] == 0.75 and mapped == pytest.approx((0.75 - 1 / k) / (1 - 1 / k))
        else:
            assert mapped == pytest.approx((metrics["balanced_accuracy"] - 0.5) / 0.5) and 0.3 < mapped < 0.7


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (None, "no predictions"),
        (b"garbage", "unreadable"),
        (np.zeros(3), "shape"),
        (np.zeros((1000, 2)), "shape"),
        (np.full(1000, np.nan), "NaN"),
        (np.array(["1"] * 1000), "dtype"),
        (np.array([{"a": 1}] * 1000, dtype=object), "unreadable"),
    ],
)
def test_grading_bad_artifacts_scores_zero_with_a_reason(
    tmp_path: Path, content: bytes | np.ndarray | None, needle: str
) -> None:
    out = tmp_path / "output"
    out.mkdir()
    if isinstance(content, bytes):
        (out / "predictions.npy").write_bytes(content)
    elif content is not None:
        np.save(out / "predictions.npy", content, allow_pickle=True)
    result = TrainingSuite().grade("training/spirals", out, LocalSandbox())
    assert result.score == 0.0 and result.error and needle in result.error, result


def test_grading_good_artifacts(tmp_path: Path) -> None:
    truth = generate("xor")[3]
    np.save(tmp_path / "predictions.npy", truth)
    result = TrainingSuite().grade("training/xor", tmp_path, LocalSandbox())
    assert result.score == 1.0 and result.metrics["accuracy"] == 1.0 and result.error is None
    # Floats that are class ids up to rounding count as those ids.
    np.save(tmp_path / "predictions.npy", truth.astype(np.float32) - 1e-4)
    assert TrainingSuite().grade("training/xor", tmp_path, LocalSandbox()).score == 1.0
    noisy = generate("regression")[3] + np.random.default_rng(0).normal(0, 0.3, 1000)
    np.save(tmp_path / "predictions.npy", noisy)
    result = TrainingSuite().grade("training/regression", tmp_path, LocalSandbox())
    assert 0.8 < result.score < 1.0 and result.metrics["r2"] == pytest.approx(result.score)


def test_grading_a_scaled_suite_uses_the_scaled_labels(tmp_path: Path) -> None:
    suite = TrainingSuite(TrainingSuite.Config(scale=0.5))
    np.save(tmp_path / "predictions.npy", generate("moons", 0.5)[3])
    assert suite.grade("training/moons", tmp_path, LocalSandbox()).score == 1.0
    np.save(tmp_path / "predictions.npy", generate("moons")[3])
    assert "shape" in (
        TrainingSuite(TrainingSuite.Config(scale=0.5)).grade("training/moons", tmp_path, LocalSandbox()).error
        or ""
    )


def test_a_good_recipe_beats_a_bad_one_by_a_wide_margin_on_every_task_and_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(TRAINER))
    from trainer.solve import load_knobs, train  # the seed agent, in-process to keep this fast

    # a budget no run reaches: the recipes are compared, not how busy the machine is (training stops at
    # the budget, and a machine running other tests can halve the epochs)
    suite = TrainingSuite(TrainingSuite.Config(time_budget_s=3600))
    margins = []
    for task_id in DEFAULT_TASKS:
        name = task_id.split("/")[1]
        suite.prepare(task_id, tmp_path / name)
        truth = generate(name)[3]
        for seed in range(3):
            good = score(name, train(tmp_path / name, {**load_knobs(), **GOOD, "seed": seed}), truth)[0]
            bad = score(name, train(tmp_path / name, {**load_knobs(), **BAD, "seed": seed}), truth)[0]
            assert good > 0.8 and good - bad > 0.4, (task_id, seed, good, bad)
            margins.append(good - bad)
    assert float(np.mean(margins)) > 0.7


KEY = "5eed" * 8


def test_a_study_key_keeps_the_held_out_labels_out_of_the_public_generator(tmp_path: Path) -> None:
    """An agent that has read data.py can regenerate the public data and answer with its labels; under a
    key (a study draws one) the same agent is at chance, while a real model scores as on the public data."""
    keyed = TrainingSuite(TrainingSuite.Config(data_key=KEY))
    keyed.prepare("training/spirals", tmp_path / "task")
    given = np.load(tmp_path / "task" / "test_x.npy")
    _, _, public_x, public_y = generate("spirals")
    assert given.shape == public_x.shape and not np.array_equal(given, public_x)
    out = tmp_path / "task" / "output"
    np.save(out / "predictions.npy", public_y)  # the recomputed public labels
    assert keyed.grade("training/spirals", out, LocalSandbox()).score < 0.2
    assert TrainingSuite().grade("training/spirals", out, LocalSandbox()).score == 1.0  # what a key prevents
    np.save(out / "predictions.npy", generate("spirals", 1.0, KEY)[3])  # the keyed labels: the grader's
    assert keyed.grade("training/spirals", out, LocalSandbox()).score == 1.0
    with pytest.raises(Exception, match="data_key"):
        TrainingSuite.Config(data_key="not hex")
