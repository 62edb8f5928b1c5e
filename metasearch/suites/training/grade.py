"""The training suite's grader: ``python3 grade.py TASK SCALE PREDICTIONS`` prints one JSON object.

Runs inside a fresh sandbox with this directory mounted read-only; the agent never sees it.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np
from data import generate, score


def main(argv: list[str]) -> dict:
    name, scale, path = argv[1], float(argv[2]), argv[3]
    truth = generate(name, scale)[3]
    if not os.path.isfile(path):
        return {"score": 0.0, "error": "no predictions: expected output/predictions.npy"}
    try:
        pred = np.load(path, allow_pickle=False)
    except Exception as exc:
        return {"score": 0.0, "error": f"unreadable predictions.npy: {type(exc).__name__}: {exc}"}
    if pred.shape[0] != truth.shape[0] or pred.size != truth.shape[0]:
        return {"score": 0.0, "error": f"predictions have shape {pred.shape}, expected ({truth.shape[0]},)"}
    if not np.all(np.isfinite(pred.astype(np.float64))):
        return {"score": 0.0, "error": "predictions contain NaN or infinity"}
    value, metrics = score(name, pred, truth)
    return {"score": value, "metrics": metrics}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv)))
