"""Deterministic task data for the training suite (numpy only: this file also runs inside the grader).

Every task draws from its own fixed seed mixed with a key: with the same key, the data are identical on
every machine and run. Without a key they are public (anyone who has read this file can recompute the
held-out labels), so a study draws a secret key when it is created (the suite's ``data_key``). Tabular
features are put on very different scales and padded with distractors, so preprocessing and capacity
choices matter. ``TASKS`` is the catalogue; ``generate`` makes a task's data, ``score`` grades predictions.

Score mapping (documented for the meta-agent and for readers of results): accuracy ``a`` with ``k`` classes
maps to ``(a - 1/k) / (1 - 1/k)``, balanced accuracy (the mean per-class recall) likewise; R^2 is used as is.
All three are clipped to [0, 1], so chance level (or a constant prediction) scores 0 and a perfect one 1.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

N_TRAIN = 1500
N_TEST = 1000

TASKS: dict[str, dict[str, Any]] = {
    "spirals": {
        "kind": "classification",
        "classes": 2,
        "metric": "accuracy",
        "seed": 11,
        "subsets": ["default", "smoke"],
        "description": "Two interleaved spirals in 2 informative dimensions plus 8 noisy distractors.",
    },
    "xor": {
        "kind": "classification",
        "classes": 2,
        "metric": "accuracy",
        "seed": 12,
        "subsets": ["default"],
        "description": "The sign of a product of two features (an XOR pattern) among 10 features.",
    },
    "regression": {
        "kind": "regression",
        "classes": 0,
        "metric": "r2",
        "seed": 13,
        "subsets": ["default", "smoke"],
        "description": "A smooth nonlinear function of 4 features with noise, among 10 features.",
    },
    "multiclass": {
        "kind": "classification",
        "classes": 5,
        "metric": "accuracy",
        "seed": 14,
        "subsets": ["default"],
        "description": "Five classes, each a union of three small clusters in 3 dimensions, plus 9 distractors.",
    },
    "imbalanced": {
        "kind": "classification",
        "classes": 2,
        "metric": "balanced_accuracy",
        "seed": 15,
        "subsets": ["default"],
        "description": "A rare positive class (about 15%) behind a curved boundary; scored by balanced accuracy.",
    },
    "moons": {
        "kind": "classification",
        "classes": 2,
        "metric": "accuracy",
        "seed": 21,
        "subsets": ["heldout"],
        "description": "Two noisy half-moons plus distractor features.",
    },
    "friedman": {
        "kind": "regression",
        "classes": 0,
        "metric": "r2",
        "seed": 22,
        "subsets": ["heldout"],
        "description": "The Friedman #1 regression function with noise.",
    },
    "patterns": {
        "kind": "classification",
        "classes": 4,
        "metric": "accuracy",
        "seed": 23,
        "subsets": ["extra"],  # not in "heldout" yet: promotion gates pin that subset's tasks
        "rescale": False,
        "description": "Noisy 8x8 images (64 pixel features, row-major) of a short horizontal, vertical or "
        "diagonal stroke or a small square outline at a random position.",
    },
}


def generate(
    name: str, scale: float = 1.0, key: str = ""
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(train_x, train_y, test_x, test_y) for task ``name``; ``scale`` multiplies the sample counts; ``key``
    (hex digits) is mixed into the task's seed ("": the public data).

    Pure function of (name, scale, key): the grader calls it again to get the hidden labels.
    """
    spec = TASKS[name]
    rng = np.random.default_rng([spec["seed"], int(key, 16)] if key else spec["seed"])
    n_train = max(1, int(N_TRAIN * scale))
    n = n_train + max(1, int(N_TEST * scale))
    x, y = _MAKERS[name](rng, n)
    feature_scales = np.exp(rng.uniform(-2.5, 3.5, size=x.shape[1]))
    if spec.get("rescale", True):
        x = x * feature_scales
    x = x.astype(np.float32)
    y = y.astype(np.float32 if spec["kind"] == "regression" else np.int64)
    perm = rng.permutation(n)
    x, y = x[perm], y[perm]
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def _spirals(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    y = rng.integers(0, 2, n)
    t = rng.uniform(0.15, 1.0, n) * 2 * np.pi
    r = t / (2 * np.pi)
    x2 = np.stack([r * np.cos(t + np.pi * y), r * np.sin(t + np.pi * y)], 1) + rng.normal(0, 0.03, (n, 2))
    return np.hstack([x2, rng.normal(0, 1, (n, 8))]), y


def _xor(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    x = rng.normal(0, 1, (n, 10))
    return x, (x[:, 0] * x[:, 1] > 0).astype(np.int64)


def _regression(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    x = rng.uniform(-2, 2, (n, 10))
    y = np.sin(2 * x[:, 0]) * x[:, 1] + 0.5 * x[:, 2] ** 2 - np.abs(x[:, 3]) + rng.normal(0, 0.1, n)
    return x, y


def _multiclass(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    # Three clusters per class, scattered: no class is convex, so a linear model stays far from the top.
    centers = rng.normal(0, 1.2, (15, 3))
    component = rng.integers(0, 15, n)
    x = centers[component] + rng.normal(0, 0.15, (n, 3))
    return np.hstack([x, rng.normal(0, 1, (n, 9))]), component % 5


def _imbalanced(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    x = rng.normal(0, 1, (n, 8))
    y = (x[:, 0] + 0.6 * x[:, 1] ** 2 - 0.5 * x[:, 2] * x[:, 3] > 1.9).astype(np.int64)
    return x, y


def _moons(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    y = rng.integers(0, 2, n)
    t = rng.uniform(0, np.pi, n)
    x2 = np.stack([np.cos(t) + y * 1.0, np.sin(t) * (1 - 2 * y) + y * 0.4], 1) + rng.normal(0, 0.12, (n, 2))
    return np.hstack([x2, rng.normal(0, 1, (n, 6))]), y


def _friedman(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    x = rng.uniform(0, 1, (n, 10))
    y = 10 * np.sin(np.pi * x[:, 0] * x[:, 1]) + 20 * (x[:, 2] - 0.5) ** 2 + 10 * x[:, 3] + 5 * x[:, 4]
    return x, y + rng.normal(0, 1.0, n)


def _patterns(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    y = rng.integers(0, 4, n)
    rows, cols = rng.integers(1, 7, n), rng.integers(1, 7, n)
    img = np.zeros((n, 8, 8))
    steps = np.arange(-2, 2)
    for i in range(n):
        r, c = rows[i], cols[i]
        if y[i] == 0:
            img[i, r, max(0, c - 2) : c + 2] = 1
        elif y[i] == 1:
            img[i, max(0, r - 2) : r + 2, c] = 1
        elif y[i] == 2:
            keep = (r + steps >= 0) & (r + steps < 8) & (c + steps >= 0) & (c + steps < 8)
            img[i, r + steps[keep], c + steps[keep]] = 1
        else:
            img[i, r - 1 : r + 2, c - 1 : c + 2] = 1
            img[i, r, c] = 0
    img += rng.normal(0, 0.3, img.shape)
    return img.reshape(n, 64), y


_MAKERS: dict[str, Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]]] = {
    "spirals": _spirals,
    "xor": _xor,
    "regression": _regression,
    "multiclass": _multiclass,
    "imbalanced": _imbalanced,
    "moons": _moons,
    "friedman": _friedman,
    "patterns": _patterns,
}


def score(name: str, predictions: np.ndarray, truth: np.ndarray) -> tuple[float, dict[str, float]]:
    """Held-out metric mapped to [0, 1] (see the module docstring); ``predictions`` is already shape-checked."""
    spec = TASKS[name]
    if spec["metric"] == "r2":
        p = predictions.astype(np.float64).reshape(-1)
        t = truth.astype(np.float64)
        r2 = 1.0 - float(np.sum((t - p) ** 2)) / float(np.sum((t - t.mean()) ** 2))
        return float(np.clip(r2, 0.0, 1.0)), {"r2": r2}
    # Class ids: round rather than truncate, so 0.9999 from a float pipeline still means class 1.
    p = np.rint(predictions.astype(np.float64)).reshape(-1).astype(np.int64)
    k = int(spec["classes"])
    if spec["metric"] == "balanced_accuracy":
        metric = float(np.mean([np.mean(p[truth == c] == c) for c in range(k)]))
        return float(np.clip((metric - 1 / k) / (1 - 1 / k), 0.0, 1.0)), {"balanced_accuracy": metric}
    acc = float(np.mean(p == truth))
    return float(np.clip((acc - 1 / k) / (1 - 1 / k), 0.0, 1.0)), {"accuracy": acc}
