"""The judge's CPU accounting reads the candidate's process tree from the kernel: the quick way (each
thread's list of the children it started) must find what the slow way (every process's parent link) finds,
children started by threads other than the main one and grandchildren included."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from metasearch.suites.kernels import TASKS_DIR

GRADER = TASKS_DIR.parent / "grader"

# A process whose second thread starts a child, which starts a grandchild; all sleep until killed.
TREE = """
import subprocess, sys, threading, time
def start():
    subprocess.Popen([sys.executable, "-c",
        "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"])
    time.sleep(60)  # the thread lives on: its child stays listed as its own, not the main thread's
threading.Thread(target=start).start()
time.sleep(60)
"""


@pytest.fixture
def workers(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.syspath_prepend(str(GRADER))
    import workers as module

    return module


def test_the_process_tree_from_child_lists_matches_the_parent_links(workers) -> None:  # type: ignore[no-untyped-def]
    if not workers.CHILDREN_LISTED:
        pytest.skip("this kernel does not list each thread's children")
    root = subprocess.Popen([sys.executable, "-c", TREE])
    try:
        deadline = time.monotonic() + 30
        while len(workers._descendants_by_parent(root.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        found = workers._descendants(root.pid)
        assert len(found) == 3 and found == workers._descendants_by_parent(root.pid)
        assert workers._tree_cpu(root.pid) >= workers.process_cpu(root.pid) > 0
    finally:
        for pid in workers._descendants_by_parent(root.pid) - {root.pid}:
            subprocess.run(["kill", "-9", str(pid)], check=False)
        root.kill()
        root.wait()


# Busy for 0.6 s of wall time, then says so and sleeps until killed.
READY = """
import sys, time
end = time.monotonic() + 0.6
while time.monotonic() < end: pass
print("done", flush=True)
time.sleep(60)
"""


def test_the_run_queue_delay_is_what_a_ready_process_waits_not_what_a_sleeping_one_does(workers) -> None:  # type: ignore[no-untyped-def]
    """The judge takes a command's run-queue delay out of the waiting it charges (a busy machine is not
    hidden work): a process kept from its CPU by others piles it up, a process that sleeps does not."""
    if not Path("/proc/self/schedstat").exists():
        pytest.skip("this kernel keeps no scheduler statistics")
    cpu = str(min(os.sched_getaffinity(0)))
    pinned = ["taskset", "-c", cpu, sys.executable, "-c"]
    spin = "import time\nend = time.monotonic() + 3\nwhile time.monotonic() < end: pass"
    rivals = [subprocess.Popen([*pinned, spin]) for _ in range(2)]
    asleep = "import time; print('asleep', flush=True); time.sleep(60)"
    sleeper = subprocess.Popen([*pinned, asleep], stdout=subprocess.PIPE, text=True)
    ready = None
    try:
        assert sleeper.stdout is not None and sleeper.stdout.readline() == "asleep\n"
        before = workers.run_delay(sleeper.pid)  # its start-up waited too
        ready = subprocess.Popen([*pinned, READY], stdout=subprocess.PIPE, text=True)
        assert ready.stdout is not None and ready.stdout.readline() == "done\n"
        waited, slept = workers.run_delay(ready.pid), workers.run_delay(sleeper.pid) - before
        ran = workers.process_cpu(ready.pid)
    finally:
        for proc in [*rivals, sleeper, *([ready] if ready else [])]:
            proc.kill()
            proc.wait()
    # sharing one CPU with two spinning rivals, the ready one ran about a third of its 0.6 s
    assert ran < waited < 2.0 and slept < 0.01, (ran, waited, slept)
    assert workers.run_delay() >= 0.0 and workers.run_delay(2**22 + 1) == 0.0  # no such process: 0
