"""A suite for the Ray tests: the training suite, counting its gradings of each task as a learned fact
(``Suite.learn``), with the count it started from as a metric. Named by path in a config
(``suite.name: counting_suite:CountingSuite``), with this folder on ``PYTHONPATH``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from metasearch.sandboxes.protocol import Sandbox
from metasearch.suites.protocol import TaskResult
from metasearch.suites.training import TrainingSuite


class CountingSuite(TrainingSuite):
    def grade(self, task_id: str, artifact_dir: Path, sandbox: Sandbox) -> TaskResult:
        before = int(self.learned().get(task_id, {}).get("graded", 0))
        result = super().grade(task_id, artifact_dir, sandbox)
        self.learn(task_id, {"graded": before + 1})
        return replace(result, metrics={**result.metrics, "graded_before": float(before)})
