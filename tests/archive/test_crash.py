"""A writer killed with SIGKILL mid-run leaves an archive that reopens, replays and passes git fsck."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from metasearch.archive import GitArchive

WRITER = r"""
import sys
from pathlib import Path
from metasearch.archive import GitArchive
from metasearch.types import Evaluation
archive = GitArchive.open(Path(sys.argv[1]), lease_timeout_s=0)
start = len(archive.index.agents)
i = 0
while True:
    parent = archive.agents()[(start + i) % len(archive.index.agents)]
    with archive.checkout(parent.id) as ws:
        (ws / f"f{start + i}.txt").write_text(str(i))
        child = archive.add_child(parent.id, ws, job_id=f"job-{start + i}")
    archive.record(Evaluation(f"ev-{start + i}", child.id, "t", 0.5))
    archive.heartbeat()
    i += 1
"""


def test_sigkill_mid_run_leaves_a_consistent_archive(tmp_path: Path) -> None:
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "agent.toml").write_text('name = "s"\n[entry]\nsolve = ["true"]\n')
    root = tmp_path / "study"
    GitArchive.create(root, study="study", config_text="{}\n").add_seed("s", seed, job_id="seed")
    rng = random.Random(0)
    for _ in range(6):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(root)], start_new_session=True)
        time.sleep(rng.uniform(1.0, 2.5))
        os.killpg(proc.pid, signal.SIGKILL)  # the writer and any git child it had running
        proc.wait()
        archive = GitArchive.open(root, lease_timeout_s=0)
        fsck = subprocess.run(["git", "-C", str(archive.repo), "fsck", "--full", "--strict"], capture_output=True, text=True)
        assert fsck.returncode == 0, fsck.stderr
        refs = subprocess.run(
            ["git", "-C", str(archive.repo), "for-each-ref", "--format=%(refname:strip=3)", "refs/heads/agents/"],
            capture_output=True, text=True, check=True,
        ).stdout.split()
        assert sorted(refs) == sorted(archive.index.agents)
        events = [json.loads(line) for line in (root / "journal.jsonl").read_text().splitlines() if line.strip().endswith("}")]
        recorded = [e["job_id"] for e in events if e["op"] == "evaluation_recorded"]
        assert len(recorded) == len(set(recorded)), "an evaluation was counted twice"
        assert not (root / "work").exists() or not any((root / "work").iterdir())
    assert len(archive.index.agents) > 6, "the writer made progress between kills"
