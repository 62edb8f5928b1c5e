"""In-process objects and refs are exactly what git writes, and git takes over where they can't be."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metasearch.archive import objects
from metasearch.archive.plumbing import REPO_CONFIG, env, write_tree

NAMES = st.text(alphabet="ab-._ é~Z0", min_size=1, max_size=5).filter(
    lambda n: n not in {".", "..", ".git", ".gitignore", ".gitattributes"} and not n.endswith(".log")
)
FILES = st.dictionaries(
    st.lists(NAMES, min_size=1, max_size=3).map(tuple),
    st.tuples(st.binary(max_size=64), st.sampled_from(["file", "exec", "link"])),
    max_size=12,
)


def _repo(path: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(path)], check=True, env=env())
    for key, value in REPO_CONFIG.items():
        subprocess.run(["git", "-C", str(path), "config", key, value], check=True, env=env())
    return path


def _git(repo: Path, *args: str, **kw: object) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, **kw
    ).stdout


def _materialise(folder: Path, files: dict[tuple[str, ...], tuple[bytes, str]]) -> None:
    for parts, (data, kind) in sorted(files.items()):
        path = folder.joinpath(*parts)
        if any(
            folder.joinpath(*parts[:i]).is_file() or folder.joinpath(*parts[:i]).is_symlink()
            for i in range(1, len(parts))
        ):
            continue  # a file where a folder would go: skip this one
        if path.exists() or path.is_symlink():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "link":
            os.symlink(data.decode("latin-1").replace("\0", "") or "target", path)
        else:
            path.write_bytes(data)
            path.chmod(0o755 if kind == "exec" else 0o644)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=FILES, own_gitignore=st.booleans())
def test_in_process_trees_equal_gits(
    tmp_path_factory: pytest.TempPathFactory, files, own_gitignore: bool
) -> None:
    base = tmp_path_factory.mktemp("t")
    repo, folder = _repo(base / "repo"), base / "folder"
    folder.mkdir()
    _materialise(folder, files)
    (folder / "cache.pyc").write_bytes(b"\0")  # ignored by both routes
    if own_gitignore:
        (folder / ".gitignore").write_text("*.pyc\n")
    fast = write_tree(repo, folder, in_process=True)
    assert fast == write_tree(repo, folder, in_process=False)
    assert "cache.pyc" not in _git(repo, "ls-tree", "-r", "--name-only", fast)
    fsck = subprocess.run(
        ["git", "-C", str(repo), "fsck", "--strict", "--full"], capture_output=True, text=True
    )
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr


def test_commits_and_refs_equal_gits(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "x.py").write_text("x = 1\n")
    tree = write_tree(repo, tmp_path / "f", in_process=True)
    message = "summary line\n\nAgent-Id: a00001\nJob-Id: j\n"
    dates = {"GIT_AUTHOR_DATE": "@1700000000 +0000", "GIT_COMMITTER_DATE": "@1700000000 +0000"}
    root = _git(repo, "commit-tree", tree, "-m", message, env=env(dates)).strip()
    assert objects.write_commit(repo / ".git", tree, None, message, 1_700_000_000) == root
    child = _git(repo, "commit-tree", tree, "-p", root, "-m", message, env=env(dates)).strip()
    assert objects.write_commit(repo / ".git", tree, root, message, 1_700_000_000) == child
    git_dir = repo / ".git"
    assert objects.create_ref(git_dir, "refs/heads/agents/a00001", child)
    assert not objects.create_ref(git_dir, "refs/heads/agents/a00001", root)  # write-once
    assert _git(repo, "rev-parse", "agents/a00001").strip() == child
    _git(repo, "pack-refs", "--all")  # a packed ref is still seen
    assert not (git_dir / "refs/heads/agents/a00001").exists()
    assert not objects.create_ref(git_dir, "refs/heads/agents/a00001", root)
    assert objects.create_ref(git_dir, "refs/heads/agents/a00001", root, replace=True)
    assert _git(repo, "rev-parse", "agents/a00001").strip() == root
    assert objects.supported(git_dir, "sha1") and not objects.supported(git_dir, "sha256")


def test_git_takes_over_for_nested_repositories_and_attributes_change_no_byte(tmp_path: Path) -> None:
    repo, folder = _repo(tmp_path / "repo"), tmp_path / "f"
    folder.mkdir()
    (folder / ".gitattributes").write_text("*.txt text eol=lf\n")
    (folder / "a.txt").write_bytes(b"one\r\ntwo\r\n")  # kept as it is: the repository unsets ``text``
    tree = write_tree(repo, folder, in_process=True)
    assert tree == write_tree(repo, folder, in_process=False)
    blob = subprocess.run(["git", "-C", str(repo), "cat-file", "blob", f"{tree}:a.txt"], capture_output=True)
    assert blob.stdout == b"one\r\ntwo\r\n"
    assert objects.write_tree(repo / ".git", folder, [b"sub/"], None) is None
