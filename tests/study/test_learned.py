"""What grading learns about a task outlives the process that learned it: a KernelBench problem whose grader
asked for more memory is journaled (``task_learned``), and the study resumed from that journal grades the
problem at the learned size from its first run (real study, GitArchive, journal and kernels scorer)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_provenance import PROBLEM as SCALE

from metasearch import launch
from metasearch.archive import read_index
from metasearch.config import load_config
from metasearch.sandboxes.local import LocalSandbox
from metasearch.sandboxes.protocol import ExecResult, RunSpec
from metasearch.suites.contract import GraderFault
from metasearch.suites.kernelbench import KernelBenchSuite
from metasearch.types import Evaluate

PROBLEM = SCALE.format(factor=2)  # a tiny KernelBench problem: x * 2
TASK = "kernelbench/L1/1_Double"
ESTIMATE_MB = 4096  # a problem this small gets the floor
NEED_MB = 6144


class RoomSandbox(LocalSandbox):
    """The local sandbox, but a grading run given less than ``need_mb`` ends as the kernels judge ends one
    that leaves the candidate less room than the reference needs (``grader/room.py``: a grader fault asking
    for ``need_mb``) without running: a local run has no memory cgroup for the judge to measure. A grading
    run given enough runs the real scorer. Records each grading run's memory."""

    def __init__(self, need_mb: int) -> None:
        super().__init__()
        self.need_mb = need_mb
        self.graded_mb: list[int] = []

    def run(self, spec: RunSpec) -> ExecResult:
        if spec.labels.get("metasearch.role") != "grader":
            return super().run(spec)
        memory = spec.limits.memory_mb
        assert memory is not None
        self.graded_mb.append(memory)
        if memory < self.need_mb:
            fault = GraderFault(f"the candidate's worker had less room than the reference's needs: the run "
                                f"needs about {self.need_mb} MB", self.need_mb)  # fmt: skip
            return ExecResult(exit_code=1, stdout=fault.line() + "\n", stderr="", duration_s=0.0)
        return super().run(spec)


def _seed(folder: Path) -> Path:
    """An agent that hands in a correct ModelNew."""
    folder.mkdir(parents=True)
    (folder / "solution.py").write_text(PROBLEM.replace("class Model(", "class ModelNew("))
    (folder / "agent.toml").write_text(
        f'name = "{folder.name}"\n[entry]\nsolve = ["sh", "-c", "cp /agent/solution.py /task/output/"]\n'
    )
    return folder


def _config(tmp_path: Path) -> Path:
    problems = tmp_path / "kb" / "level1"
    problems.mkdir(parents=True)
    (problems / "1_Double.py").write_text(PROBLEM)
    data: dict[str, Any] = {
        "study": {"name": "learned", "seeds": [str(_seed(tmp_path / f"seed-{n}")) for n in "ab"]},
        "budget": {"evaluations": 10, "expansions": 1},
        "scheduler": {"name": "greedy"},
        "proposer": {"name": "knobs"},
        "suite": {
            "name": "kernelbench",
            "path": str(tmp_path / "kb"),
            "levels": [1],
            "device": "cpu",
            "reps": 3,
            "memory_limit_mb": 8192,
        },
        "sandbox": {"name": "local"},
        "tracking": {"mlflow": {"enabled": False}},
    }
    path = tmp_path / "learned.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _grade_next(launched: launch.Launched) -> None:
    """The study's next job, a seed's first evaluation, run by the study's runner and told to the study."""
    job = launched.study.ask()
    assert isinstance(job, Evaluate) and job.task_id == TASK, job
    launched.study.tell(job, launched.runner(job))


@pytest.mark.timeout(900)  # four sizings and two real gradings; about three minutes on a busy 2-core machine
def test_memory_a_grading_needed_is_journaled_and_a_resumed_study_starts_there(tmp_path: Path) -> None:
    study_dir = tmp_path / "studies" / "learned"
    launched = launch.create(load_config(_config(tmp_path)), study_dir)
    try:
        assert launched.suite.grading_mb()[TASK] == ESTIMATE_MB
        launched.runner.sandbox = first = RoomSandbox(NEED_MB)
        _grade_next(launched)
    finally:
        launched.close()
    assert first.graded_mb == [ESTIMATE_MB, NEED_MB]  # too little, then what the grader asked for
    index = read_index(study_dir)
    assert [ev.score > 0 and ev.error is None for ev in index.evaluations.values()] == [True]
    assert index.learned == {TASK: {"grading_mb": NEED_MB}} and not index.retired_tasks
    events = [json.loads(line) for line in (study_dir / "journal.jsonl").read_text().splitlines()]
    assert [(e["task_id"], e["facts"]) for e in events if e["op"] == "task_learned"] == [
        (TASK, {"grading_mb": NEED_MB})
    ]

    resumed = launch.reopen(study_dir)  # a new process's view: a fresh suite, fed from the journal
    try:
        assert resumed.suite.grading_mb()[TASK] == NEED_MB
        resumed.runner.sandbox = second = RoomSandbox(NEED_MB)
        _grade_next(resumed)  # the other seed, on the same problem
    finally:
        resumed.close()
    assert second.graded_mb == [NEED_MB]  # no run is spent finding the size again
    index = read_index(study_dir)
    assert len(index.evaluations) == 2 and all(ev.error is None for ev in index.evaluations.values())
    events = [json.loads(line) for line in (study_dir / "journal.jsonl").read_text().splitlines()]
    assert sum(e["op"] == "task_learned" for e in events) == 1  # nothing new was learned the second time


def test_a_suite_remembers_facts_of_plain_data_only(tmp_path: Path) -> None:
    problems = tmp_path / "kb" / "level1"
    problems.mkdir(parents=True)
    (problems / "1_Double.py").write_text(PROBLEM)
    suite = KernelBenchSuite(KernelBenchSuite.Config(path=str(tmp_path / "kb"), levels=[1], device="cpu"))
    suite.learn(TASK, {"grading_mb": 5120})
    suite.learn(TASK, {"note": "x"})  # facts add up; a later value replaces an earlier one
    assert suite.learned() == {TASK: {"grading_mb": 5120, "note": "x"}}
    suite.learn(TASK, {"grading_mb": 1024})  # never below what the problem's sizes need
    assert suite.grading_mb()[TASK] == ESTIMATE_MB
    for bad in (True, None, [1]):
        with pytest.raises(TypeError, match="not an int, float or str"):
            suite.learn(TASK, {"grading_mb": bad})  # type: ignore[dict-item]
    assert suite.learned()[TASK]["grading_mb"] == 1024
