"""What a child's files can do to the archive: nothing beyond being refused as that child's failure.

A name git refuses (``.GIT/config``) once went into a child's commit, and every later checkout of it
failed as an archive error: a fault of the host's, which stops the study. A ``.gitattributes`` made git
store, check out or export other bytes than the files held (an encoding it could not convert stopped the
study; ``export-ignore`` left a file out of the promoted agent). A file that is not UTF-8 failed the diff. A diff
rejected for its size was written whole, twice.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from metasearch.archive import GitArchive
from metasearch.archive.git import KEPT_DIFF
from metasearch.errors import SandboxViolation
from metasearch.types import Expand


@pytest.fixture
def archive(tmp_path: Path) -> GitArchive:
    return GitArchive.create(tmp_path / "study", study="s", config_text="study: {}\n")


@pytest.mark.parametrize("in_process", [True, False], ids=["in-process", "git"])
@pytest.mark.parametrize(
    "name", [".GIT/config", ".git /x", ".git./x", "GIT~1/x", "pkg/.Git/y", ".git::$INDEX_ALLOCATION/x"]
)
def test_a_name_git_refuses_is_the_childs_failure(
    archive: GitArchive, seed_dir: Path, name: str, in_process: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(archive, "_in_process", lambda: in_process)
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    with archive.checkout(seed.id) as ws:
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        (ws / name).write_text("[core]\n")
        with pytest.raises(SandboxViolation, match="a path git refuses to check out"):
            archive.workspace_diff(ws)
    with archive.checkout(seed.id) as ws:  # the archive goes on as before
        (ws / "pkg" / "core.py").write_text("VALUE = 2\n")
        child = archive.add_child(seed.id, ws, job_id="c1")
    with archive.checkout(child.id) as ws:
        assert (ws / "pkg" / "core.py").read_text() == "VALUE = 2\n"


@pytest.mark.parametrize("name", [".gitmodules", ".gitattributes", ".GitIgnore", ".mailmap"])
def test_a_link_git_reads_its_rules_from_is_the_childs_failure(
    archive: GitArchive, seed_dir: Path, name: str
) -> None:
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    with archive.checkout(seed.id) as ws:
        (ws / "rules").write_text("[submodule]\n")
        (ws / name).unlink(missing_ok=True)
        os.symlink("rules", ws / name)
        with pytest.raises(SandboxViolation, match="a link git refuses to hold"):
            archive.workspace_diff(ws)


def test_a_childs_gitattributes_change_no_byte_it_holds(
    archive: GitArchive, seed_dir: Path, tmp_path: Path
) -> None:
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    files = {
        ".gitattributes": (
            b"* text eol=crlf\nhonest.py export-ignore\nstamp.txt export-subst ident\n"
            b"wide.txt working-tree-encoding=UTF-16\n"
        ),
        "honest.py": b"def solve():\n    return 1\n",
        "stamp.txt": b"$Format:%H$ $Id$\n",
        "wide.txt": b"\xff\xfe not UTF-16 at all\n",
        "latin.txt": "caf\xe9\n".encode("latin-1"),
    }
    with archive.checkout(seed.id) as ws:
        for rel, data in files.items():
            (ws / rel).write_bytes(data)
        diff = archive.workspace_diff(ws)
        assert "caf\ufffd" in diff and "honest.py" in diff
        child = archive.add_child(seed.id, ws, job_id="c1")
    with archive.checkout(child.id) as ws:
        assert {rel: (ws / rel).read_bytes() for rel in files} == files
    archive.export(child.id, tmp_path / "export")
    assert {rel: (tmp_path / "export" / rel).read_bytes() for rel in files} == files


def test_a_diff_rejected_for_its_size_is_kept_cut(archive: GitArchive, seed_dir: Path) -> None:
    seed = archive.add_seed("s", seed_dir, job_id="seed")
    job = Expand(job_id="x1", parent_id=seed.id)
    archive.fail_expansion(job, "diff too large", "+" * (3 * KEPT_DIFF))
    kept = (archive.log_dir("x1") / "rejected.diff").read_text()
    assert kept.startswith("+" * KEPT_DIFF) and len(kept) < KEPT_DIFF + 100
    assert kept.endswith(f"[cut: the diff has {3 * KEPT_DIFF} characters; the first {KEPT_DIFF} are kept]\n")
