"""What every suite's grading shares: the fresh grading run, and reading the grader's verdict.

A grader is a script that runs in a *fresh* sandbox with the hidden files and the candidate's artifact
mounted read-only, and prints one JSON object as its last stdout line: ``{"score", "metrics", "flags",
"error"}``. ``grade`` runs it; anything else the sandbox reports (crash, timeout, garbage) becomes a
grading failure with the reason, never an exception.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from metasearch.sandboxes.protocol import ExecResult, Limits, Mount, RunSpec, Sandbox
from metasearch.suites.protocol import TaskResult

GRADER_ENV = {"PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


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
    spec = RunSpec(
        command=list(command),
        mounts=tuple(mounts),
        workdir=workdir,
        env={**GRADER_ENV, **(env or {})},
        limits=Limits(timeout_s=timeout_s, memory_mb=memory_mb),
        labels={"metasearch.role": "grader"},
    )
    return parse_grader_output(sandbox.run(spec))


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
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return TaskResult(score=0.0, error=f"grader output unreadable: {exc}")
    return TaskResult(
        score=min(1.0, max(0.0, score)) if score == score else 0.0,  # NaN never reaches the archive
        metrics=metrics,
        flags=flags,
        error=None if error is None else str(error),
    )
