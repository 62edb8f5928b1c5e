"""Concurrent sandbox runs get cores of their own (the local sandbox and a real Docker engine)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from metasearch.sandboxes.cores import CorePool
from metasearch.sandboxes.local import LocalSandbox
from metasearch.sandboxes.protocol import Limits, RunSpec, Sandbox

HOLD = (
    "import sys, time; from pathlib import Path; from metasearch.sandboxes.cores import CorePool\n"
    "with CorePool([0, 1], lock_dir=Path(sys.argv[1])).acquire(1) as cores:\n"
    "    print(cores, flush=True); time.sleep(60)\n"
)
AFFINITY = "import json, os, time; print(json.dumps(sorted(os.sched_getaffinity(0)))); time.sleep(1.5)"


def test_overlapping_runs_take_the_least_used_cores(tmp_path: Path) -> None:
    pool = CorePool([0, 1, 2], lock_dir=tmp_path)
    with pool.acquire(1) as a, pool.acquire(1) as b, pool.acquire(1.5) as c:
        assert (a, b, c) == ([0], [1], [0, 2])  # the third runs out of free cores and shares the lowest
        with pool.acquire(1) as d:
            assert d == [1]
    with pool.acquire(1) as e, pool.acquire(8) as f:
        assert e == [0] and f == [0, 1, 2]  # all released; more than there are: every core
    with pytest.raises(RuntimeError), pool.acquire(1):
        raise RuntimeError("a run that fails still gives its cores back")
    with pool.acquire(3) as g:
        assert g == [0, 1, 2]


def test_a_core_another_process_holds_is_not_given_out(tmp_path: Path) -> None:
    """Two metasearch processes on one machine (two studies, Ray workers) keep to different cores; a
    process that dies gives its cores back."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "[0]"
        pool = CorePool([0, 1], lock_dir=tmp_path)
        with pool.acquire(1) as a:
            assert a == [1]
            with pool.acquire(1) as b:
                assert b == [0]  # none free on the machine: shares the one this process uses least
    finally:
        holder.kill()
        holder.wait()
    with CorePool([0, 1], lock_dir=tmp_path).acquire(1) as c:
        assert c == [0]


def _concurrent_affinities(sandbox: Sandbox) -> list[list[int]]:
    results: list[str] = ["", ""]

    def run(i: int) -> None:
        result = sandbox.run(
            RunSpec(command=["python3", "-c", AFFINITY], limits=Limits(cpus=1, timeout_s=60))
        )
        assert result.ok, result.stderr
        results[i] = result.stdout.strip()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [json.loads(r) for r in results]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core here")
def test_two_local_runs_at_once_get_different_cores() -> None:
    a, b = _concurrent_affinities(LocalSandbox())
    assert len(a) == len(b) == 1 and a != b, (a, b)


@pytest.mark.docker
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core here")
def test_two_docker_runs_at_once_get_different_cores(docker_sandbox_factory) -> None:  # type: ignore[no-untyped-def]
    a, b = _concurrent_affinities(docker_sandbox_factory())
    assert len(a) == len(b) == 1 and a != b, (a, b)
