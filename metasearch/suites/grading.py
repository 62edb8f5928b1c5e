"""What every suite's grading shares: the one host-side runner of graders, and its policy on faults.

A grader is a script that runs in a *fresh* sandbox with the hidden files and the candidate's artifact
mounted read-only, and prints one line of the grader contract (``contract.py``) last: a verdict, a
candidate failure, or a grader fault. ``run_grader`` runs it and owns what follows: a grader fault (or,
in a run of grader code alone, a grader that printed nothing readable, crashed, or ran out of time or
memory) is retried, with the memory
it asked for (``need_mb``) within the cap, and then raised as ``errors.TaskUnfit``, so the study retires
the task with the reason instead of charging the candidate a 0.

Test-based suites (code-edit, polyglot, SWE-bench) share more: a base class (``hidden_tests.py``,
whose ``run_test_grader`` runs their graders through ``run_grader``), the grader-side package ``testrun``
(mounted read-only at ``TESTRUN_MOUNT``) whose verdicts come from two harnesses reporting over private
channels, and its static tamper scan; ``TAMPER`` results come back flagged so the study can hold them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from metasearch.errors import TaskUnfit
from metasearch.sandboxes.protocol import ExecResult, Limits, Mount, RunSpec, Sandbox
from metasearch.suites import testrun
from metasearch.suites.contract import CandidateFailure, GraderFault, Judged, Outcome, parse_line
from metasearch.suites.protocol import TaskResult

log = logging.getLogger(__name__)

GRADER_ENV = {"PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
TESTRUN_DIR = Path(testrun.__file__).resolve().parent
TESTRUN_MOUNT = "/grader-lib/testrun"
TAMPER = "tamper_suspect"
ATTEMPTS = 3  # grading runs of one artifact at most: each one the room the grader asked for in the last
RETRIES = 1  # reruns of a grader fault that asked for no more memory (a flaky disk, a daemon hiccup)


def testrun_mount() -> Mount:
    """The shared grader-side package, read-only; graders import it as ``testrun``."""
    return Mount(TESTRUN_DIR, TESTRUN_MOUNT)


def run_budget(timeout_s: float, runs: int) -> float:
    """Seconds for each of ``runs`` test runs inside one grading run of ``timeout_s`` (setup kept aside)."""
    return max(1.0, (timeout_s - min(15.0, timeout_s / 4)) / runs)


def grade(
    sandbox: Sandbox,
    command: Sequence[str],
    mounts: Sequence[Mount],
    *,
    timeout_s: float,
    what: str,
    memory_mb: int = 2048,
    workdir: str = "/tmp",
    env: Mapping[str, str] | None = None,
    runs_candidate: bool = True,
) -> TaskResult:
    """``run_grader``'s verdict as the TaskResult the suite returns (raises as it does)."""
    return run_grader(
        sandbox,
        command,
        mounts,
        timeout_s=timeout_s,
        what=what,
        memory_mb=memory_mb,
        workdir=workdir,
        env=env,
        runs_candidate=runs_candidate,
    ).task_result()


def run_grader(
    sandbox: Sandbox,
    command: Sequence[str],
    mounts: Sequence[Mount],
    *,
    timeout_s: float,
    what: str,
    memory_mb: int = 2048,
    max_memory_mb: int | None = None,
    pids: int | None = None,
    workdir: str = "/tmp",
    env: Mapping[str, str] | None = None,
    runs_candidate: bool = True,
    resized: Callable[[int], None] | None = None,
    hint: str = "",
) -> Judged:
    """Run a grader script in a fresh sandbox run and read its last line (``read_outcome``); a grader
    fault goes through ``settle``'s policy (retried, then ``TaskUnfit`` naming ``what`` and ``hint``).

    ``runs_candidate``: the grading run executes candidate code, so a rule of the sandbox broken during it
    (a full ``/tmp``) is the candidate's doing. ``pids`` left None: the sandbox's. ``max_memory_mb``: how
    far a grader's ``need_mb`` may grow the run (default: not beyond ``memory_mb``); ``resized`` is told
    each new size. Sandbox errors (the daemon down) raise as they do."""

    def attempt(memory: int) -> Outcome:
        spec = RunSpec(
            command=list(command),
            mounts=tuple(mounts),
            workdir=workdir,
            env={**GRADER_ENV, **(env or {})},
            limits=Limits(timeout_s=timeout_s, memory_mb=memory, pids=pids),
            labels={"metasearch.role": "grader"},
        )
        return read_outcome(sandbox.run(spec), runs_candidate=runs_candidate, memory_mb=memory)

    return settle(
        attempt, what=what, memory_mb=memory_mb, max_memory_mb=max_memory_mb, resized=resized, hint=hint
    )


def settle(
    attempt: Callable[[int], Outcome],
    *,
    what: str,
    memory_mb: int = 0,
    max_memory_mb: int | None = None,
    resized: Callable[[int], None] | None = None,
    hint: str = "",
) -> Judged:
    """The policy on grader faults, for any grader (``attempt(memory_mb)`` runs it once): a verdict or a
    candidate failure is returned as it is; a fault asking for more memory than the cap raises
    ``TaskUnfit`` at once; one asking for more within it is run again with that (``resized`` told); any
    other fault is run again ``RETRIES`` times; then ``TaskUnfit`` with the last reason, so the study
    retires the task. A grader fault is never a candidate's score."""
    cap = max(memory_mb, max_memory_mb or memory_mb)
    retried = 0
    for n in range(1, ATTEMPTS + 1):
        outcome = attempt(memory_mb)
        if not isinstance(outcome, GraderFault):
            return outcome
        fault, need = outcome, outcome.need_mb or 0
        if need > cap:
            raise TaskUnfit(
                f"{what}: {fault.reason}; over the cap of {cap} MB (suite.memory_limit_mb){_then(hint)}"
            )
        if need > memory_mb:
            log.info("%s: the grader needs more memory: %d MB, not %d", what, need, memory_mb)
            memory_mb = need
            if resized is not None:
                resized(need)
        elif retried < RETRIES:
            retried += 1
            log.warning("%s: grader fault, running it again: %s", what, fault.reason)
        else:
            break
        if n == ATTEMPTS:
            break
    raise TaskUnfit(f"{what}: {fault.reason}{_then(hint)}")


def read_outcome(result: ExecResult, *, runs_candidate: bool = True, memory_mb: int | None = None) -> Outcome:
    """A grading run's outcome under the contract: its last stdout line decides when the run ended well.

    A grader fault it states itself (``grader_fault``) is a grader fault wherever it ran. Otherwise a run
    that printed nothing readable, crashed, or ran out of time or memory is blamed by what it ran: with
    ``runs_candidate`` (the candidate's code ran in it, and may have brought it down) the candidate's
    failure, as is a rule of the sandbox broken there; in a run of grader code alone, a grader fault."""
    if result.violation and runs_candidate:
        return CandidateFailure(f"the grading run broke a rule of the sandbox: {result.violation}")
    ended = result.reason or f"exit code {result.exit_code}"
    if result.oom_killed and memory_mb:
        ended += f" (memory limit {memory_mb} MB)"
    stderr = result.stderr.strip()[-500:]
    lines = [line for line in result.stdout.strip().splitlines() if line.strip()]
    outcome: Outcome | None = None
    problem = "printed nothing"
    if lines:
        try:
            outcome = parse_line(lines[-1])
        except ValueError as exc:
            problem = f"ended on an unreadable line ({exc})"
        else:
            problem = "ended badly after its verdict"
    if isinstance(outcome, GraderFault) or (outcome is not None and result.ok):
        return outcome
    if runs_candidate:
        return CandidateFailure(
            f"the grading run of the candidate's code {problem} ({ended}): {stderr}"[:2000]
        )
    return GraderFault(f"the grader {problem} ({ended}): {stderr}"[:2000])


def _then(hint: str) -> str:
    return f"; {hint}" if hint else ""
