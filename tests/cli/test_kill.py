"""Containers never outlive their study: after ``kill -9`` of a running ``metasearch run`` with Docker
sandboxes, none of its containers is left running (each holder exits when the run's attach connection
closes, and the engine removes the container)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["-o", "suite.subset=smoke", "-o", "suite.time_budget_s=5", "-o", "study.workers=2"]

pytestmark = pytest.mark.docker


def study_id(study: Path) -> str | None:
    try:
        lines = (study / "journal.jsonl").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.endswith("}") and (event := json.loads(line))["op"] == "study_created":
            return str(event["study_id"])
    return None


def containers(label: str, *, all_: bool = False) -> list[str]:
    args = ["docker", "ps", "-q", *(["-a"] if all_ else []), "--filter", f"label=metasearch.study_id={label}"]
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout.split()


def test_kill_9_leaves_no_container_running(docker_sandbox_factory, tmp_path: Path) -> None:
    study = tmp_path / "killed"
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "metasearch.cli",
            "run",
            "configs/quickstart.yaml",
            *SMALL,
            "-o",
            "budget.evaluations=200",
            "-o",
            "sandbox.name=docker",
            "--archive-dir",
            str(tmp_path),
            "--study",
            "killed",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline, running, sid = time.monotonic() + 300, [], None
        while time.monotonic() < deadline and not running:
            assert run.poll() is None, "the run ended before a sandbox container started"
            sid = sid or study_id(study)
            running = containers(sid) if sid else []
            time.sleep(0.2)
        assert sid and running, "no sandbox container of the study started within 300 s"
        os.kill(run.pid, signal.SIGKILL)  # `kill -9 PID`: no handler, no finally, no clean-up code runs
        run.wait(30)
        killed_at = time.monotonic()
        while containers(sid) and time.monotonic() < killed_at + 60:
            time.sleep(0.5)
        assert containers(sid) == [], "a container of the killed study still runs 60 s later"
        print(
            f"{len(running)} container(s) running at the kill; none {time.monotonic() - killed_at:.1f} s later"
        )
        while containers(sid, all_=True) and time.monotonic() < killed_at + 60:
            time.sleep(0.5)
        assert containers(sid, all_=True) == [], "a stopped container of the killed study was not removed"
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
        if sid:
            leftover = containers(sid, all_=True)
            if leftover:
                subprocess.run(["docker", "rm", "-f", *leftover], capture_output=True)
