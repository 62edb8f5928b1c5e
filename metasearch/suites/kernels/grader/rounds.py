"""The judge's timing statistics: rounds as measured, the typical call, the charge for work moved out of
the timed command, and the speedup's bootstrap interval."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

TYPICAL_QUANTILE = 0.2
MAD_SIGMA = 1.4826  # the median absolute deviation of normal noise, in standard deviations
MEDIAN_SE = 1.2533  # a median's standard error over the mean's, for normal noise (sqrt(pi / 2))


@dataclass
class Round:
    """One timed command as the judge saw it: seconds per call, seconds per call of the untimed commands
    around it, the outputs it sent, the inputs as its calls left them (when fetched), seconds per call its
    worker waited in it beyond an empty command's waiting (on a CPU: its round trip less its CPU time),
    and seconds per call it waited in the untimed commands (on a CPU)."""

    call: float
    untimed: float
    outputs: list[Any]
    inputs: list[Any]
    waited: float = 0.0
    untimed_waited: float = 0.0


@dataclass(frozen=True)
class Timing:
    reps: int
    n: int
    ref: list[Round]
    cand: list[Round]


def typical(times: list[float]) -> float:
    """A low quantile: what a call costs when nothing else got in its way. Round trips wait for the
    scheduler now and then, and that waiting only ever adds time."""
    return quantile(times, TYPICAL_QUANTILE)


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))]


def charge(extra: list[float]) -> float:
    """Seconds per call to add to the candidate's time: the median, over pairs of rounds, of what its
    worker spent in the rounds' untimed commands beyond what the reference's worker spent on the very same
    commands (the same inputs, outputs of the same size), as the judge measured them (``Session._round``).
    Work moved out of the timed command is paid for where it was done. Paired by round, because the cost
    of those commands drifts from round to round; each two rounds averaged, because the workers take turns
    first in them (ABBA) and the one that goes second pays more (the other's work left the caches cold);
    the median, because the noise of a difference is symmetric: a low quantile of it would charge a
    fraction of the hidden work, and a kernel cheaper than its inputs could hide most of its work there.

    Less one standard error of that median (from the pairs' own spread): the median of an honest worker's
    differences is noise around zero, and charging its positive half alone would slow every honest kernel
    whose inputs cost more than its calls by a few percent. What goes uncharged is at most the noise of the
    measurement, which no worker can widen without raising the median more: work only ever adds."""
    pairs = [sum(extra[i : i + 2]) / len(extra[i : i + 2]) for i in range(0, len(extra), 2)]
    middle = quantile(pairs, 0.5)
    spread = MAD_SIGMA * quantile([abs(p - middle) for p in pairs], 0.5)
    return max(0.0, middle - MEDIAN_SE * spread / math.sqrt(len(pairs)))


def waiting(cand: list[Round], ref: list[Round]) -> tuple[float, list[float]]:
    """Seconds per call to add for waiting, and each round's excess: how long the candidate's worker
    waited in a timed command beyond what the reference's worker waited per second of its own calls (the
    median over its rounds). A CPU kernel waits only for the scheduler, and as long for either worker per
    second of work, the two taking turns on one core; a worker that waits for work done where its CPU
    clock does not run (a GPU it was not given for this task, another process) pays for that work by
    its wall time. The median over rounds, as for ``charge``, so that the noise of an honest worker's
    waiting is not charged by its positive half."""
    rate = quantile([r.waited / r.call for r in ref], 0.5)
    excess = [c.waited - rate * c.call for c in cand]
    return max(0.0, quantile(excess, 0.5)), excess


def charged_time(cand: list[Round], ref: list[Round]) -> tuple[float, float, float, float]:
    """The candidate's typical seconds per call with what it spent out of sight, the charges for the
    untimed commands' CPU time and their waiting, and the second statistic below: the typical call plus ``charge`` and ``waiting``, or, when higher, the typical
    of each round's call plus that round's own extra and excess waiting. The second holds when the hidden
    work is put into fewer than half the rounds: the medians miss them, and they would make the fastest
    calls. Each round's extra is a noisy difference, so for an honest worker it only spreads the sums and
    lowers their low quantile: the first holds.

    The untimed commands' waiting (on a CPU) is charged like their CPU time, beyond the reference's
    worker's in the same commands: a worker that waits there, as the inputs arrive, for work done where
    its CPU clock does not run (a GPU, a detached process) would otherwise answer the timed command at
    once. Charged apart from the CPU time, whose noise is lower."""
    waited, excess = waiting(cand, ref)
    extra = [c.untimed - r.untimed for c, r in zip(cand, ref, strict=True)]
    idle = [c.untimed_waited - r.untimed_waited for c, r in zip(cand, ref, strict=True)]
    cpu, idle_charge = charge(extra), charge(idle)
    rounds = zip(cand, extra, idle, excess, strict=True)
    own = typical([c.call + e + i + max(0.0, w) for c, e, i, w in rounds])
    return max(typical([c.call for c in cand]) + cpu + idle_charge + waited, own), cpu, idle_charge, own


def bootstrap(timing: Timing, scale: float, draws: int = 1000) -> tuple[float, float]:
    """95% interval of the speedup, resampling pairs of rounds (each round times both workers, in turn
    first and second; the charge is taken again from each sample)."""
    rng = random.Random(1)
    rounds = list(zip(timing.ref, timing.cand, strict=True))
    units = [rounds[i : i + 2] for i in range(0, len(rounds), 2)]
    ratios = []
    for _ in range(draws):
        sample = [pair for unit in rng.choices(units, k=len(units)) for pair in unit]
        cand, _, _, _ = charged_time([c for _, c in sample], [r for r, _ in sample])
        ratios.append(scale * typical([r.call for r, _ in sample]) / max(cand, 1e-12))
    ratios.sort()
    return ratios[int(0.025 * draws)], ratios[int(0.975 * draws) - 1]
