"""``metasearch tune``: a real Optuna study (SQLite storage) over real simulator runs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import yaml

from metasearch.config import load_config_data
from metasearch.errors import ConfigError
from metasearch.tune import TuneSetup, report_lines, setup_from_config, snippet, tune

REPO = Path(__file__).resolve().parents[1]


def test_setup_reads_budget_workers_and_tasks_from_the_config() -> None:
    setup = setup_from_config(REPO / "configs" / "quickstart.yaml", n_tasks=None, calibrated=None)
    assert (setup.scheduler, setup.budget, setup.workers, setup.family) == ("hgm", 90, 2, "default")
    assert setup.n_tasks >= 1


def test_setup_refuses_a_scheduler_without_those_options(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"scheduler": {"name": "dgm"}, "budget": {"evaluations": 50}}))
    with pytest.raises(ConfigError, match=r"scheduler\.name"):
        setup_from_config(path, n_tasks=10, calibrated=None)


def test_tune_records_trials_and_writes_a_loadable_snippet(tmp_path: Path) -> None:
    setup = TuneSetup("hgm-paper", {}, budget=40, workers=2, n_tasks=6, family="default")
    storage = f"sqlite:///{tmp_path / 'tune.db'}"
    report = tune(
        setup, trials=3, seeds=3, check_seeds=4, storage=storage, study_name="t", cost=True, processes=1
    )
    study = optuna.load_study(study_name="t", storage=storage)
    assert len(study.trials) == 3 and len(study.directions) == 2
    assert study.trials[0].params["cool_down"] is True  # trial 0 is the config's own (hgm-paper) setting
    assert study.trials[0].params["initial_expansions"] == 1  # min(5, floor(2 ** 0.6))
    text = snippet(report)
    section = yaml.safe_load(text)["scheduler"]
    resolved = load_config_data({"scheduler": section})
    assert resolved.plugins["scheduler"].config.model_dump()["alpha"] == report["best_options"]["alpha"]
    assert any("paired difference" in line for line in report_lines(report))


def test_tune_on_a_fit_without_children_says_it_tunes_on_the_prior(tmp_path: Path) -> None:
    """The kernels study's fit measured no step (no child admitted): `tune --calibrated` says on stderr that
    it tunes on the simulator's prior, as `sim calibrate` did, each warning on one line however long its path."""
    fit = (
        tmp_path
        / ("a-directory-name-long-enough-to-push-the-line-past-any-terminal-width" * 2)
        / "kernels.json"
    )
    fit.parent.mkdir()
    shutil.copy(REPO / "bench" / "fits" / "kernels-cpu-smollm2.json", fit)
    done = subprocess.run(
        [sys.executable, "-m", "metasearch.cli", "tune", "configs/quickstart.yaml", "--calibrated", str(fit),
         "--trials", "1", "--seeds", "2", "--check-seeds", "2", "--processes", "1", "-o", str(tmp_path / "t.yaml")],
        capture_output=True, text=True, timeout=600, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"{fit}: warning: no child was admitted" in done.stderr
