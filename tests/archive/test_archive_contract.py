"""The Archive contract, run against every implementation (GitArchive today)."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from metasearch.archive import GitArchive, read_index
from metasearch.errors import ArchiveError
from metasearch.types import Evaluate, Evaluation, Expand

IMPLEMENTATIONS: list[Callable[..., GitArchive]] = [GitArchive.create]


@pytest.fixture(params=IMPLEMENTATIONS, ids=lambda f: f.__qualname__.split(".")[0])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[str], GitArchive]:
    def build(name: str = "s") -> GitArchive:
        return request.param(tmp_path / name, study=name, config_text="study: {}\n")

    return build


@pytest.fixture
def seed_dir(tmp_path: Path) -> Path:
    d = tmp_path / "seed-src"
    (d / "pkg").mkdir(parents=True)
    (d / "agent.toml").write_text('name = "s"\n[entry]\nsolve = ["true"]\n')
    (d / "pkg" / "core.py").write_text("VALUE = 1\n")
    (d / "pkg" / "__pycache__").mkdir()
    (d / "pkg" / "__pycache__" / "core.cpython-311.pyc").write_bytes(b"\0junk")
    return d


def git(archive: GitArchive, *args: str) -> str:
    return subprocess.run(["git", "-C", str(archive.repo), *args], capture_output=True, text=True, check=True).stdout


def test_seed_is_a_root_commit_without_caches(make, seed_dir: Path) -> None:
    archive = make()
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    files = git(archive, "ls-tree", "-r", "--name-only", seed.commit).split()
    assert sorted(files) == [".gitignore", "agent.toml", "pkg/core.py"]
    assert git(archive, "rev-list", "--parents", "-n1", seed.commit).split() == [seed.commit]
    assert seed.branch == f"agents/{seed.id}" and seed.parent_id is None


def test_child_commit_has_parent_commit_and_lineage_shows_in_git(make, seed_dir: Path) -> None:
    archive = make()
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    with archive.checkout(seed.id) as ws:
        (ws / "pkg" / "core.py").write_text("VALUE = 2\n")
        (ws / "notes.log").write_text("ignored\n")
        diff = archive.workspace_diff(ws)
        child = archive.add_child(seed.id, ws, job_id="j1", meta={"summary": "bump value"})
    assert "+VALUE = 2" in diff and "notes.log" not in diff
    assert git(archive, "rev-list", "--parents", "-n1", child.commit).split() == [child.commit, seed.commit]
    graph = git(archive, "log", "--graph", "--all", "--oneline")
    assert "bump value" in graph and "seed s" in graph
    assert not (archive.root / "work").exists() or not any((archive.root / "work").iterdir())


def test_writes_are_idempotent_by_job_id(make, seed_dir: Path) -> None:
    archive = make()
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    assert archive.add_seed("s", seed_dir, job_id="seed") == seed
    ev = Evaluation("e1", seed.id, "t1", 0.5)
    assert archive.record(ev) is True
    assert archive.record(ev) is False
    assert len(read_index(archive.root).evaluations) == 1
    assert len(git(archive, "for-each-ref", "refs/heads/agents/").splitlines()) == 1


def test_reopen_replays_everything(make, seed_dir: Path) -> None:
    archive = make()
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    archive.record(Evaluation("e1", seed.id, "t1", 1.0, metrics={"acc": 0.9}, flags=("slow",)))
    archive.fail_expansion(Expand(seed.id, job_id="x1"), "empty diff", diff="--- a\n")
    archive.add_usage("x1", 120, 0.01)
    reopened = GitArchive.open(archive.root)
    assert reopened.index.agents == archive.index.agents
    assert reopened.index.evaluations["e1"].flags == ("slow",)
    assert reopened.index.failed_expansions[0]["reason"] == "empty diff"
    assert (archive.root / reopened.index.failed_expansions[0]["diff_path"]).read_text() == "--- a\n"
    assert reopened.index.tokens == 120


def test_concurrent_writers_lose_nothing(make, seed_dir: Path) -> None:
    archive = make()
    seed = archive.add_seed("s", seed_dir, job_id="seed")

    def work(w: int) -> None:
        for i in range(8):
            with archive.checkout(seed.id) as ws:
                (ws / f"f{w}_{i}.txt").write_text("x\n")
                child = archive.add_child(seed.id, ws, job_id=f"j{w}-{i}")
            archive.record(Evaluation(f"e{w}-{i}", child.id, "t", 1.0))

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    index = read_index(archive.root)
    assert len(index.agents) == 33 and len(index.evaluations) == 32
    assert len(git(archive, "for-each-ref", "refs/heads/agents/").splitlines()) == 33


def test_torn_tail_is_skipped_and_never_glued(make, seed_dir: Path) -> None:
    archive = make()
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    with open(archive.root / "journal.jsonl", "ab") as f:
        f.write(b'{"op":"evaluation_recorded","job_id":"half')
    index = read_index(archive.root)
    assert index.torn_tail and seed.id in index.agents
    reopened = GitArchive.open(archive.root)
    reopened.record(Evaluation("e2", seed.id, "t", 0.0))
    lines = (archive.root / "journal.jsonl").read_text().splitlines()
    assert all(json.loads(line) for line in lines)
    assert "e2" in read_index(archive.root).evaluations


def test_corrupt_middle_line_is_an_error(make, seed_dir: Path) -> None:
    archive = make()
    archive.add_seed("s", seed_dir, job_id="seed")
    path = archive.root / "journal.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], "garbage{", *lines[1:]]) + "\n")
    with pytest.raises(ArchiveError, match="line 2"):
        read_index(archive.root)


def test_orphan_branch_is_removed_and_missing_branch_restored(make, seed_dir: Path) -> None:
    archive = make()
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    git(archive, "update-ref", "refs/heads/agents/a99999", seed.commit)
    git(archive, "update-ref", "-d", f"refs/heads/{seed.branch}")
    reopened = GitArchive.open(archive.root)
    refs = git(reopened, "for-each-ref", "--format=%(refname:short)", "refs/heads/agents/").split()
    assert refs == [seed.branch]


def test_stale_jobs_return_to_the_queue(make, seed_dir: Path) -> None:
    archive = make()
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    archive.start_job(Evaluate(seed.id, "t1", job_id="run-1"))
    # pretend the job belongs to a process that died
    path = archive.root / "journal.jsonl"
    path.write_text(path.read_text().replace(archive.owner, "localhost-gone:999999999:dead"))
    reopened = GitArchive.open(archive.root, lease_timeout_s=0.0)
    assert "run-1" not in reopened.index.open_jobs
    assert any(json.loads(line).get("reason", "").startswith("stale lease") for line in path.read_text().splitlines())


def test_checkout_is_cleaned_up_on_error(make, seed_dir: Path) -> None:
    archive = make()
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    with pytest.raises(RuntimeError), archive.checkout(seed.id) as ws:
        assert (ws / "agent.toml").exists()
        raise RuntimeError("boom")
    assert not ws.exists()
    assert "work/" not in git(archive, "worktree", "list")


def test_export_writes_plain_files(make, seed_dir: Path, tmp_path: Path) -> None:
    archive = make()
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    archive.export(seed.id, tmp_path / "out")
    assert (tmp_path / "out" / "pkg" / "core.py").read_text() == "VALUE = 1\n"
    assert not (tmp_path / "out" / ".git").exists()
    with pytest.raises(ArchiveError, match="no agent"):
        archive.export("a77777", tmp_path / "nope")


def test_create_refuses_an_existing_study(make, seed_dir: Path) -> None:
    archive = make()
    archive.add_seed("s", seed_dir, job_id="seed")
    with pytest.raises(ArchiveError, match="already exists"):
        GitArchive.create(archive.root, study="s", config_text="")
