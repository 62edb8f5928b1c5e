"""Concurrent writers, threads of one process and separate processes, lose nothing and duplicate nothing."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from metasearch.archive import read_index
from metasearch.types import Evaluation

WRITER = r"""
import sys
from pathlib import Path
from metasearch.archive import GitArchive
from metasearch.types import Evaluation
archive = GitArchive.open(Path(sys.argv[1]))
ws = Path(sys.argv[2])
for i in range(int(sys.argv[3])):
    (ws / "mine.txt").write_text(f"{sys.argv[2]} {i}\n")
    child = archive.add_child("a00000", ws, job_id=f"{ws.name}-{i}")
    archive.record(Evaluation(f"ev-{ws.name}-{i}", child.id, "t", 1.0))
"""


def test_threads_lose_nothing(make, seed_dir: Path, branches) -> None:
    archive = make()
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    errors: list[BaseException] = []

    def work(w: int) -> None:
        try:
            for i in range(6):
                with archive.checkout(seed.id) as ws:
                    (ws / f"f{w}_{i}.txt").write_text("x\n")
                    child = archive.add_child(seed.id, ws, job_id=f"j{w}-{i}")
                archive.record(Evaluation(f"e{w}-{i}", child.id, "t", 1.0))
                archive.add_child(seed.id, seed_dir, job_id=f"j{w}-{i}")  # a retry: no new agent
        except BaseException as exc:  # surfaced below: a thread's exception would be lost otherwise
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    index = read_index(archive.root)
    assert len(index.agents) == 25 and len(index.evaluations) == 24
    assert sorted(index.agents) == [f"a{i:05d}" for i in range(25)]
    assert branches(archive.repo) == sorted(index.agents)
    assert not any((archive.root / "work").iterdir())


def test_processes_lose_nothing(make, seed_dir: Path, tmp_path: Path, branches, git) -> None:
    archive = make()
    archive.add_seed("s", seed_dir, job_id="seed")
    procs = []
    for w in range(3):
        ws = tmp_path / f"ws{w}"
        ws.mkdir()
        cmd = [sys.executable, "-c", WRITER, str(archive.root), str(ws), "8"]
        procs.append(subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True))
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    index = read_index(archive.root)
    assert len(index.agents) == 25 and len(index.evaluations) == 24
    assert branches(archive.repo) == sorted(index.agents) == [f"a{i:05d}" for i in range(25)]
    for agent in list(index.agents.values())[1:]:  # each commit holds exactly what its writer staged
        ws_name, i = agent.meta["job_id"].rsplit("-", 1)
        shown = git(archive.repo, "show", f"{agent.commit}:mine.txt")
        assert shown == f"{tmp_path / ws_name} {i}\n"
    # the first instance was opened before all this and still sees (and refuses to redo) it all
    assert archive.add_child("a00000", seed_dir, job_id="ws0-3").id == index.agent_by_job["ws0-3"]
