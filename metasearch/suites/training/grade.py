"""The training suite's grader: ``python3 grade.py TASK SCALE PREDICTIONS [KEY]`` prints one contract line.

Runs inside a fresh sandbox with this directory mounted read-only; the agent never sees it, and no
candidate code runs here (the predictions are read as plain arrays). The hidden labels are regenerated here
from the task's seed and the study's secret ``KEY``, so they are never written to disk. Every problem with the
candidate's file becomes ``{"score": 0, "error": ...}``; anything else that goes wrong here is the grader's own
fault, ``{"grader_fault": ...}`` (the grader contract, ``metasearch/suites/contract.py``).
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np
from data import generate, score


def check(path: str, n: int) -> tuple[np.ndarray | None, str | None]:
    """The predictions as a float64 vector of length ``n``, or the reason they are unusable."""
    if not os.path.isfile(path):
        return None, "no predictions: expected output/predictions.npy"
    try:
        pred = np.load(path, allow_pickle=False)
    except Exception as exc:  # any malformed file is the candidate's fault, never the grader's
        return None, f"unreadable predictions.npy: {type(exc).__name__}: {exc}"[:300]
    if pred.dtype.kind not in "biuf":
        return None, f"predictions have dtype {pred.dtype}, expected numbers"
    if pred.size != n or pred.shape[0] != n:
        return None, f"predictions have shape {pred.shape}, expected ({n},)"
    values = pred.astype(np.float64).reshape(-1)
    if not np.all(np.isfinite(values)):
        return None, "predictions contain NaN or infinity"
    return values, None


def main(argv: list[str]) -> dict:
    name, scale, path = argv[1], float(argv[2]), argv[3]
    truth = generate(name, scale, argv[4] if len(argv) > 4 else "")[3]
    values, error = check(path, truth.shape[0])
    if values is None:
        return {"score": 0.0, "error": error}
    value, metrics = score(name, values, truth)
    return {"score": value, "metrics": metrics}


if __name__ == "__main__":
    try:
        verdict = main(sys.argv)
    except Exception as exc:  # no candidate code runs here: whatever broke is the grader's
        verdict = {"grader_fault": f"{type(exc).__name__}: {exc}"[:500]}
    print(json.dumps(verdict))
