"""A grader's own fault never charges the candidate: through a real Runner, LocalSandbox and GitArchive, a
study retires the task with the reason (``errors.TaskUnfit``) and records no evaluation for it."""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

from metasearch.archive import GitArchive
from metasearch.registry import SCHEDULERS
from metasearch.runner import Runner
from metasearch.sandboxes.local import LocalSandbox
from metasearch.sandboxes.protocol import ExecResult, Mount, RunSpec, Sandbox
from metasearch.study import Study
from metasearch.suites.grading import grade
from metasearch.suites.polyglot import PolyglotSuite
from metasearch.suites.protocol import Suite, Task, TaskResult
from metasearch.types import Agent, Budget, Evaluate, Proposal

POLYGLOT = Path(__file__).resolve().parents[1] / "suites" / "polyglot_real"

# One grader-side script, its behaviour picked by the task: every fault kind, and the candidate's own failures.
GRADER = r"""
import json, os, sys, time
kind = sys.argv[1]
produced = os.path.isfile(sys.argv[2])
if kind == "ok":
    print(json.dumps({"score": 1.0 if produced else 0.0, "metrics": {}, "flags": [], "error": None}))
elif kind == "candidate_crash":  # the candidate's code crashed in the grader's test run: its failure
    print(json.dumps({"score": 0.0, "error": "candidate crashed: ZeroDivisionError"}))
elif kind == "candidate_timeout":  # the grader stopped the candidate's code at its own limit
    print(json.dumps({"score": 0.0, "error": "tests timed out in the direct run"}))
elif kind == "crash":  # grader code that crashes
    raise RuntimeError("grader bug: KeyError in the scorer")
elif kind == "timeout":  # a grader-only step (regenerating labels, collecting pristine tests) overruns
    time.sleep(60)
elif kind == "silent":
    pass
elif kind == "need_mb":  # the run was too small for the problem, whoever the candidate
    print(json.dumps({"grader_fault": "the reference's worker needs 90000 MB", "need_mb": 90000}))
elif kind == "toolchain":
    print(json.dumps({"grader_fault": "the go toolchain is incomplete here: missing go"}))
elif kind == "harness":
    print("noise from the harness")
    print(json.dumps({"grader_fault": "the harness wrote no report: docker: cannot connect"}))
"""
FAULTS = {
    "crash": "grader bug: KeyError in the scorer",
    "timeout": "timeout after 3s",
    "silent": "the grader printed nothing (exit code 0)",
    "need_mb": "over the cap of 2048 MB",
    "toolchain": "missing go",
    "harness": "the harness wrote no report",
}
CANDIDATE = ("candidate_crash", "candidate_timeout")


class FaultySuite(Suite):
    """A suite whose graders misbehave in every way a grader can (a fake implementing ``Suite``)."""

    name = "faulty"
    description = "write answer.txt"

    def __init__(self, grader_dir: Path) -> None:
        self.grader_dir = grader_dir

    def tasks(self, subset: str | None = None) -> Sequence[Task]:
        kinds = ["ok", *CANDIDATE, *FAULTS]
        return [Task(id=f"faulty/{k}", suite=self.name, statement="write output/answer.txt") for k in kinds]

    def prepare(self, task_id: str, dest: Path) -> None:
        (dest / "output").mkdir(parents=True, exist_ok=True)

    def grade(self, task_id: str, artifact_dir: Path, sandbox: Sandbox) -> TaskResult:
        kind = task_id.split("/", 1)[1]
        artifact_dir.mkdir(parents=True, exist_ok=True)
        mounts = [Mount(self.grader_dir, "/grader"), Mount(artifact_dir, "/artifact")]
        alone = not kind.startswith("beside_")  # these graders run no candidate code, unless so named
        kind = kind.removeprefix("beside_")
        command = ["python3", "/grader/grader.py", kind, "/artifact/answer.txt"]
        return grade(
            sandbox, command, mounts, timeout_s=3, what=f"faulty grader on {kind}", runs_candidate=not alone
        )


class CountingSandbox(LocalSandbox):
    """The local sandbox, counting the grading runs of each task kind."""

    def __init__(self) -> None:
        super().__init__()
        self.grader_runs: Counter[str] = Counter()

    def run(self, spec: RunSpec) -> ExecResult:
        if spec.labels.get("metasearch.role") == "grader":
            self.grader_runs[spec.command[2]] += 1
        return super().run(spec)


class NoProposer:
    """Never asked: these studies only evaluate their seed."""

    def propose(self, parent: Agent, workspace: Path, context: object) -> Proposal:
        raise AssertionError("no expansion in this test")


def _seed_archive(root: Path, solve: str) -> GitArchive:
    seed = root.parent / f"{root.name}-seed"
    seed.mkdir()
    (seed / "agent.toml").write_text(f'name = "seed"\n[entry]\nsolve = ["sh", "-c", "{solve}"]\n')
    archive = GitArchive.create(root, study=root.name, config_text="{}\n")
    archive.add_seed("seed", seed, job_id="seed-0")
    return archive


def _evaluate_seed(
    archive: GitArchive, suite: object, tasks: Sequence[Task], sandbox: Sandbox | None = None
) -> Study:
    """The seed's first evaluation on every task, through the real Runner and the study's ask/tell."""
    scheduler = SCHEDULERS.resolve("hgm")
    ids = [t.id for t in tasks]
    study = Study(archive, scheduler(scheduler.Config()), tasks=ids, budget=Budget(evaluations=100))
    runner = Runner(archive, suite, sandbox or LocalSandbox(), NoProposer(), "none", {t.id: t for t in tasks})  # type: ignore[arg-type]
    for _ in range(len(ids)):
        job = study.ask()
        assert isinstance(job, Evaluate), job
        study.tell(job, runner(job))
    return study


def test_every_kind_of_grader_fault_retires_the_task_and_charges_no_candidate(tmp_path: Path) -> None:
    grader_dir = tmp_path / "grader"
    grader_dir.mkdir()
    (grader_dir / "grader.py").write_text(GRADER)
    suite = FaultySuite(grader_dir)
    archive = _seed_archive(tmp_path / "study", "echo 42 > /task/output/answer.txt")
    sandbox = CountingSandbox()
    study = _evaluate_seed(archive, suite, suite.tasks(), sandbox)

    retired = archive.index.retired_tasks
    assert set(retired) == {f"faulty/{k}" for k in FAULTS}, retired
    for kind, reason in FAULTS.items():
        assert reason in retired[f"faulty/{kind}"], (kind, retired[f"faulty/{kind}"])
        assert retired[f"faulty/{kind}"].startswith(f"faulty grader on {kind}: ")
    graded = {ev.task_id: ev for ev in archive.index.evaluations.values()}
    assert set(graded) == {"faulty/ok", *(f"faulty/{k}" for k in CANDIDATE)}, graded  # no 0 for a fault
    assert graded["faulty/ok"].score == 1.0
    for kind in CANDIDATE:  # the candidate's own failures stay its own
        assert graded[f"faulty/{kind}"].score == 0.0 and graded[f"faulty/{kind}"].error
    # a fault is run again once before it retires the task; a fault asking for more than the cap is not
    assert {k: sandbox.grader_runs[k] for k in FAULTS} == {k: 1 if k == "need_mb" else 2 for k in FAULTS}
    assert study.tasks == ("faulty/ok", *(f"faulty/{k}" for k in CANDIDATE)) and study.stop_reason is None
    archive.close()
    reopened = GitArchive.open(tmp_path / "study")  # journaled: a resumed study keeps them retired
    assert set(reopened.index.retired_tasks) == set(retired)
    reopened.close()


@pytest.mark.skipif(shutil.which("go") is not None, reason="go is installed here: no missing toolchain")
def test_a_missing_toolchain_in_the_real_polyglot_grader_retires_the_task(tmp_path: Path) -> None:
    """The real polyglot grader on a Go exercise where no Go is installed: the task is retired, naming what
    is missing and the fix; the Python exercise beside it is graded as usual."""
    suite = PolyglotSuite(PolyglotSuite.Config(path=str(POLYGLOT), languages=["go", "python"]))
    archive = _seed_archive(tmp_path / "study", "true")  # leaves the stubs: a candidate failure in Python
    _evaluate_seed(archive, suite, suite.tasks())
    go, python = "polyglot/go/pig-latin", "polyglot/python/transpose"
    reason = archive.index.retired_tasks[go]
    assert "missing go" in reason and "metasearch images build polyglot" in reason, reason
    graded = {ev.task_id: ev for ev in archive.index.evaluations.values()}
    assert set(graded) == {python} and graded[python].score == 0.0 and graded[python].error, graded
    archive.close()


def test_a_run_of_candidate_code_that_crashes_or_overruns_is_the_candidates_failure(tmp_path: Path) -> None:
    """Where the candidate's code runs inside the grading run, it may be what crashed, overran or went
    silent: that is charged to it (a candidate could otherwise retire a task it does badly on). Only a
    fault the grader states itself (``grader_fault``) retires the task there."""
    grader_dir = tmp_path / "grader"
    grader_dir.mkdir()
    (grader_dir / "grader.py").write_text(GRADER)
    suite = FaultySuite(grader_dir)
    kinds = ["crash", "timeout", "silent", "toolchain"]
    tasks = [Task(id=f"faulty/beside_{k}", suite="faulty", statement="x") for k in kinds]
    archive = _seed_archive(tmp_path / "study", "echo 42 > /task/output/answer.txt")
    _evaluate_seed(archive, suite, tasks)
    graded = {ev.task_id: ev for ev in archive.index.evaluations.values()}
    assert set(graded) == {f"faulty/beside_{k}" for k in ("crash", "timeout", "silent")}, graded
    assert all(ev.score == 0.0 and "candidate's code" in (ev.error or "") for ev in graded.values()), graded
    assert set(archive.index.retired_tasks) == {"faulty/beside_toolchain"}
    archive.close()
