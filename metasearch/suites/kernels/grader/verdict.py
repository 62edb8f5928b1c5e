"""What the judge's measurements add up to: the flags they raise, the speedup and its interval, the score.

Score: 0 unless correct and no disqualifying flag; 0.1 for correct but not measurably faster (the 95%
bootstrap CI's lower end at most ``MIN_GAIN``); faster: 0.1 + 0.9 * min(1, log(speedup) / log(10)). A
speedup above the task's ``ceiling`` is flagged ``speedup_above_ceiling`` and scored 0.1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rounds import Timing, bootstrap, charged_time, typical, waiting

FULL_CREDIT_SPEEDUP = 10.0
MIN_GAIN = 1.05  # the CI's lower end must clear this to count as faster: timing noise is not a speedup
UNDISTURBED = 1.25  # up to this much slower is noise; beyond it the speedup uses the reference timed alone
OUTSIDE_CPU = (0.05, 0.05)  # allowed CPU outside the candidate's commands: fraction of their wall, plus s
HELPER_CPU = (0.05, 0.01)  # allowed CPU of other processes of the candidate's while timed: fraction, plus s
DISQUALIFYING = (
    "modified_inputs", "tampered_timer", "tampered_runtime", "called_reference", "multithreaded",
    "stale_output", "work_outside_timing", "reference_disturbed",
)  # fmt: skip


@dataclass(frozen=True)
class Accounted:
    """The kernel's counters for the candidate's processes, in seconds: CPU outside its worker's commands,
    its worker's CPU and wall time inside them, its other processes' CPU while timed, and the cost of a
    timed command that runs no call."""

    outside: float
    cpu_inside: float
    wall_inside: float
    helper_cpu: float
    overhead: float


def score_from(correct: bool, speedup: float, ci_low: float, flags: list[str]) -> float:
    if not correct or any(f in flags for f in DISQUALIFYING):
        return 0.0
    if "speedup_above_ceiling" in flags or ci_low <= MIN_GAIN:
        return 0.1
    return 0.1 + 0.9 * min(1.0, math.log(speedup) / math.log(FULL_CREDIT_SPEEDUP))


def failed(reason: str, flags: list[str] | None = None) -> dict[str, Any]:
    return {"score": 0.0, "metrics": {"correct": 0.0}, "flags": flags or [], "error": reason}


def verdict(
    timing: Timing, solo: list[float], cpu: Accounted, flags: list[str], changed: list[str], ceiling: float
) -> dict[str, Any]:
    """The verdict of a correct candidate from its timing, the reference's rounds alone (``solo``) and the
    accounting; ``flags`` holds what the judge raised before, and gains what is raised here."""

    def flag(name: str) -> None:
        if name not in flags:
            flags.append(name)

    ref_calls = [r.call for r in timing.ref]
    cand_s, charged, charged_idle, own = charged_time(timing.cand, timing.ref)
    why = []  # what found work outside the timed command, for the error
    out_of_sight = cand_s - typical([c.call for c in timing.cand])
    if out_of_sight > 0.5 * cand_s:
        why.append(f"{out_of_sight * 1e3:.3g} of its {cand_s * 1e3:.3g} ms a call charged")
    if cpu.outside > OUTSIDE_CPU[1] + OUTSIDE_CPU[0] * cpu.wall_inside:
        why.append(f"{cpu.outside:.3g} s of CPU between commands")
    # work handed to another process of the candidate's while it was timed (the clocks read between
    # commands count the worker process alone): no kernel needs one
    timed = timing.n * sum(c.call for c in timing.cand)
    if cpu.helper_cpu > HELPER_CPU[1] + HELPER_CPU[0] * timed:
        why.append(f"{cpu.helper_cpu:.3g} s of CPU in its other processes while timed")
    if why:
        flag("work_outside_timing")
    if cpu.cpu_inside > 1.25 * cpu.wall_inside + 0.05:
        flag("multithreaded")
    beside, solo_s = typical(ref_calls), typical(solo)
    ref_s = beside if beside <= UNDISTURBED * solo_s else solo_s
    speedup = ref_s / max(cand_s, 1e-12)
    lo, hi = bootstrap(timing, ref_s / beside)
    if speedup > ceiling:
        flag("speedup_above_ceiling")
    score = score_from(True, speedup, lo, flags)
    faster = score > 0.1
    metrics = {
        "correct": 1.0, "speedup": speedup, "ci_low": lo, "ci_high": hi, "ref_ms": ref_s * 1000,
        "cand_ms": cand_s * 1000, "ref_beside_ms": beside * 1000, "ref_solo_ms": solo_s * 1000,
        "charged_ms": charged * 1000, "charged_idle_ms": charged_idle * 1000,
        "waited_ms": waiting(timing.cand, timing.ref)[0] * 1000, "rounds_ms": own * 1000,
        "outside_cpu_ms": cpu.outside * 1000, "helper_cpu_ms": cpu.helper_cpu * 1000,
        "overhead_us": cpu.overhead * 1e6, "batch": float(timing.n), "reps": float(timing.reps),
        "fast_0": float(not flags), "fast_1": float(faster and speedup > 1.0), "fast_2": float(faster and speedup > 2.0),
    }  # fmt: skip
    error = None if score > 0 else f"rejected: {', '.join(flags)}"
    if error and why:
        error += f" ({'; '.join(why)})"
    if error and changed:
        error += f" (changed: {', '.join(changed[:5])})"
    return {"score": score, "metrics": metrics, "flags": flags, "error": error}
