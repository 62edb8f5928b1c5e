import json
import tempfile
import unittest
from pathlib import Path

import numpy as np
from trainer.solve import ROOT, load_knobs, train


class TrainerTest(unittest.TestCase):
    def test_knobs_parse_and_cover_the_manifest(self):
        knobs = load_knobs()
        for key in ("hidden", "depth", "lr", "optimizer", "epochs", "standardize"):
            self.assertIn(key, knobs)
        self.assertTrue((ROOT / "agent.toml").is_file())

    def _task(self, d, x, y):
        np.save(d / "train_x.npy", x[:300])
        np.save(d / "train_y.npy", y[:300])
        np.save(d / "test_x.npy", x[300:])
        (d / "task.json").write_text(json.dumps({"kind": "classification", "classes": 2, "time_budget_s": 5}))

    def test_current_knobs_produce_valid_predictions(self):
        rng = np.random.default_rng(1)
        x = rng.normal(size=(400, 3)).astype(np.float32)
        y = (x[:, 0] > 0).astype(np.int64)
        with tempfile.TemporaryDirectory() as tmp:
            self._task(Path(tmp), x, y)
            pred = train(Path(tmp), load_knobs())
        self.assertEqual(pred.shape, (100,))
        self.assertTrue(set(np.unique(pred)) <= {0, 1})

    def test_learns_a_linear_problem(self):
        rng = np.random.default_rng(0)
        x = rng.normal(size=(400, 3)).astype(np.float32)
        y = (x[:, 0] > 0).astype(np.int64)
        fixed = {
            "activation": "tanh",
            "batch_size": 64,
            "depth": 1,
            "dropout": 0.0,
            "epochs": 20,
            "hidden": 16,
            "lr": 0.01,
            "optimizer": "adam",
            "patience": 0,
            "schedule": "constant",
            "standardize": True,
            "weight_decay": 0.0,
        }
        with tempfile.TemporaryDirectory() as tmp:
            self._task(Path(tmp), x, y)
            pred = train(Path(tmp), fixed)
        self.assertEqual(pred.shape, (100,))
        self.assertGreater(float(np.mean(pred == y[300:])), 0.85)


if __name__ == "__main__":
    unittest.main()
