"""``training``: small ML tasks on data the suite makes itself, graded on held-out labels.

Visible to the agent (under ``/task``): ``train_x.npy``, ``train_y.npy``, ``test_x.npy``, ``task.json`` and
``TASK.md``. The agent writes ``output/predictions.npy`` (class ids, or values for regression). The held-out
labels exist only inside the grader, which regenerates them from the task's seed in a fresh sandbox.
Score: the held-out metric mapped to [0, 1], 0 at chance level.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from metasearch.sandboxes.protocol import Limits, Mount, RunSpec, Sandbox
from metasearch.suites.protocol import Task, TaskResult
from metasearch.suites.training.data import TASKS, generate

GRADER_DIR = Path(__file__).resolve().parent
DESCRIPTION = (
    "Tabular machine-learning tasks. Each task directory holds train_x.npy, train_y.npy, test_x.npy and "
    "task.json (problem kind, number of classes, time budget). The agent trains a model within the time budget "
    "and writes output/predictions.npy with one prediction per test row (an integer class id, or a float for "
    "regression). Scored on hidden test labels: accuracy, balanced accuracy or R^2, mapped to [0, 1] with 0 at "
    "chance level. Features have very different scales and include distractors."
)


class TrainingSuite:
    name = "training"
    description = DESCRIPTION
    artifact_path = "output"
    needs_docker = False
    needs_gpu = False

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid")
        subset: str = "default"
        scale: float = Field(1.0, gt=0, le=100)
        time_budget_s: float = Field(15.0, gt=0)
        grade_timeout_s: float = Field(60.0, gt=0)

    def __init__(self, config: Config | None = None, **_: object) -> None:
        self.config = config or TrainingSuite.Config()
        subsets = {s for spec in TASKS.values() for s in spec["subsets"]} | {"all"}
        if self.config.subset not in subsets:
            from metasearch.errors import ConfigError

            raise ConfigError(
                f"suite.subset: unknown subset {self.config.subset!r}; allowed: {', '.join(sorted(subsets))}"
            )

    def tasks(self, subset: str | None = None) -> Sequence[Task]:
        wanted = subset or self.config.subset
        return [
            Task(
                id=f"training/{name}",
                suite=self.name,
                statement=self._statement(name),
                subsets=tuple(spec["subsets"]),
                timeout_s=self.config.time_budget_s * 2 + 60,
            )
            for name, spec in TASKS.items()
            if wanted == "all" or wanted in spec["subsets"]
        ]

    def _statement(self, name: str) -> str:
        spec = TASKS[name]
        kind = f"{spec['classes']}-class classification" if spec["kind"] == "classification" else "regression"
        return (
            f"# training/{name}\n\n{spec['description']} ({kind}).\n\n"
            f"Train on train_x.npy / train_y.npy within {self.config.time_budget_s:g} seconds and write "
            "output/predictions.npy: one prediction per row of test_x.npy.\n"
        )

    def prepare(self, task_id: str, dest: Path) -> None:
        name = _name(task_id)
        spec = TASKS[name]
        train_x, train_y, test_x, _hidden = generate(name, self.config.scale)
        dest.mkdir(parents=True, exist_ok=True)
        np.save(dest / "train_x.npy", train_x)
        np.save(dest / "train_y.npy", train_y)
        np.save(dest / "test_x.npy", test_x)
        info = {
            "task": task_id,
            "kind": spec["kind"],
            "classes": spec["classes"],
            "time_budget_s": self.config.time_budget_s,
            "n_train": int(train_x.shape[0]),
            "n_test": int(test_x.shape[0]),
            "n_features": int(train_x.shape[1]),
        }
        (dest / "task.json").write_text(json.dumps(info, indent=2) + "\n")
        (dest / "TASK.md").write_text(self._statement(name))
        (dest / "output").mkdir(exist_ok=True)

    def grade(self, task_id: str, artifact_dir: Path, sandbox: Sandbox) -> TaskResult:
        name = _name(task_id)
        artifact_dir.mkdir(parents=True, exist_ok=True)
        spec = RunSpec(
            command=[
                "python3",
                "/grader/grade.py",
                name,
                repr(self.config.scale),
                "/artifact/predictions.npy",
            ],
            mounts=(Mount(GRADER_DIR, "/grader"), Mount(artifact_dir, "/artifact")),
            workdir="/grader",
            env={"PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"},
            limits=Limits(timeout_s=self.config.grade_timeout_s, memory_mb=2048),
            labels={"metasearch.role": "grader"},
        )
        return parse_grader_output(sandbox.run(spec))


def parse_grader_output(result: object) -> TaskResult:
    """A grader prints one JSON object as its last stdout line; anything else is a grading failure."""
    stdout = getattr(result, "stdout", "")
    lines = [line for line in stdout.strip().splitlines() if line.strip()]
    if not getattr(result, "ok", False) or not lines:
        reason = getattr(result, "reason", None) or "no output"
        return TaskResult(score=0.0, error=f"grader failed: {reason}: {getattr(result, 'stderr', '')[-500:]}")
    try:
        data = json.loads(lines[-1])
        score = float(data["score"])
    except (ValueError, KeyError, TypeError) as exc:
        return TaskResult(score=0.0, error=f"grader output unreadable: {exc}")
    metrics = {k: float(v) for k, v in (data.get("metrics") or {}).items()}
    return TaskResult(
        score=min(1.0, max(0.0, score)),
        metrics=metrics,
        flags=tuple(data.get("flags") or ()),
        error=data.get("error"),
    )


def _name(task_id: str) -> str:
    name = task_id.split("/", 1)[-1]
    if name not in TASKS:
        from metasearch.errors import ConfigError

        raise ConfigError(f"training: unknown task {task_id!r}")
    return name
