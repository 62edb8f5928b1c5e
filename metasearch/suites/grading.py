"""What every suite's grading shares: the fresh grading run, and reading the grader's verdict.

A grader is a script that runs in a *fresh* sandbox with the hidden files and the candidate's artifact
mounted read-only, and prints one JSON object as its last stdout line: ``{"score", "metrics", "flags",
"error"}``. ``grade`` runs it; anything else the sandbox reports (crash, timeout, garbage) becomes a
grading failure with the reason, never an exception.

Test-based suites (code-edit, polyglot, SWE-bench) share more: the grader-side package ``testrun``
(mounted read-only at ``TESTRUN_MOUNT``) whose verdicts come from two harnesses reporting over private
channels, and its static tamper scan; ``TAMPER`` results come back flagged so the study can hold them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from metasearch.sandboxes.protocol import ExecResult, Limits, Mount, RunSpec, Sandbox
from metasearch.suites import testrun
from metasearch.suites.protocol import TaskResult

GRADER_ENV = {"PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
TESTRUN_DIR = Path(testrun.__file__).resolve().parent
TESTRUN_MOUNT = "/grader-lib/testrun"
TAMPER = "tamper_suspect"


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
    memory_mb: int = 2048,
    workdir: str = "/tmp",
    env: Mapping[str, str] | None = None,
) -> TaskResult:
    """Run a grader script in a fresh sandbox run and parse its verdict."""
    return parse_grader_output(
        run_grader(
            sandbox, command, mounts, timeout_s=timeout_s, memory_mb=memory_mb, workdir=workdir, env=env
        )
    )


def run_grader(
    sandbox: Sandbox,
    command: Sequence[str],
    mounts: Sequence[Mount],
    *,
    timeout_s: float,
    memory_mb: int = 2048,
    pids: int | None = None,
    workdir: str = "/tmp",
    env: Mapping[str, str] | None = None,
) -> ExecResult:
    """Run a grader script in a fresh sandbox run; its raw result (for graders that print more than a
    verdict, such as a trusted run that learns the expected test ids). ``pids`` left None: the sandbox's."""
    spec = RunSpec(
        command=list(command),
        mounts=tuple(mounts),
        workdir=workdir,
        env={**GRADER_ENV, **(env or {})},
        limits=Limits(timeout_s=timeout_s, memory_mb=memory_mb, pids=pids),
        labels={"metasearch.role": "grader"},
    )
    return sandbox.run(spec)


def parse_grader_output(result: ExecResult) -> TaskResult:
    """A grader prints one JSON object as its last stdout line; anything else is a grading failure."""
    lines = [line for line in result.stdout.strip().splitlines() if line.strip()]
    if not result.ok or not lines:
        reason = result.reason or "no output"
        return TaskResult(score=0.0, error=f"grader failed: {reason}: {result.stderr[-500:]}")
    try:
        data = json.loads(lines[-1])
        score = float(data["score"])
        metrics = {str(k): float(v) for k, v in (data.get("metrics") or {}).items()}
        flags = tuple(str(f) for f in data.get("flags") or ())
        error = data.get("error")
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:  # (nested too deeply)
        return TaskResult(score=0.0, error=f"grader output unreadable: {type(exc).__name__}: {exc}")
    return TaskResult(
        score=min(1.0, max(0.0, score)) if score == score else 0.0,  # NaN never reaches the archive
        metrics=metrics,
        flags=flags,
        error=None if error is None else str(error),
    )
