"""A writer killed with SIGKILL at random moments leaves an archive that reopens, replays and passes fsck."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from metasearch.archive import GitArchive

# Loops the way a study does: start a job, check out the parent, add the child, record, heartbeat.
# After a restart it redoes the last few jobs with the same ids, which the archive must absorb.
WRITER = r"""
import sys
from pathlib import Path
from metasearch.archive import GitArchive
from metasearch.types import Evaluate, Evaluation, Expand
archive = GitArchive.open(Path(sys.argv[1]), lease_timeout_s=0)
i = max(0, len(archive.index.evaluations) - 3)
while True:
    parent = archive.agents()[i // 2].id
    archive.start_job(Expand(parent, job_id=f"job-{i}"))
    with archive.checkout(parent) as ws:
        (ws / f"f{i}.txt").write_text(str(i))
        child = archive.add_child(parent, ws, job_id=f"job-{i}", meta={"summary": f"child {i}"})
    archive.add_usage(f"job-{i}", 10, 0.001)
    archive.start_job(Evaluate(child.id, "t", job_id=f"ev-{i}"))
    archive.record(Evaluation(f"ev-{i}", child.id, "t", 0.5))
    archive.heartbeat()
    i += 1
"""


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)


def _events(path: Path) -> list[dict]:
    """Every event; a torn last line (the kill can cut the final write) is the only one allowed to fail."""
    lines = path.read_text().splitlines()
    events = [json.loads(line) for line in lines[:-1]]
    with contextlib.suppress(ValueError):
        events.append(json.loads(lines[-1]))
    return events


def test_sigkill_mid_run_leaves_a_consistent_archive(tmp_path: Path) -> None:
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "agent.toml").write_text('name = "s"\n[entry]\nsolve = ["true"]\n')
    root = tmp_path / "study"
    GitArchive.create(root, study="study", config_text="{}\n").add_seed("s", seed, job_id="seed")
    rng = random.Random(0)
    progress = []
    for _ in range(6):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(root)], start_new_session=True)
        time.sleep(rng.uniform(1.2, 3.0))
        os.killpg(proc.pid, signal.SIGKILL)  # the writer and any git child it had running
        proc.wait()
        archive = GitArchive.open(root, lease_timeout_s=0)
        fsck = _git(archive.repo, "fsck", "--full", "--strict")
        assert fsck.returncode == 0 and "garbage" not in fsck.stderr, fsck.stderr
        refs = _git(archive.repo, "for-each-ref", "--format=%(refname:strip=3)", "refs/heads/agents/").stdout
        assert sorted(refs.split()) == sorted(archive.index.agents), "journal agents != branches"
        for agent in archive.agents():  # each branch points at the journaled commit, lineage intact
            assert _git(archive.repo, "rev-parse", agent.branch).stdout.strip() == agent.commit
            parents = _git(archive.repo, "rev-list", "--parents", "-n1", agent.commit).stdout.split()[1:]
            assert parents == ([archive.get(agent.parent_id).commit] if agent.parent_id else [])
        events = _events(root / "journal.jsonl")
        recorded = [e["job_id"] for e in events if e["op"] == "evaluation_recorded"]
        assert len(recorded) == len(set(recorded)), "an evaluation was counted twice"
        added = [e["job_id"] for e in events if e["op"] == "agent_added"]
        assert len(added) == len(set(added)), "a job created two agents"
        assert not archive.index.open_jobs, "jobs of the dead writer must return to the queue"
        assert not any((root / "work").glob("*")), "worktrees of the dead writer must be removed"
        progress.append(len(archive.index.agents))
    assert progress == sorted(progress) and progress[-1] > 6, f"the writers made progress: {progress}"
