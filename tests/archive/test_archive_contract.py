"""The Archive contract, run against every implementation in conftest.IMPLEMENTATIONS."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metasearch.archive import read_index
from metasearch.errors import ArchiveError
from metasearch.types import Evaluate, Evaluation, Expand


def test_seed_is_a_root_commit_without_caches(make, seed_dir: Path, git) -> None:
    archive = make()
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    files = git(archive.repo, "ls-tree", "-r", "--name-only", seed.commit).split()
    assert sorted(files) == [".gitignore", "agent.toml", "pkg/core.py"]
    assert git(archive.repo, "rev-list", "--parents", "-n1", seed.commit).split() == [seed.commit]
    assert seed.branch == f"agents/{seed.id}" and seed.parent_id is None and seed.is_seed
    assert "__pycache__/" in git(archive.repo, "show", f"{seed.commit}:.gitignore").splitlines()
    message = git(archive.repo, "log", "-1", "--format=%B", seed.commit)
    assert message.splitlines()[0] == "seed s"
    assert f"Agent-Id: {seed.id}" in message and "Job-Id: seed" in message


def test_child_commit_has_parent_commit_and_lineage_shows_in_git(make, seed_dir: Path, git) -> None:
    archive = make()
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    with archive.checkout(seed.id) as ws:
        (ws / "pkg" / "core.py").write_text("VALUE = 2\n")
        (ws / "pkg" / "new.py").write_text("NEW = True\n")
        (ws / "notes.log").write_text("ignored\n")
        (ws / "transcripts").mkdir()
        (ws / "transcripts" / "t.json").write_text("{}")
        diff = archive.workspace_diff(ws)
        child = archive.add_child(seed.id, ws, job_id="j1", meta={"summary": "bump value\nmore words"})
    assert "+VALUE = 2" in diff and "+NEW = True" in diff
    assert "notes.log" not in diff and "transcripts" not in diff
    assert git(archive.repo, "rev-list", "--parents", "-n1", child.commit).split() == [
        child.commit,
        seed.commit,
    ]
    assert child.parent_id == seed.id and child.meta["summary"].startswith("bump value")
    graph = git(archive.repo, "log", "--graph", "--all", "--format=%s")
    assert graph.index("bump value") < graph.index("seed s")  # child above its parent, one line of history
    assert git(archive.repo, "log", "-1", "--format=%s", child.commit).strip() == "bump value"
    files = git(archive.repo, "ls-tree", "-r", "--name-only", child.commit).split()
    assert sorted(files) == [".gitignore", "agent.toml", "pkg/core.py", "pkg/new.py"]  # no .git, logs
    assert not any((archive.root / "work").iterdir())


def test_a_child_commits_the_tree_that_was_judged(make, seed_dir: Path, git, tmp_path: Path) -> None:
    """What the gate judged is what enters the tree: a write to the workspace after ``workspace_change``
    (a process the proposer left behind) is not in the child's commit."""
    archive = make()
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    judged = tmp_path / "judged"
    judged.mkdir()
    with archive.checkout(seed.id) as ws:
        (ws / "pkg" / "core.py").write_text("VALUE = 2\n")
        diff, paths, tree = archive.workspace_change(ws, judged)
        (ws / "pkg" / "core.py").write_text("VALUE = 'late'\n")
        (ws / "late.py").write_text("LATE = True\n")
        child = archive.add_child(seed.id, ws, job_id="j1", tree=tree)
    assert paths == ["pkg/core.py"] and "+VALUE = 2" in diff
    assert (judged / "pkg" / "core.py").read_text() == "VALUE = 2\n"
    assert git(archive.repo, "rev-parse", f"{child.commit}^{{tree}}").strip() == tree
    assert git(archive.repo, "show", f"{child.commit}:pkg/core.py") == "VALUE = 2\n"
    assert "late.py" not in git(archive.repo, "ls-tree", "-r", "--name-only", child.commit).split()


def test_a_workspace_gitignore_is_kept(make, seed_dir: Path, git) -> None:
    archive = make()
    (seed_dir / ".gitignore").write_text("build/\n")
    (seed_dir / "build").mkdir()
    (seed_dir / "build" / "out.bin").write_bytes(b"\1")
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    assert git(archive.repo, "show", f"{seed.commit}:.gitignore") == "build/\n"
    files = git(archive.repo, "ls-tree", "-r", "--name-only", seed.commit).split()
    assert "build/out.bin" not in files and "pkg/core.py" in files


def test_ids_are_sequential_and_readable(make, seed_dir: Path) -> None:
    archive = make()
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    children = [archive.add_child(seed.id, seed_dir, job_id=f"j{i}") for i in range(3)]
    assert [a.id for a in archive.agents()] == ["a00000", "a00001", "a00002", "a00003"]
    assert archive.agents() == [seed, *children]
    assert archive.get("a00002") == children[1]


def test_writes_are_idempotent_by_job_id(make, seed_dir: Path, branches) -> None:
    archive = make()
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    assert archive.add_seed("s", seed_dir, job_id="seed") == seed
    child = archive.add_child(seed.id, seed_dir, job_id="j1")
    (seed_dir / "other.py").write_text("changed\n")
    assert archive.add_child(seed.id, seed_dir, job_id="j1") == child
    ev = Evaluation("e1", seed.id, "t1", 0.5)
    assert archive.record(ev) is True
    assert archive.record(ev) is False
    assert archive.record(Evaluation("e1", child.id, "t2", 1.0)) is False  # same job id, different content
    archive.fail_expansion(Expand(seed.id, job_id="x1"), "empty diff")
    archive.fail_expansion(Expand(seed.id, job_id="x1"), "empty diff")
    index = read_index(archive.root)
    assert len(index.evaluations) == 1 and index.evaluations["e1"].score == 0.5
    assert len(index.failed_expansions) == 1
    assert branches(archive.repo) == [seed.id, child.id]


def test_idempotency_holds_across_instances(impl, make, seed_dir: Path) -> None:
    first = make()
    seed = first.add_seed("s", seed_dir, job_id="seed")
    second = impl.open(first.root)  # opened before the writes below: it must catch up, not duplicate
    child = first.add_child(seed.id, seed_dir, job_id="j1")
    first.record(Evaluation("e1", child.id, "t", 1.0))
    assert second.add_child(seed.id, seed_dir, job_id="j1") == child
    assert second.record(Evaluation("e1", child.id, "t", 1.0)) is False
    assert second.get(child.id) == child
    assert [a.id for a in read_index(first.root).agents.values()] == [seed.id, child.id]


def test_unknown_ids_are_errors_naming_them(make, seed_dir: Path, tmp_path: Path) -> None:
    archive = make()
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    with pytest.raises(ArchiveError, match="a00042"):
        archive.get("a00042")
    with pytest.raises(ArchiveError, match="a00042"):
        archive.add_child("a00042", seed_dir, job_id="j1")
    with pytest.raises(ArchiveError, match="a00042"):
        archive.record(Evaluation("e1", "a00042", "t", 0.0))
    with pytest.raises(ArchiveError, match="a00042"), archive.checkout("a00042"):
        pass
    with pytest.raises(ArchiveError, match="a00042"):
        archive.export("a00042", tmp_path / "nope")
    assert [a.id for a in archive.agents()] == [seed.id] and not archive.index.evaluations


def test_reopen_replays_everything(impl, make, seed_dir: Path) -> None:
    archive = make()
    seed = archive.add_seed("s", seed_dir, job_id="seed", meta={"note": "n"})
    archive.start_job(Evaluate(seed.id, "t1", job_id="e1"))
    archive.record(Evaluation("e1", seed.id, "t1", 1.0, metrics={"acc": 0.9}, flags=("slow",)))
    archive.start_job(Expand(seed.id, job_id="x1"))
    archive.fail_expansion(Expand(seed.id, job_id="x1"), "empty diff", diff="--- a\n")
    archive.add_usage("x1", 120, 0.01)
    archive.add_usage("x1", 30, 0.02)
    archive.finish("budget exhausted")
    reopened = impl.open(archive.root)
    index = reopened.index
    assert index.agents == archive.index.agents and index.agents[seed.id].meta["note"] == "n"
    assert index.evaluations["e1"] == archive.index.evaluations["e1"]
    assert index.evaluations["e1"].flags == ("slow",) and index.evaluations["e1"].metrics == {"acc": 0.9}
    assert index.failed_expansions[0]["reason"] == "empty diff"
    assert (archive.root / index.failed_expansions[0]["diff_path"]).read_text() == "--- a\n"
    assert index.tokens == 150 and index.cost_usd == pytest.approx(0.03)
    assert index.expansions_started == 1 and index.evaluations_started == 1 and not index.open_jobs
    assert index.finished == "budget exhausted" and reopened.study == "s"
    assert (archive.root / "config.yaml").read_text() == "study: {}\n"


def test_checkout_is_cleaned_up_on_error(make, seed_dir: Path, git) -> None:
    archive = make()
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    with pytest.raises(RuntimeError), archive.checkout(seed.id) as ws:
        assert (ws / "agent.toml").exists()
        assert git(ws, "rev-parse", "HEAD").strip() == seed.commit
        raise RuntimeError("boom")
    assert not ws.exists()
    assert git(archive.repo, "worktree", "list").count("\n") == 1  # only the main one
    assert not any((archive.root / "work").iterdir())


def test_export_writes_plain_files(make, seed_dir: Path, tmp_path: Path) -> None:
    archive = make()
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    archive.export(seed.id, tmp_path / "out")
    assert (tmp_path / "out" / "pkg" / "core.py").read_text() == "VALUE = 1\n"
    assert not (tmp_path / "out" / ".git").exists()
    assert not (tmp_path / "out" / "pkg" / "__pycache__").exists()


def test_log_dir_is_per_job_and_created_on_demand(make) -> None:
    archive = make()
    path = archive.log_dir("job-1")
    assert path == archive.root / "logs" / "job-1" and path.is_dir()


def test_create_refuses_an_existing_study(impl, make, seed_dir: Path, tmp_path: Path) -> None:
    archive = make()
    archive.add_seed("s", seed_dir, job_id="seed")
    with pytest.raises(ArchiveError, match="already exists"):
        impl.create(archive.root, study="s", config_text="")
    with pytest.raises(ArchiveError, match="not a study directory"):
        impl.open(tmp_path / "nowhere")
    first = json.loads((archive.root / "journal.jsonl").read_text().splitlines()[0])
    assert first["op"] == "study_created" and first["study"] == "s" and "ts" in first
