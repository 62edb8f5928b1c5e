"""The grader contract and its host-side runner: every grader's last line (the real grader-side scripts,
run as the sandbox runs them) parses into a verdict, a candidate failure or a grader fault; the runner
retries a fault and then retires the task, and never turns one into a candidate's score."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from metasearch.errors import TaskUnfit
from metasearch.sandboxes.local import LocalSandbox
from metasearch.sandboxes.protocol import ExecResult, Mount
from metasearch.suites import contract, grading, swebench
from metasearch.suites.code_edit import GRADER_DIR as CODE_EDIT_DIR
from metasearch.suites.code_edit import REPOS_DIR
from metasearch.suites.contract import CandidateFailure, GraderFault, Verdict, parse_line
from metasearch.suites.grading import TESTRUN_DIR, read_outcome, settle
from metasearch.suites.kernels import TASKS_DIR as KERNEL_TASKS
from metasearch.suites.training import GRADER_DIR as TRAINING_DIR
from metasearch.suites.training.data import generate

KERNELS_SCORE = Path(grading.__file__).resolve().parent / "kernels" / "grader" / "score.py"
EXERCISE_GRADE = TESTRUN_DIR / "exercise_grade.py"
POLYGLOT = Path(__file__).resolve().parent / "polyglot_real"


def _last_line(command: list[str], **kw: object) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, **kw)  # type: ignore[call-overload]
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert lines, done.stderr
    return str(lines[-1])


# -- the three shapes ---------------------------------------------------------------------------------


def test_the_three_shapes_round_trip_through_their_lines() -> None:
    for outcome in (
        Verdict(0.75, {"passed": 3.0}, ("x",), "1 of 4 tests failed"),
        Verdict(1.0, ids=("t::a", "t::b")),
        CandidateFailure("candidate crashed: ZeroDivisionError", {"correct": 0.0}, ("tamper_suspect",)),
        GraderFault("the reference's worker needs 9000 MB", need_mb=9000),
        GraderFault("the go toolchain is incomplete here: missing go"),
    ):
        assert parse_line(outcome.line()) == outcome


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"score": 1.0, "metrics": {"accuracy": 0.9}}', Verdict(1.0, {"accuracy": 0.9})),
        ('{"score": 0.0, "error": null}', Verdict(0.0)),  # a 0 the candidate earned, no failure named
        ('{"score": 0, "error": "no predictions"}', CandidateFailure("no predictions")),
        ('{"score": 7, "error": "x"}', Verdict(1.0, error="x")),  # clipped to [0, 1]
        ('{"score": NaN}', Verdict(0.0)),  # NaN never reaches the archive
        ('{"grader_fault": "disk full"}', GraderFault("disk full")),
        ('{"grader_fault": "small", "need_mb": 5000}', GraderFault("small", 5000)),
    ],
)
def test_lines_parse_into_exactly_one_shape(line: str, expected: contract.Outcome) -> None:
    assert parse_line(line) == expected


@pytest.mark.parametrize(
    "line",
    [
        '{"score": 1.0, "metrics": {"x": "y"}}',
        '{"metrics": {}}',
        '{"score": 1, "grader_fault": "both"}',
        '{"grader_fault": "x", "need_mb": "lots"}',
        '{"infrastructure": "an old shape"}',
        "[" * 100_000 + "]" * 100_000,
        "not json",
        "[1, 2]",
    ],
)
def test_anything_else_is_unreadable_and_a_grader_fault(line: str) -> None:
    """Whatever the last line holds (a value that is no number, no score, nesting past the recursion
    limit, an old shape), nothing raises; from a run of grader code alone it is the grader's fault, never a
    candidate's 0 (from a run of candidate code, see the next test: the candidate may have written it)."""
    with pytest.raises(ValueError):
        parse_line(line)
    result = ExecResult(exit_code=0, stdout=f"noise\n{line}\n", stderr="", duration_s=0.1)
    outcome = read_outcome(result, runs_candidate=False)
    assert isinstance(outcome, GraderFault) and "unreadable" in outcome.reason, outcome


# -- how a run ends -----------------------------------------------------------------------------------


def _ended(stdout: str, **kw: object) -> ExecResult:
    return ExecResult(
        **{"exit_code": 0, "stdout": stdout, "stderr": "Traceback ...", "duration_s": 1.0, **kw}
    )  # type: ignore[arg-type]


def test_how_a_grading_run_ends_decides_who_is_at_fault() -> None:
    verdict = '{"score": 1.0}'
    assert read_outcome(_ended(verdict)) == Verdict(1.0)
    # the candidate's worker killed for its memory, the judge's verdict printed: the verdict stands
    assert read_outcome(_ended(verdict, oom_killed=True)) == Verdict(1.0)
    bad_ends = {
        "printed nothing (exit code 1): Traceback": (_ended("", exit_code=1, reason="exit code 1"), {}),
        "timeout after 60s": (_ended("", exit_code=None, timed_out=True, reason="timeout after 60s"), {}),
        "out of memory (137) (memory limit 512 MB)": (
            _ended("", exit_code=137, oom_killed=True, reason="out of memory (137)"),
            {"memory_mb": 512},
        ),
        "after its verdict": (_ended(verdict, exit_code=1, reason="exit code 1"), {}),
        "unreadable line": (_ended("{not json", exit_code=0), {}),
    }
    for words, (result, kw) in bad_ends.items():
        # a run of grader code alone: the grader's fault, never the candidate's
        alone = read_outcome(result, runs_candidate=False, **kw)  # type: ignore[arg-type]
        assert isinstance(alone, GraderFault) and words in alone.reason, (words, alone)
        # a run in which the candidate's code ran (and may have brought it down): the candidate's failure
        beside = read_outcome(result, **kw)  # type: ignore[arg-type]
        assert isinstance(beside, CandidateFailure) and words in beside.reason, (words, beside)
    # a fault the grader states itself is a fault wherever it ran
    stated = _ended('{"grader_fault": "the toolchain is missing"}', exit_code=1, reason="exit code 1")
    assert isinstance(read_outcome(stated), GraderFault)
    # a full /tmp in a run of candidate code is the candidate's doing; in a grader-only run, the grader's
    full = {"exit_code": 0, "violation": "disk limit (1024 MB) reached in /tmp", "reason": "disk limit"}
    assert isinstance(read_outcome(_ended(verdict, **full)), CandidateFailure)
    assert isinstance(read_outcome(_ended(verdict, **full), runs_candidate=False), GraderFault)


# -- the policy -------------------------------------------------------------------------------------


def _script(*outcomes: contract.Outcome) -> tuple[list[int], object]:
    sizes: list[int] = []

    def attempt(memory_mb: int) -> contract.Outcome:
        sizes.append(memory_mb)
        return outcomes[min(len(sizes), len(outcomes)) - 1]

    return sizes, attempt


def test_a_fault_is_run_again_once_then_retires_the_task() -> None:
    sizes, attempt = _script(GraderFault("flaky disk"), Verdict(0.5))
    assert settle(attempt, what="g", memory_mb=100) == Verdict(0.5) and sizes == [100, 100]  # type: ignore[arg-type]
    sizes, attempt = _script(GraderFault("broken reference"))
    with pytest.raises(TaskUnfit, match=r"^g: broken reference; do this$"):
        settle(attempt, what="g", memory_mb=100, hint="do this")  # type: ignore[arg-type]
    assert sizes == [100, 100]


def test_a_fault_asking_for_memory_grows_the_run_within_the_cap() -> None:
    resized: list[int] = []
    sizes, attempt = _script(GraderFault("small", 300), GraderFault("still small", 600), Verdict(1.0))
    got = settle(attempt, what="g", memory_mb=100, max_memory_mb=1000, resized=resized.append)  # type: ignore[arg-type]
    assert got == Verdict(1.0) and sizes == [100, 300, 600] and resized == [300, 600]
    sizes, attempt = _script(GraderFault("needs a big machine", 5000))
    with pytest.raises(TaskUnfit, match="needs a big machine; over the cap of 1000 MB"):
        settle(attempt, what="g", memory_mb=100, max_memory_mb=1000)  # type: ignore[arg-type]
    assert sizes == [100]  # no run can fit: not tried again


# -- golden lines: each real grader-side script ----------------------------------------------------------


def test_training_grader_lines(tmp_path: Path) -> None:
    script = [sys.executable, str(TRAINING_DIR / "grade.py")]
    truth = generate("xor")[3]
    np.save(tmp_path / "right.npy", truth)
    right = parse_line(_last_line([*script, "xor", "1.0", str(tmp_path / "right.npy")]))
    assert isinstance(right, Verdict) and right.score == 1.0 and right.metrics, right
    missing = parse_line(_last_line([*script, "xor", "1.0", str(tmp_path / "none.npy")]))
    assert missing == CandidateFailure("no predictions: expected output/predictions.npy")
    broken = parse_line(_last_line([*script, "no-such-task", "1.0", str(tmp_path / "right.npy")]))
    assert isinstance(broken, GraderFault) and "KeyError" in broken.reason, broken


def test_code_edit_grader_lines(tmp_path: Path) -> None:
    repo = tmp_path / "textstats"
    shutil.copytree(REPOS_DIR / "textstats", repo)
    script = [sys.executable, str(CODE_EDIT_DIR / "grade.py"), str(repo)]
    patch = tmp_path / "patch.diff"
    patch.write_text("")
    empty = parse_line(_last_line([*script, str(patch), str(TESTRUN_DIR), "20"]))
    assert empty == CandidateFailure("empty patch: output/patch.diff holds no changes")
    source = (repo / "textstats.py").read_text().splitlines(keepends=True)
    patch.write_text(
        f"--- a/textstats.py\n+++ b/textstats.py\n@@ -1,{len(source)} +1,{len(source) + 1} @@\n"
        + "".join(f" {line}" for line in source)
        + "+# a comment\n"
    )
    graded = parse_line(_last_line([*script, str(patch), str(TESTRUN_DIR), "20"]))
    assert isinstance(graded, Verdict | CandidateFailure) and graded.metrics["applied"] == 1.0, graded
    # the hidden tests cannot even be collected on pristine code: no candidate code ran, the grader broke
    hidden = next((repo / "hidden_tests").glob("*.py"))
    hidden.write_text("import no_such_module_here\n" + hidden.read_text())
    broken = parse_line(_last_line([*script, str(patch), str(TESTRUN_DIR), "20"]))
    assert isinstance(broken, GraderFault), broken
    assert broken.reason.startswith("collecting the pristine hidden tests failed"), broken


def test_kernels_grader_lines(tmp_path: Path) -> None:
    task = tmp_path / "row_softmax"
    shutil.copytree(KERNEL_TASKS / "row_softmax", task)
    script = [sys.executable, "-I", str(KERNELS_SCORE), "--task-dir", str(task), "--reps", "3"]
    missing = parse_line(_last_line([*script, "--candidate", str(tmp_path / "none.py")]))
    assert missing == CandidateFailure("no artifact: none.py was not written", {"correct": 0.0})
    (task / "reference.py").write_text(
        (task / "reference.py").read_text().replace("rows = []", "raise RuntimeError('task bug')")
    )
    (tmp_path / "solution.py").write_text((task / "reference.py").read_text().replace("Model", "ModelNew"))
    broken = parse_line(_last_line([*script, "--candidate", str(tmp_path / "solution.py")]))
    assert isinstance(broken, GraderFault) and "task bug" in broken.reason, broken


def _exercise_line(mode: str, language: str, name: str, tmp_path: Path, env: dict[str, str]) -> str:
    from metasearch.suites.polyglot import PolyglotSuite

    suite = PolyglotSuite(PolyglotSuite.Config(path=str(POLYGLOT), languages=[language]))
    ex = suite.exercises[f"polyglot/{language}/{name}"]
    spec = json.dumps(suite._spec(ex))
    empty = tmp_path / "artifact"
    empty.mkdir(exist_ok=True)
    return _last_line([sys.executable, str(EXERCISE_GRADE), mode, str(ex.path), str(empty), spec], env=env)


def test_polyglot_grader_lines(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": os.path.dirname(sys.executable)}  # python3 only: no Go here
    expect = parse_line(_exercise_line("expect", "python", "transpose", tmp_path, env))
    assert isinstance(expect, Verdict) and expect.score == 1.0 and expect.ids, expect  # learnt test ids
    go = parse_line(_exercise_line("expect", "go", "pig-latin", tmp_path, env))
    assert go == GraderFault("the go toolchain is incomplete here: missing go")


def test_swebench_harness_outcomes_follow_the_contract(tmp_path: Path) -> None:
    """The harness runs on the host: its report read under the same contract, its faults under the same
    policy (the real ``report.json`` layout; a harness that writes none is the harness's fault)."""
    iid = "owner__project-1"
    status = {"FAIL_TO_PASS": {"success": ["a"], "failure": []}, "PASS_TO_PASS": {"success": ["b"]}}
    (tmp_path / "report.json").write_text(json.dumps({iid: {"resolved": True, "tests_status": status}}))
    assert swebench.read_report(iid, tmp_path, "", expected=["a", "b"]) == Verdict(
        1.0, {"resolved": 1.0, "fail_to_pass": 1.0, "pass_to_pass": 1.0}
    )
    (tmp_path / "report.json").unlink()
    fault = swebench.read_report(iid, tmp_path, "Error: docker daemon unreachable")
    assert isinstance(fault, GraderFault) and "docker daemon unreachable" in fault.reason
    with pytest.raises(TaskUnfit, match="swebench harness on x: the harness wrote no report"):
        settle(lambda _mb: fault, what="swebench harness on x")


@pytest.mark.docker
def test_a_grader_only_step_killed_for_memory_retires_the_task_in_docker(
    docker_sandbox_factory, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """The kernel ends a grader (no candidate code in it) at its memory limit: a grader fault, run again,
    then the task is retired; no score comes back."""
    grader = tmp_path / "grader"
    grader.mkdir(mode=0o755)
    (grader / "grade.py").write_text("block = b'x' * (1 << 30)\nprint('{\"score\": 1.0}')\n")
    (grader / "grade.py").chmod(0o644)
    with pytest.raises(TaskUnfit, match=r"printed nothing \(.*\(memory limit 256 MB\)"):
        grading.grade(
            docker_sandbox_factory(),
            ["python3", "/grader/grade.py"],
            [Mount(grader, "/grader")],
            timeout_s=60,
            what="training grader on big",
            memory_mb=256,
            runs_candidate=False,
        )


def test_a_real_grading_through_the_local_sandbox_reads_the_line(tmp_path: Path) -> None:
    (tmp_path / "grade.py").write_text('print(\'noise\')\nprint(\'{"score": 0.5, "error": "half"}\')\n')
    got = grading.grade(
        LocalSandbox(), ["python3", "/grader/grade.py"], [Mount(tmp_path, "/grader")], timeout_s=30, what="g"
    )
    assert got.score == 0.5 and got.error == "half"
