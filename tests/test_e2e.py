"""The main job end to end through the CLI: real git archive, real Docker sandboxes, real Optuna storage.
The quickstart's own small study is checked in test_e2e_journey.py, which browses and promotes it too."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "metasearch.cli"]
SMALL = ["-o", "suite.subset=smoke", "-o", "suite.time_budget_s=5", "-o", "study.workers=2"]

pytestmark = pytest.mark.docker


def cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CLI, *args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def journal(study: Path) -> list[dict]:
    return [
        json.loads(line) for line in (study / "journal.jsonl").read_text().splitlines() if line.endswith("}")
    ]


def check_consistent(study: Path, budget: int) -> dict:
    """The journal, the archive's branches and the budget agree, and no container of the study is left
    (also read by the quickstart study of test_e2e_journey.py)."""
    events = journal(study)
    recorded = [e for e in events if e["op"] == "evaluation_recorded"]
    assert len({e["job_id"] for e in recorded}) == len(recorded), "an evaluation was counted twice"
    pairs = Counter((e["evaluation"]["agent_id"], e["evaluation"]["task_id"]) for e in recorded)
    assert max(pairs.values()) == 1, "an (agent, task) pair was evaluated twice"
    status = json.loads(cli("status", str(study), "--json").stdout)
    assert status["budget"]["evaluations"] == [budget, budget]
    assert status["running"] == 0
    fsck = subprocess.run(
        ["git", "-C", str(study / "repo"), "fsck", "--full"], capture_output=True, text=True
    )
    assert fsck.returncode == 0, fsck.stderr
    refs = subprocess.run(
        [
            "git",
            "-C",
            str(study / "repo"),
            "for-each-ref",
            "--format=%(refname:strip=3)",
            "refs/heads/agents/",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    agents = [e["agent"]["id"] for e in events if e["op"] == "agent_added"]
    assert sorted(refs) == sorted(agents), "journal agents and branches differ"
    leftover = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=metasearch.study={study.name}"],
        capture_output=True,
        text=True,
    )
    assert leftover.stdout.strip() == "", "containers were left behind"
    return status


def test_sigkill_then_resume_until_the_budget_is_spent(docker_sandbox_factory, tmp_path: Path) -> None:
    budget = 10
    args = [
        "configs/quickstart.yaml",
        *SMALL,
        "-o",
        f"budget.evaluations={budget}",
        "-o",
        "sandbox.name=docker",
        "--archive-dir",
        str(tmp_path),
        "--study",
        "crashy",
    ]
    study = tmp_path / "crashy"
    rng = random.Random(1)
    proc = start("run", *args)
    for kill in range(5):
        time.sleep(rng.uniform(4, 12))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        assert (study / "journal.jsonl").exists(), (
            f"kill {kill}: the study never started: {proc.stderr.read() if proc.stderr else ''}"
        )
        proc = start("resume", str(study))
    proc.wait(timeout=600)
    final = cli("resume", str(study))  # a resume after the budget is spent finishes at once
    assert final.returncode == 0, final.stderr[-3000:]
    kills = sum(
        1 for e in journal(study) if e["op"] == "job_abandoned" and e["reason"].startswith("stale lease")
    )
    status = check_consistent(study, budget)
    assert status["finished"].startswith("budget exhausted")
    assert kills >= 1, "at least one kill should have caught jobs in flight"


def test_ctrl_c_stops_gracefully_with_a_summary(docker_sandbox_factory, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            *CLI,
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
            "ctrlc",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(15)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert "finished: interrupted" in out
    events = journal(tmp_path / "ctrlc")
    assert events[-1]["op"] == "study_finished" and events[-1]["reason"] == "interrupted"
    started = {e["job_id"] for e in events if e["op"] == "job_started"}
    closed = {
        e["job_id"]
        for e in events
        if e["op"] in ("evaluation_recorded", "agent_added", "expansion_failed", "job_abandoned")
    }
    assert started <= closed, "in-flight jobs were neither finished nor returned to the queue"
