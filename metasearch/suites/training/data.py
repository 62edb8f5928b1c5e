"""Deterministic task data for the training suite (numpy only: this file also runs inside the grader).

Every task draws from its own fixed seed, so the data are identical on every machine and run. Some
features are put on very different scales and padded with distractors, so preprocessing and capacity
choices matter.
"""

from __future__ import annotations

import numpy as np

N_TRAIN = 1500
N_TEST = 1000

TASKS: dict[str, dict] = {
    "spirals": {
        "kind": "classification",
        "classes": 2,
        "seed": 11,
        "subsets": ["default", "smoke"],
        "description": "Two interleaved spirals in 2 informative dimensions plus 8 noisy distractors.",
    },
    "xor": {
        "kind": "classification",
        "classes": 2,
        "seed": 12,
        "subsets": ["default"],
        "description": "The sign of a product of three features (a parity problem) among 9 features.",
    },
    "regression": {
        "kind": "regression",
        "classes": 0,
        "seed": 13,
        "subsets": ["default", "smoke"],
        "description": "A smooth nonlinear function of 4 features with noise, among 10 features.",
    },
    "multiclass": {
        "kind": "classification",
        "classes": 5,
        "seed": 14,
        "subsets": ["default"],
        "description": "Five warped clusters in 12 dimensions.",
    },
    "imbalanced": {
        "kind": "classification",
        "classes": 2,
        "seed": 15,
        "subsets": ["default"],
        "description": "A rare positive class (about 12%) on a ring; scored by balanced accuracy.",
    },
    "moons": {
        "kind": "classification",
        "classes": 2,
        "seed": 21,
        "subsets": ["heldout"],
        "description": "Two noisy half-moons plus distractor features.",
    },
    "friedman": {
        "kind": "regression",
        "classes": 0,
        "seed": 22,
        "subsets": ["heldout"],
        "description": "The Friedman #1 regression function with noise.",
    },
}


def _scales(rng: np.random.Generator, d: int) -> np.ndarray:
    return np.exp(rng.uniform(-2.5, 3.5, size=d))


def generate(name: str, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(train_x, train_y, test_x, test_y) for task ``name``; ``scale`` multiplies the sample counts."""
    spec = TASKS[name]
    rng = np.random.default_rng(spec["seed"])
    n = int((N_TRAIN + N_TEST) * scale)
    x, y = _MAKERS[name](rng, n)
    x = (x * _scales(rng, x.shape[1])).astype(np.float32)
    perm = rng.permutation(n)
    x, y = x[perm], y[perm]
    n_train = int(N_TRAIN * scale)
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def _spirals(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    y = rng.integers(0, 2, n)
    t = rng.uniform(0.25, 1.0, n) * 3 * np.pi
    r = t / (3 * np.pi)
    x2 = np.stack([r * np.cos(t + np.pi * y), r * np.sin(t + np.pi * y)], 1) + rng.normal(0, 0.03, (n, 2))
    return np.hstack([x2, rng.normal(0, 1, (n, 8))]), y


def _xor(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    x = rng.normal(0, 1, (n, 9))
    y = (x[:, 0] * x[:, 1] * x[:, 2] > 0).astype(np.int64)
    return x, y


def _regression(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    x = rng.uniform(-2, 2, (n, 10))
    y = np.sin(2 * x[:, 0]) * x[:, 1] + 0.5 * x[:, 2] ** 2 - np.abs(x[:, 3]) + rng.normal(0, 0.1, n)
    return x, y.astype(np.float32)


def _multiclass(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    centers = rng.normal(0, 1.4, (5, 12))
    y = rng.integers(0, 5, n)
    x = centers[y] + rng.normal(0, 1.0, (n, 12))
    x[:, :3] = np.tanh(x[:, :3]) * 2 + 0.3 * x[:, 3:6] ** 2
    return x, y


def _imbalanced(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    x = rng.normal(0, 1, (n, 8))
    r = np.sqrt(x[:, 0] ** 2 + x[:, 1] ** 2)
    y = (np.abs(r - 1.8) < 0.25).astype(np.int64)
    return x, y


def _moons(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    y = rng.integers(0, 2, n)
    t = rng.uniform(0, np.pi, n)
    x2 = np.stack([np.cos(t) + y * 1.0, np.sin(t) * (1 - 2 * y) + y * 0.4], 1) + rng.normal(0, 0.12, (n, 2))
    return np.hstack([x2, rng.normal(0, 1, (n, 6))]), y


def _friedman(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    x = rng.uniform(0, 1, (n, 10))
    y = 10 * np.sin(np.pi * x[:, 0] * x[:, 1]) + 20 * (x[:, 2] - 0.5) ** 2 + 10 * x[:, 3] + 5 * x[:, 4]
    return x, (y + rng.normal(0, 1.0, n)).astype(np.float32)


_MAKERS = {
    "spirals": _spirals,
    "xor": _xor,
    "regression": _regression,
    "multiclass": _multiclass,
    "imbalanced": _imbalanced,
    "moons": _moons,
    "friedman": _friedman,
}


def score(name: str, predictions: np.ndarray, truth: np.ndarray) -> tuple[float, dict[str, float]]:
    """Held-out metric mapped to [0, 1]: 0 at chance level (or worse), 1 when perfect."""
    spec = TASKS[name]
    if spec["kind"] == "regression":
        p = predictions.astype(np.float64).reshape(-1)
        ss_res = float(np.sum((truth - p) ** 2))
        ss_tot = float(np.sum((truth - truth.mean()) ** 2))
        r2 = 1.0 - ss_res / ss_tot
        return float(np.clip(r2, 0.0, 1.0)), {"r2": r2}
    p = predictions.reshape(-1).astype(np.int64)
    k = spec["classes"]
    if name == "imbalanced":
        recalls = [float(np.mean(p[truth == c] == c)) for c in range(k)]
        metric = float(np.mean(recalls))
        return float(np.clip((metric - 0.5) / 0.5, 0, 1)), {"balanced_accuracy": metric}
    acc = float(np.mean(p == truth))
    return float(np.clip((acc - 1 / k) / (1 - 1 / k), 0, 1)), {"accuracy": acc}
