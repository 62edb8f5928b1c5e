"""The grader contract: what every grader's last stdout line says, in one of exactly three shapes.

A grader (a script in a fresh grading sandbox, or a harness the host runs) ends by printing one JSON
object on its last stdout line:

- a verdict: ``{"score": 0.75, "metrics": {...}, "flags": [...], "error": null}``; ``error`` may name what
  the candidate did not pass when it still earned a score (``"1 of 4 tests failed"``);
- a candidate failure: ``{"score": 0, "error": "reason", "metrics"?: {...}, "flags"?: [...]}``: the
  candidate produced nothing gradable or failed outright (no artifact, a crash, a timeout of its code, a
  tamper finding);
- a grader fault: ``{"grader_fault": "reason", "need_mb"?: 8192}``: the grader itself failed (its memory,
  disk, toolchain, image, time limit, its own code, a step that runs no candidate code). Never the
  candidate's failure; ``need_mb`` says how much memory the run should get when that was the cause.

A verdict or a candidate failure may also carry ``"ids"``: the test ids a trusted run learnt (polyglot's
run of an exercise's example solution). ``parse_line`` reads a line into ``Verdict``, ``CandidateFailure``
or ``GraderFault``; anything else raises ``ValueError``. The host side (``grading.run_grader``) owns what
happens next. Grader-side scripts print these shapes themselves: they run without this package.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from metasearch.suites.protocol import TaskResult


@dataclass(frozen=True)
class Verdict:
    """The grader judged the candidate: ``score`` in [0, 1]; ``error`` names what it did not pass."""

    score: float
    metrics: Mapping[str, float] = field(default_factory=dict)
    flags: tuple[str, ...] = ()
    error: str | None = None
    ids: tuple[str, ...] = ()

    def task_result(self) -> TaskResult:
        return TaskResult(self.score, dict(self.metrics), self.flags, self.error)

    def line(self) -> str:
        data = {
            "score": self.score,
            "metrics": dict(self.metrics),
            "flags": list(self.flags),
            "error": self.error,
        }
        return json.dumps({**data, "ids": list(self.ids)} if self.ids else data)


@dataclass(frozen=True)
class CandidateFailure:
    """The candidate failed (score 0), with the reason."""

    reason: str
    metrics: Mapping[str, float] = field(default_factory=dict)
    flags: tuple[str, ...] = ()
    ids: tuple[str, ...] = ()

    @property
    def score(self) -> float:
        return 0.0

    @property
    def error(self) -> str:
        return self.reason

    def task_result(self) -> TaskResult:
        return TaskResult(0.0, dict(self.metrics), self.flags, self.reason)

    def line(self) -> str:
        data = {"score": 0.0, "metrics": dict(self.metrics), "flags": list(self.flags), "error": self.reason}
        return json.dumps({**data, "ids": list(self.ids)} if self.ids else data)


@dataclass(frozen=True)
class GraderFault:
    """The grader itself failed: an infrastructure error, never the candidate's; ``need_mb`` when more
    memory would let it finish."""

    reason: str
    need_mb: int | None = None

    def line(self) -> str:
        data: dict[str, Any] = {"grader_fault": self.reason}
        return json.dumps(data if self.need_mb is None else {**data, "need_mb": self.need_mb})


Judged = Verdict | CandidateFailure
Outcome = Verdict | CandidateFailure | GraderFault


def parse_line(line: str) -> Outcome:
    """One of the three shapes from a grader's last line; ``ValueError`` (with the reason) for anything
    else: not JSON, not an object, both a score and a fault, a value of the wrong type."""
    try:
        data = json.loads(line)
    except RecursionError:  # nested past the recursion limit
        raise ValueError("nested too deeply") from None
    if not isinstance(data, dict):
        raise ValueError(f"not a JSON object: {type(data).__name__}")
    if ("grader_fault" in data) == ("score" in data):
        raise ValueError(f"neither a verdict nor a grader fault, or both: keys {sorted(data)[:8]}")
    try:
        if "grader_fault" in data:
            need = data.get("need_mb")
            return GraderFault(str(data["grader_fault"]), None if need is None else int(need))
        score = float(data["score"])
        metrics = {str(k): float(v) for k, v in (data.get("metrics") or {}).items()}
        flags = tuple(str(f) for f in data.get("flags") or ())
        ids = tuple(str(i) for i in data.get("ids") or ())
    except (TypeError, AttributeError, OverflowError) as exc:  # ValueError passes through as itself
        raise ValueError(f"{type(exc).__name__}: {exc}") from None
    error = data.get("error")
    score = min(1.0, max(0.0, score)) if not math.isnan(score) else 0.0  # NaN never reaches the archive
    if error is not None and str(error) and score == 0.0:
        return CandidateFailure(str(error), metrics, flags, ids)
    return Verdict(score, metrics, flags, None if error is None else str(error), ids)
