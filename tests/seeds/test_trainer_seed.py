"""The ``trainer`` seed agent as metasearch runs it: manifest, smoke entry, evaluation through the runner."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from metasearch.manifest import CategoricalKnob, load_manifest
from metasearch.runner import AGENT_MOUNT, TASK_MOUNT, agent_env, evaluate_in_sandbox
from metasearch.sandboxes.local import LocalSandbox
from metasearch.sandboxes.protocol import Limits, Mount, RunSpec
from metasearch.suites.training import TrainingSuite
from metasearch.suites.training.data import generate, score

TRAINER = Path(__file__).resolve().parents[2] / "seeds" / "trainer"
# Better knobs found by hand (see the report table); all within the declared ranges.
TUNED: dict[str, Any] = {
    "optimizer": "adam",
    "lr": 0.003,
    "hidden": 128,
    "depth": 2,
    "activation": "relu",
    "epochs": 200,
    "schedule": "cosine",
    "weight_decay": 0.001,
    "class_weight": "balanced",
}


def _agent_with(tmp_path: Path, knobs: dict[str, Any]) -> Path:
    agent = tmp_path / "agent"
    shutil.copytree(TRAINER, agent, ignore=shutil.ignore_patterns("__pycache__"))
    values = json.loads((agent / "knobs.json").read_text())
    (agent / "knobs.json").write_text(json.dumps({**values, **knobs}, indent=2))
    return agent


def test_manifest_declares_every_knob_the_file_holds_in_range() -> None:
    manifest = load_manifest(TRAINER)
    values = json.loads((TRAINER / manifest.knobs.file).read_text())
    assert manifest.name == "trainer" and manifest.entry.smoke
    assert manifest.command("solve", task_dir="/task", agent_dir="/agent")[-1] == "/task"
    for name, knob in manifest.knobs.params.items():
        if isinstance(knob, CategoricalKnob):
            assert values[name] in knob.choices, name
        else:
            assert knob.low <= values[name] <= knob.high, name
    assert set(values) - set(manifest.knobs.params) == {"seed"}  # the one deliberately undeclared knob
    for name, better in TUNED.items():
        knob = manifest.knobs.params[name]
        if isinstance(knob, CategoricalKnob):
            ok = better in knob.choices
        else:
            ok = knob.low <= float(better) <= knob.high
        assert ok, f"tuned value {name}={better} outside the declared range"


def test_smoke_entry_passes_in_a_sandbox() -> None:
    manifest = load_manifest(TRAINER)
    assert manifest.entry.smoke is not None
    result = LocalSandbox().run(
        RunSpec(
            command=manifest.command("smoke", task_dir=TASK_MOUNT, agent_dir=AGENT_MOUNT),
            mounts=(Mount(TRAINER, AGENT_MOUNT),),
            workdir=AGENT_MOUNT,
            env=agent_env(),
            limits=Limits(timeout_s=60),
        )
    )
    assert result.ok, result.stderr[-3000:]
    assert "OK" in result.stderr and result.duration_s < 30


def test_evaluation_through_the_runner_with_local_sandbox(tmp_path: Path) -> None:
    suite = TrainingSuite()
    task = next(t for t in suite.tasks() if t.id == "training/multiclass")
    (tmp_path / "logs").mkdir()
    result = evaluate_in_sandbox(
        TRAINER, task, suite, LocalSandbox(), Limits(), {"test": "trainer"}, tmp_path / "logs"
    )
    assert result.error is None, result
    assert 0.3 < result.score < 0.8 and result.metrics["accuracy"] > 0.5  # the plain default: room above
    log = (tmp_path / "logs" / "agent.log").read_text()
    assert "[trainer] wrote 1000 predictions" in log and "exit_code=0" in log

    tuned = _agent_with(tmp_path, TUNED)
    (tmp_path / "logs2").mkdir()
    better = evaluate_in_sandbox(tuned, task, suite, LocalSandbox(), Limits(), {}, tmp_path / "logs2")
    assert better.score > result.score + 0.2, (result, better)


def test_default_knobs_beat_chance_and_tuned_knobs_beat_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(TRAINER))
    from trainer.solve import load_knobs, train

    suite = TrainingSuite()
    default, tuned = [], []
    for task in suite.tasks():
        name = task.id.split("/")[1]
        suite.prepare(task.id, tmp_path / name)
        truth = generate(name)[3]
        default.append(score(name, train(tmp_path / name, load_knobs()), truth)[0])
        tuned.append(score(name, train(tmp_path / name, {**load_knobs(), **TUNED}), truth)[0])
    assert sum(s > 0.1 for s in default) >= len(default) - 1, default  # above chance on most tasks
    assert all(t > d + 0.2 for t, d in zip(tuned, default, strict=True)), (default, tuned)
    assert np.mean(tuned) > 0.85 and np.mean(default) < 0.6


def test_runs_standalone_without_metasearch(tmp_path: Path) -> None:
    # a budget its default epochs finish well inside, even on a loaded machine (5 s cut it to r2 ~0)
    TrainingSuite(TrainingSuite.Config(time_budget_s=60)).prepare("training/regression", tmp_path / "task")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run(
        [sys.executable, "-m", "trainer.solve", str(tmp_path / "task")],
        cwd=TRAINER,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    predictions = np.load(tmp_path / "task" / "output" / "predictions.npy")
    assert (
        predictions.dtype == np.float32
        and score("regression", predictions, generate("regression")[3])[0] > 0.2
    )


@pytest.mark.docker
def test_evaluation_in_docker(tmp_path: Path, docker_sandbox_factory: Any) -> None:
    """The real conditions: read-only /agent and root fs, small /tmp, no network, an unprivileged user."""
    suite = TrainingSuite()
    task = next(t for t in suite.tasks() if t.id == "training/spirals")
    sandbox = docker_sandbox_factory("pytest-trainer")
    (tmp_path / "logs").mkdir()
    result = evaluate_in_sandbox(
        TRAINER, task, suite, sandbox, Limits(cpus=1, memory_mb=2048), {}, tmp_path / "logs"
    )
    log = (tmp_path / "logs" / "agent.log").read_text()
    assert result.error is None and result.score > 0.1, (result, log[-3000:])
    assert "[trainer] wrote 1000 predictions" in log


@pytest.mark.gpu
def test_uses_the_gpu_at_a_larger_scale(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    suite = TrainingSuite(TrainingSuite.Config(scale=20, time_budget_s=20))
    suite.prepare("training/spirals", tmp_path / "task")
    tuned = _agent_with(tmp_path, TUNED)
    run = subprocess.run(
        [sys.executable, "-m", "trainer.solve", str(tmp_path / "task")],
        cwd=tuned,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0 and ", cuda" in run.stderr, run.stderr[-3000:]
    predictions = np.load(tmp_path / "task" / "output" / "predictions.npy")
    assert score("spirals", predictions, generate("spirals", 20)[3])[0] > 0.9
