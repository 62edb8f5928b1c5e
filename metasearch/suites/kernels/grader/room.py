"""Memory in a grading run: whether the candidate's worker had the room an honest solution needs.

The run's memory is sized before the study from estimates (``footprint.py``), which cannot see what a
kernel allocates inside itself (a convolution's unfolded input, say). The reference's worker lives the same
history as the candidate's, so its peak resident memory is what an honest candidate needs. The room the
candidate's worker had is the run's limit less what the judge and the reference's worker hold; both numbers
come from the kernel (``/proc`` and the cgroup), never from candidate code, and what the candidate's own
processes hold (files in ``/tmp`` included) is never counted in its favour. Too little room is the
grader's fault: the judge stops with ``OutOfRoom`` (how much the run needs) before blaming the candidate.
"""

from __future__ import annotations

import os
from pathlib import Path

MIB = 1 << 20
MARGIN = 1.25  # the candidate may hold this much more than the reference's worker at its peak
SLACK = 256 * MIB  # the grading run's own processes and files beside the three Python processes
OOM_FIRST = 1000  # the candidate's worker sets this on itself before it loads the candidate
CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


class OutOfRoom(Exception):
    """The run's memory limit leaves the candidate less room than the reference needs: ``need_mb`` is
    what the run should be given."""

    def __init__(self, message: str, need_mb: int) -> None:
        super().__init__(message)
        self.need_mb = need_mb


def limit_bytes() -> int:
    """The memory this run may use: its cgroup's limit, else the machine's."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in CGROUP_LIMITS:
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            return min(int(text), total)
    return total


def status_bytes(pid: int, field: str) -> int:
    """``VmRSS`` or ``VmHWM`` (peak) of a process, from ``/proc`` (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def check(reference_pid: int, what: str) -> None:
    """Raise ``OutOfRoom`` when the candidate's worker has (or had) less room than the reference's worker
    needed at its peak, with the margin. ``what`` says when, for the message."""
    limit, peak = limit_bytes(), status_bytes(reference_pid, "VmHWM")
    held = status_bytes(os.getpid(), "VmRSS") + status_bytes(reference_pid, "VmRSS") + SLACK
    room, need = limit - held, int(MARGIN * peak)
    if peak and room < need:
        need_mb = -(-(held + need + need // 2) // (512 * MIB)) * 512  # room to spare, in 512 MB steps
        raise OutOfRoom(
            f"{what}, the candidate's worker had {room // MIB} MB of the run's {limit // MIB} MB, less than "
            f"the reference's worker needs ({peak // MIB} MB at its peak, with a {MARGIN:g}x margin): the "
            f"run needs about {need_mb} MB",
            need_mb,
        )


def _oom_settable() -> bool:
    """Whether a process here may raise its own ``oom_score_adj`` (the file opens for writing)."""
    try:
        with open("/proc/self/oom_score_adj", "w"):
            return True
    except OSError:
        return False


OOM_SETTABLE = _oom_settable()


def oom_priority(pid: int) -> int | None:
    """A process's ``oom_score_adj`` (None where the kernel does not say)."""
    try:
        return int(Path(f"/proc/{pid}/oom_score_adj").read_text())
    except (OSError, ValueError):
        return None
