"""The trainer's own smoke tests (its ``entry.smoke``): fast, offline, no metasearch needed."""

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import tomllib
import unittest
from pathlib import Path

import numpy as np
from trainer.solve import ROOT, load_knobs
from trainer.solve import train as _train

QUICK = {"epochs": 3, "hidden": 8}
# A fixed, sound recipe: tests of *learning* must not depend on knobs.json, which a search may set to any
# legal (possibly poor) values; this file is protected, the knobs are not.
FIXED = {
    "activation": "tanh",
    "batch_size": 64,
    "class_weight": "none",
    "depth": 1,
    "dropout": 0.0,
    "epochs": 20,
    "hidden": 16,
    "lr": 0.01,
    "optimizer": "adam",
    "patience": 0,
    "schedule": "constant",
    "seed": 0,
    "standardize": True,
    "val_fraction": 0.15,
    "weight_decay": 0.0,
}


def train(task_dir: Path, knobs: dict) -> np.ndarray:
    """The trainer, with its progress log kept out of the test output (a failure stays readable)."""
    with contextlib.redirect_stderr(io.StringIO()):
        return _train(task_dir, knobs)


def write_task(d: Path, kind: str = "classification", classes: int = 2, seed: int = 0) -> np.ndarray:
    """A tiny linearly separable (or linear regression) task; returns the hidden test targets. Its time
    budget is ample: what these tests check must not depend on how busy the machine is."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(400, 3)).astype(np.float32) * np.array([1.0, 20.0, 0.05], dtype=np.float32)
    y = (x[:, 0] > 0).astype(np.int64) if kind == "classification" else (2 * x[:, 0] + 1).astype(np.float32)
    np.save(d / "train_x.npy", x[:300])
    np.save(d / "train_y.npy", y[:300])
    np.save(d / "test_x.npy", x[300:])
    # Runs stop at their epochs, never at the clock: on a loaded machine a short budget cuts training at
    # a different step each time (the learning and determinism checks then fail for the machine's sake).
    info = {"task": "smoke", "kind": kind, "classes": classes, "time_budget_s": 3600}
    (d / "task.json").write_text(json.dumps(info))
    return y[300:]


class KnobsTest(unittest.TestCase):
    def test_every_declared_knob_has_a_value_in_range(self):
        params = tomllib.loads((ROOT / "agent.toml").read_text())["knobs"]["params"]
        knobs = load_knobs()
        for name, p in params.items():
            self.assertIn(name, knobs)
            if p["type"] == "categorical":
                self.assertIn(knobs[name], p["choices"], name)
            else:
                self.assertTrue(p["low"] <= knobs[name] <= p["high"], name)

    def test_every_categorical_choice_and_range_end_runs(self):
        params = tomllib.loads((ROOT / "agent.toml").read_text())["knobs"]["params"]
        variants = [
            {name: c} for name, p in params.items() if p["type"] == "categorical" for c in p["choices"]
        ]
        numeric = [name for name, p in params.items() if p["type"] != "categorical"]
        variants += [{name: params[name][end]} for name in numeric for end in ("low", "high")]
        with tempfile.TemporaryDirectory() as tmp:
            write_task(Path(tmp))
            for change in variants:
                # Expensive ends (many epochs, wide nets) are capped; the point is that no legal value crashes.
                knobs = {**FIXED, "patience": 2, **change}
                knobs["epochs"], knobs["hidden"] = min(knobs["epochs"], 3), min(knobs["hidden"], 32)
                with self.subTest(**change):
                    pred = train(Path(tmp), knobs)
                    self.assertEqual(pred.shape, (100,))


class TrainTest(unittest.TestCase):
    def test_current_knobs_produce_valid_predictions(self):
        knobs = load_knobs()
        knobs["epochs"] = min(knobs["epochs"], 20)  # any legal value must work; a short run shows it
        with tempfile.TemporaryDirectory() as tmp:
            write_task(Path(tmp), kind="classification", classes=3)
            pred = train(Path(tmp), knobs)
            self.assertEqual((pred.shape, pred.dtype), ((100,), np.int64))
            self.assertTrue(set(np.unique(pred)) <= {0, 1, 2})
            write_task(Path(tmp), kind="regression", classes=0)
            pred = train(Path(tmp), knobs)
            self.assertEqual((pred.shape, pred.dtype), ((100,), np.float32))

    def test_a_fixed_recipe_learns_a_linear_classification(self):
        with tempfile.TemporaryDirectory() as tmp:
            truth = write_task(Path(tmp))
            pred = train(Path(tmp), FIXED)
        self.assertGreater(float(np.mean(pred == truth)), 0.85)

    def test_regression_predictions_are_on_the_target_scale(self):
        with tempfile.TemporaryDirectory() as tmp:
            truth = write_task(Path(tmp), kind="regression", classes=0)
            pred = train(Path(tmp), FIXED)
        r2 = 1 - np.sum((pred - truth) ** 2) / np.sum((truth - truth.mean()) ** 2)
        self.assertGreater(r2, 0.8)

    def test_same_task_and_knobs_give_the_same_predictions(self):
        with tempfile.TemporaryDirectory() as tmp:
            write_task(Path(tmp))
            knobs = {**FIXED, **QUICK}
            self.assertTrue(np.array_equal(train(Path(tmp), knobs), train(Path(tmp), knobs)))

    def test_training_stops_at_the_time_budget(self):
        with tempfile.TemporaryDirectory() as tmp:
            write_task(Path(tmp))
            info = json.loads((Path(tmp) / "task.json").read_text())
            (Path(tmp) / "task.json").write_text(json.dumps({**info, "time_budget_s": 1}))
            start = time.monotonic()
            train(Path(tmp), {**FIXED, "epochs": 100000, "batch_size": 32})
            # 100000 epochs take many minutes; stopping near the 1 s budget, even on a busy machine, is fast
            self.assertLess(time.monotonic() - start, 30.0)

    def test_command_line_writes_predictions(self):
        with tempfile.TemporaryDirectory() as tmp:
            write_task(Path(tmp))
            env = {**os.environ, "PYTHONPATH": str(ROOT)}
            run = subprocess.run(
                [sys.executable, "-m", "trainer.solve", tmp],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
            )
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertIn("[trainer] wrote 100 predictions", run.stderr)
            self.assertEqual(np.load(Path(tmp) / "output" / "predictions.npy").shape, (100,))


if __name__ == "__main__":
    unittest.main()
