"""Reopening repairs what a crash left, and never what a live process is still using."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from metasearch.archive import read_index
from metasearch.errors import ArchiveError
from metasearch.types import Evaluate, Evaluation

# A process that starts a job and dies without closing it (its worktree stays on disk too).
DIES_MID_JOB = r"""
import os, sys
from pathlib import Path
from metasearch.archive import GitArchive
from metasearch.types import Evaluate
archive = GitArchive.open(Path(sys.argv[1]))
archive.heartbeat()
archive.start_job(Evaluate("a00000", "t1", job_id="orphaned-job"))
checkout = archive.checkout("a00000")
print(checkout.__enter__(), flush=True)
os._exit(0)  # no cleanup: as if killed
"""


def test_torn_tail_is_skipped_and_never_glued(impl, make, seed_dir: Path) -> None:
    archive = make()
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    with open(archive.root / "journal.jsonl", "ab") as f:
        f.write(b'{"op":"evaluation_recorded","job_id":"half')
    index = read_index(archive.root)
    assert index.torn_tail and seed.id in index.agents
    reopened = impl.open(archive.root)
    assert reopened.record(Evaluation("e2", seed.id, "t", 0.0))
    lines = (archive.root / "journal.jsonl").read_text().splitlines()
    assert all(json.loads(line)["op"] for line in lines)
    index = read_index(archive.root)
    assert "e2" in index.evaluations and not index.torn_tail


def test_torn_tail_written_by_another_process_is_cut_by_a_live_writer(make, seed_dir: Path) -> None:
    archive = make()
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    with open(archive.root / "journal.jsonl", "ab") as f:  # another writer died mid-line just now
        f.write(b'{"op":"usage","job_id":"x","tok')
    archive.add_usage("y", 5, 0.0)  # this live instance's next append must not glue onto the torn bytes
    archive.record(Evaluation("e1", seed.id, "t", 1.0))
    index = read_index(archive.root)
    assert index.tokens == 5 and "e1" in index.evaluations and not index.torn_tail


def test_corrupt_middle_line_is_an_error(impl, make, seed_dir: Path) -> None:
    archive = make()
    archive.add_seed("s", seed_dir, job_id="seed")
    path = archive.root / "journal.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], "garbage{", *lines[1:]]) + "\n")
    with pytest.raises(ArchiveError, match="line 2"):
        read_index(archive.root)
    with pytest.raises(ArchiveError, match="journal is corrupt"):
        impl.open(archive.root)


def test_orphan_branch_is_removed_and_missing_branch_restored(
    impl, make, seed_dir: Path, git, branches
) -> None:
    archive = make()
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    git(archive.repo, "update-ref", "refs/heads/agents/a99999", seed.commit)
    git(archive.repo, "update-ref", "-d", f"refs/heads/{seed.branch}")
    impl.open(archive.root, readonly=True)  # inspection repairs nothing
    assert branches(archive.repo) == ["a99999"]
    reopened = impl.open(archive.root)
    assert branches(reopened.repo) == [seed.id] == list(reopened.index.agents)


def test_a_journaled_agent_without_its_commit_is_an_error(impl, make, seed_dir: Path, git) -> None:
    archive = make()
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    git(archive.repo, "update-ref", "-d", f"refs/heads/{seed.branch}")
    path = archive.root / "journal.jsonl"
    path.write_text(path.read_text().replace(seed.commit, "1" * 40))
    with pytest.raises(ArchiveError, match=f"agent {seed.id} .* missing"):
        impl.open(archive.root)


def test_an_unjournaled_branch_at_the_next_id_is_replaced(make, seed_dir: Path, git) -> None:
    # A writer that crashed between update-ref and its journal line left agents/a00001 behind; a live
    # writer that has not reopened since must still be able to add a00001.
    archive = make()
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    git(archive.repo, "update-ref", "refs/heads/agents/a00001", seed.commit)
    child = archive.add_child(seed.id, seed_dir, job_id="j1", meta={"summary": "real child"})
    assert child.id == "a00001" and child.commit != seed.commit
    assert git(archive.repo, "rev-parse", "agents/a00001").strip() == child.commit


def test_jobs_of_a_dead_process_return_and_its_worktrees_go(impl, make, seed_dir: Path, git) -> None:
    archive = make()
    archive.add_seed("s", seed_dir, job_id="seed")
    out = subprocess.run(
        [sys.executable, "-c", DIES_MID_JOB, str(archive.root)], capture_output=True, text=True, check=True
    )
    left = Path(out.stdout.strip())
    assert left.is_dir() and "orphaned-job" in read_index(archive.root).open_jobs
    for entry in (archive.repo / ".git" / "worktrees").iterdir():  # as a kill inside `worktree add` leaves it
        (entry / "locked").write_text("initializing")
    reopened = impl.open(archive.root, lease_timeout_s=3600)  # its lease is fresh, but its pid is gone
    assert "orphaned-job" not in reopened.index.open_jobs
    assert not left.exists() and not any((archive.root / "work").iterdir())
    assert str(left) not in git(archive.repo, "worktree", "list")
    assert not any((archive.repo / ".git" / "worktrees").glob("*"))
    reasons = [
        json.loads(x).get("reason", "") for x in (archive.root / "journal.jsonl").read_text().splitlines()
    ]
    assert any(r.startswith("stale lease") for r in reasons)


def test_jobs_of_a_silent_remote_process_return(impl, make, seed_dir: Path) -> None:
    archive = make()
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    archive.start_job(Evaluate(seed.id, "t1", job_id="run-1"))
    path = archive.root / "journal.jsonl"  # pretend the job belongs to a process on another machine
    path.write_text(path.read_text().replace(archive.owner, "elsewhere:4242:cafe0000"))
    assert "run-1" in impl.open(archive.root, lease_timeout_s=3600).index.open_jobs  # not silent for long yet
    assert "run-1" not in impl.open(archive.root, lease_timeout_s=0.0).index.open_jobs


def test_a_live_process_keeps_its_jobs_and_worktrees(impl, make, seed_dir: Path) -> None:
    archive = make()
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    archive.heartbeat()
    archive.start_job(Evaluate(seed.id, "t1", job_id="run-1"))
    with archive.checkout(seed.id) as ws:
        (ws / "pkg" / "core.py").write_text("VALUE = 3\n")
        other = impl.open(archive.root)  # e.g. a mistaken `resume` while this run is live
        assert "run-1" in other.index.open_jobs
        assert (ws / "pkg" / "core.py").read_text() == "VALUE = 3\n"
        child = archive.add_child(seed.id, ws, job_id="j1")
    assert archive.record(Evaluation("run-1", child.id, "t1", 1.0))
    assert not read_index(archive.root).open_jobs


def test_temporary_files_of_killed_writers_are_swept(impl, make, seed_dir: Path) -> None:
    archive = make()
    archive.add_seed("s", seed_dir, job_id="seed")
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead_pid = int(dead.stdout)
    objects_dir = archive.repo / ".git" / "objects" / "ab"
    objects_dir.mkdir(exist_ok=True)
    stale = [objects_dir / f"tmp_obj_ms{dead_pid}-00ff", archive.repo / ".git" / f"tmp-index-{dead_pid}-x"]
    live = [
        objects_dir / f"tmp_obj_ms{os.getpid()}-00ff",
        objects_dir / "tmp_obj_Xy12Zq",
    ]  # ours; git's, fresh
    old_git = objects_dir / "tmp_obj_Ab34Cd"
    for path in [*stale, *live, old_git]:
        path.write_bytes(b"partial")
    os.utime(old_git, (1, 1))
    impl.open(archive.root)
    assert not any(p.exists() for p in [*stale, old_git]) and all(p.exists() for p in live)
