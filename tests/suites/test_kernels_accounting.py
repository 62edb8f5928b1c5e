"""The judge's CPU accounting reads the candidate's process tree from the kernel: the quick way (each
thread's list of the children it started) must find what the slow way (every process's parent link) finds,
children started by threads other than the main one and grandchildren included."""

from __future__ import annotations

import subprocess
import sys
import time

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
