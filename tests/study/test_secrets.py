"""A study draws the secret options of its suite once, when it is created (the training suite's
``data_key``), keeps them in its config.yaml, and grades on the same data after resume."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import yaml

from metasearch import launch
from metasearch.config import load_config

QUICKSTART = Path(__file__).resolve().parents[2] / "configs" / "quickstart.yaml"
SMALL = [
    "sandbox.name=local",
    "suite.subset=smoke",
    "budget.evaluations=1",
    "tracking.mlflow.enabled=false",
]


def _key(study: Path) -> str:
    return str(yaml.safe_load((study / "config.yaml").read_text())["suite"]["data_key"])


def _test_x(launched: launch.Launched, dest: Path) -> np.ndarray:
    launched.suite.prepare("training/spirals", dest)
    return np.load(dest / "test_x.npy")


def test_each_study_draws_its_own_data_key_and_resume_keeps_it(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    launched = launch.create(load_config(QUICKSTART, SMALL), first)
    try:
        created = _test_x(launched, tmp_path / "created")
    finally:
        launched.close()
    launch.create(load_config(QUICKSTART, SMALL), second).close()
    assert re.fullmatch(r"[0-9a-f]{32}", _key(first)) and _key(first) != _key(second)
    record = (first / "provenance.json").read_text()  # it goes to MLflow and promoted models: a digest only
    assert _key(first) not in record and '"data_key": "sha256:' in record

    again = launch.reopen(first)
    try:
        assert again.suite.config.data_key == _key(first)
        assert np.array_equal(_test_x(again, tmp_path / "resumed"), created)
    finally:
        again.close()

    pinned = launch.create(load_config(QUICKSTART, [*SMALL, "suite.data_key=''"]), tmp_path / "public")
    pinned.close()
    assert _key(tmp_path / "public") == ""  # a key given (here: the public data) is never replaced
