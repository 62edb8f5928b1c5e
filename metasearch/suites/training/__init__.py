"""``training``: small ML tasks on data the suite makes itself, graded on held-out labels.

Visible to the agent (under ``/task``): ``train_x.npy``, ``train_y.npy``, ``test_x.npy``, ``task.json`` and
``TASK.md``. The agent writes ``output/predictions.npy`` (class ids, or values for regression). The held-out
labels exist only inside the grader, which regenerates them from the task's seed and the study's secret
``data_key`` in a fresh sandbox (without the key, the public generator in ``data.py`` gives them away).
Score: the held-out metric mapped to [0, 1], 0 at chance level (see ``data.py`` for the mapping).

Subsets: ``default`` (5 tasks, the search's benchmark), ``smoke`` (2 of them), ``heldout`` (2 tasks never in
``default``, for promotion gates), ``extra`` (an image-like task) and ``all``. ``scale`` multiplies the
sample counts (for GPUs); raise ``time_budget_s`` with it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from metasearch.errors import ConfigError
from metasearch.sandboxes.protocol import Mount, Sandbox
from metasearch.suites.grading import grade
from metasearch.suites.protocol import Suite, Task, TaskResult
from metasearch.suites.training.data import TASKS, generate

GRADER_DIR = Path(__file__).resolve().parent
DESCRIPTION = (
    "Small machine-learning tasks (tabular; one image-like). Each task directory holds train_x.npy, train_y.npy, test_x.npy and "
    "task.json (problem kind, metric, number of classes, time budget, description). The agent trains a model within the time budget "
    "and writes output/predictions.npy with one prediction per test row (an integer class id, or a float for "
    "regression). Scored on hidden test labels: accuracy, balanced accuracy or R^2, mapped to [0, 1] with 0 at "
    "chance level. Tabular features have very different scales and include distractors. Training time beyond "
    "the budget is wasted: the run is killed at about twice the budget plus a minute."
)


class TrainingSuite(Suite):
    name = "training"
    description = DESCRIPTION
    artifact_path = "output"
    needs_docker = False
    needs_gpu = False

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid")
        subset: str = "default"
        scale: float = Field(1.0, gt=0, le=100)  # multiplies train and test sizes
        time_budget_s: float = Field(
            15.0, gt=0
        )  # told to the agent in task.json; the run is killed at 2x + 60 s
        grade_timeout_s: float = Field(60.0, gt=0)
        # hex digits mixed into every task's seed, so that no agent can recompute the held-out labels from
        # the public generator; a study draws one when it is created (SECRET_OPTIONS) and keeps it in its
        # config.yaml. Set it to compare studies on the same data; "" grades on the public data.
        data_key: str | None = Field(None, pattern=r"^([0-9a-f]{8,64})?$")

    SECRET_OPTIONS = ("data_key",)  # drawn per study when unset (see launch.create)

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or TrainingSuite.Config()
        _check_subset(self.config.subset, "suite.subset")

    def tasks(self, subset: str | None = None) -> Sequence[Task]:
        wanted = subset or self.config.subset
        _check_subset(wanted, "training: subset")
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
            f"# training/{name}\n\n{spec['description']} ({kind}, scored by {spec['metric']}).\n\n"
            f"Train on train_x.npy / train_y.npy within {self.config.time_budget_s:g} seconds and write "
            "output/predictions.npy: one prediction per row of test_x.npy.\n"
        )

    def prepare(self, task_id: str, dest: Path) -> None:
        name = _name(task_id)
        spec = TASKS[name]
        train_x, train_y, test_x, _hidden = generate(name, self.config.scale, self.config.data_key or "")
        dest.mkdir(parents=True, exist_ok=True)
        np.save(dest / "train_x.npy", train_x)
        np.save(dest / "train_y.npy", train_y)
        np.save(dest / "test_x.npy", test_x)
        info = {
            "task": task_id,
            "kind": spec["kind"],
            "metric": spec["metric"],
            "classes": spec["classes"],
            "time_budget_s": self.config.time_budget_s,
            "n_train": int(train_x.shape[0]),
            "n_test": int(test_x.shape[0]),
            "n_features": int(train_x.shape[1]),
            "description": spec["description"],
        }
        (dest / "task.json").write_text(json.dumps(info, indent=2) + "\n")
        (dest / "TASK.md").write_text(self._statement(name))
        (dest / "output").mkdir(exist_ok=True)

    def grader_files(self, task_id: str) -> dict[str, str]:
        _name(task_id)
        return {f"grader/{n}": (GRADER_DIR / n).read_text() for n in ("grade.py", "data.py")}

    def grade(self, task_id: str, artifact_dir: Path, sandbox: Sandbox) -> TaskResult:
        name = _name(task_id)
        artifact_dir.mkdir(parents=True, exist_ok=True)
        return grade(
            sandbox,
            [
                "python3",
                "/grader/grade.py",
                name,
                repr(self.config.scale),
                "/artifact/predictions.npy",
                self.config.data_key or "",
            ],
            [Mount(GRADER_DIR, "/grader"), Mount(artifact_dir, "/artifact")],
            timeout_s=self.config.grade_timeout_s,
            what=f"training grader on {name}",
            workdir="/grader",
            runs_candidate=False,  # it reads the predictions as plain arrays: every step is the grader's
        )


def _check_subset(subset: str, where: str) -> None:
    subsets = {s for spec in TASKS.values() for s in spec["subsets"]} | {"all"}
    if subset not in subsets:
        raise ConfigError(f"{where}: unknown subset {subset!r}; allowed: {', '.join(sorted(subsets))}")


def _name(task_id: str) -> str:
    name = task_id.split("/", 1)[-1]
    if name not in TASKS:
        raise ConfigError(f"training: unknown task {task_id!r}")
    return name
