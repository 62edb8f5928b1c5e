"""transfer.unpack on crafted tar streams: what a sandbox hands back is never trusted."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from metasearch.sandboxes import transfer
from metasearch.sandboxes.transfer import (
    ChunkReader,
    copy_nofollow,
    pack,
    replace_contents,
    unpack,
    worktree_tampering,
)


def stream(*members: tuple[str, bytes | str | None, bytes]) -> io.BytesIO:
    """(name, type, data or link target): type REGTYPE/DIRTYPE/SYMTYPE/LNKTYPE/FIFOTYPE."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, kind, payload in members:
            info = tarfile.TarInfo(name)
            info.type = kind  # type: ignore[assignment]
            if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
                info.linkname = payload.decode()
                tar.addfile(info)
            elif kind == tarfile.REGTYPE:
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload))
            else:
                tar.addfile(info)
    buffer.seek(0)
    return buffer


CRAFTED = [
    (
        "absolute",
        [("/etc/cron.d/x", tarfile.REGTYPE, b"x")],
        "refused '/etc/cron.d/x' in /task: not a path inside it",
    ),
    ("dotdot", [("a/../../x", tarfile.REGTYPE, b"x")], "refused 'a/../../x' in /task: not a path inside it"),
    ("absolute_link", [("out", tarfile.SYMTYPE, b"/etc")], "link out of the tree: /task/out -> /etc"),
    (
        "dotdot_link",
        [("d", tarfile.DIRTYPE, b""), ("d/up", tarfile.SYMTYPE, b"../..")],
        "link out of the tree: /task/d/up -> ../..",
    ),
    (
        "link_through_link",
        [("x", tarfile.SYMTYPE, b"."), ("up", tarfile.SYMTYPE, b"x/..")],
        "link out of the tree: /task/up -> x/..",
    ),
    (
        "write_through_link",
        [("d", tarfile.SYMTYPE, b"sub"), ("sub", tarfile.DIRTYPE, b""), ("d/f", tarfile.REGTYPE, b"x")],
        "refused /task/d/f: a parent is not a folder",
    ),
    (
        "hard_link_out",
        [("h", tarfile.LNKTYPE, b"../../etc/passwd")],
        "refused /task/h: a hard link to '../../etc/passwd'",
    ),
    ("fifo", [("p", tarfile.FIFOTYPE, b"")], "refused /task/p: not a regular file, folder or link"),
    ("git", [(".git", tarfile.REGTYPE, b"gitdir: /tmp/evil\n")], "tampered: /task/.git was written"),
    ("too_large", [("big", tarfile.REGTYPE, b"x" * 2000)], "output of /task too large (over 1000 bytes)"),
    ("git_upper", [(".GIT", tarfile.DIRTYPE, b"")], "tampered: /task/.GIT was written"),
    (
        "nested_gitfile",
        [("sub", tarfile.DIRTYPE, b""), ("sub/.git", tarfile.REGTYPE, b"gitdir: /work/main/.git\n")],
        "tampered: a nested .git at /task/sub/.git",
    ),
    (
        "nested_git_link",
        [("sub", tarfile.DIRTYPE, b""), ("sub/.git", tarfile.SYMTYPE, b"../host")],
        "tampered: a nested .git at /task/sub/.git",
    ),
    *[
        (
            f"nested_{label}",
            [
                ("a", tarfile.DIRTYPE, b""),
                ("a/b", tarfile.DIRTYPE, b""),
                (f"a/b/{name}/HEAD", tarfile.REGTYPE, b"x"),
            ],
            f"tampered: a nested .git at /task/a/b/{name}",
        )
        for label, name in (("upper", ".Git"), ("dot", ".git."), ("space", ".git "), ("hfs", ".g\u200cit"))
    ],
    (
        "long_name",
        [("n" * 256, tarfile.REGTYPE, b"x")],
        f"refused {'/task/' + 'n' * 256!r}: a name over 255 bytes",
    ),
]


@pytest.mark.parametrize(
    ("members", "expected"), [(m, e) for _, m, e in CRAFTED], ids=[n for n, _, _ in CRAFTED]
)
def test_crafted_streams_are_refused(tmp_path: Path, members, expected: str) -> None:
    dest = tmp_path / "out"
    dest.mkdir()
    assert unpack(stream(*members), dest, max_bytes=1000, label="/task") == expected
    for path in dest.rglob("*"):
        assert not path.is_symlink() or os.path.realpath(path).startswith(str(dest.resolve()))
    assert not (tmp_path / "x").exists() and not (tmp_path.parent / "x").exists()


def test_inside_links_and_files_round_trip(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "m.py").write_text("x = 1\n")
    (src / "run.sh").write_text("echo hi\n")
    (src / "run.sh").chmod(0o755)
    (src / "alias.py").symlink_to("pkg/m.py")
    (src / ".git").write_text("gitdir: /somewhere\n")
    data = io.BytesIO()
    pack(src, data)
    data.seek(0)
    dest = tmp_path / "dest"
    dest.mkdir()
    assert (
        unpack(
            ChunkReader(iter([data.getvalue()[i : i + 100] for i in range(0, len(data.getvalue()), 100)])),
            dest,
            max_bytes=10_000,
            label="/w",
        )
        is None
    )
    assert sorted(p.name for p in dest.iterdir()) == ["alias.py", "pkg", "run.sh"], ".git never travels"
    assert os.readlink(dest / "alias.py") == "pkg/m.py" and (dest / "run.sh").stat().st_mode & 0o100
    replace_contents(src, dest)
    assert (
        sorted(p.name for p in src.iterdir()) == [".git", "alias.py", "pkg", "run.sh"] and not dest.exists()
    )


def test_worktree_checks_and_log_copies_never_follow(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".git").write_text("gitdir: /repo/.git/worktrees/x\n")
    assert worktree_tampering(ws, b"gitdir: /repo/.git/worktrees/x\n") is None
    (ws / "leak").symlink_to(secret)
    assert (
        worktree_tampering(ws, b"gitdir: /repo/.git/worktrees/x\n")
        == f"link out of the tree: ./leak -> {secret}"
    )
    (ws / ".git").unlink()
    (ws / ".git").symlink_to(secret)
    assert (
        worktree_tampering(ws, b"gitdir: /repo/.git/worktrees/x\n")
        == ".git is no longer the worktree's link file"
    )
    assert copy_nofollow(ws, tmp_path / "kept", max_bytes=100)
    assert list((tmp_path / "kept").iterdir()) == []
    assert not copy_nofollow(ws / "leak", tmp_path / "kept2", max_bytes=100)


def test_a_task_repository_comes_back_but_a_worktree_may_hold_no_other_git(tmp_path: Path) -> None:
    """A ``.git`` folder below the top (code-edit's ``/task/repo``) is kept by unpack; the agent worktree, the
    tree host git reads, may hold no ``.git`` but its own link file, in any spelling, at any depth."""
    members = [("repo", tarfile.DIRTYPE, b""), ("repo/.git", tarfile.DIRTYPE, b"")]
    members.append(("repo/.git/HEAD", tarfile.REGTYPE, b"ref: refs/heads/main\n"))
    dest = tmp_path / "task"
    dest.mkdir()
    assert unpack(stream(*members), dest, max_bytes=1000, label="/task") is None
    assert (dest / "repo" / ".git" / "HEAD").is_file()

    link = b"gitdir: /repo/.git/worktrees/x\n"
    for made in ("sub/.git", "sub/deeper/.GIT", "a/.git.", ".Git", "b/.git "):
        ws = tmp_path / f"ws{len(made)}{made[-1]}"
        (ws / made).parent.mkdir(parents=True, exist_ok=True)
        (ws / ".git").write_text(link.decode())
        (ws / made).write_text("gitdir: /work/main/.git\n")
        assert worktree_tampering(ws, link) == f"nested .git at {made}"
    ws = tmp_path / "wsdir"
    (ws / "sub" / ".git").mkdir(parents=True)
    (ws / ".git").write_bytes(link)
    assert worktree_tampering(ws, link) == "nested .git at sub/.git"
    (ws / "sub" / ".git").rmdir()
    (ws / "sub" / ".gitignore").write_text("*.pyc\n")
    (ws / "sub" / "x.git").write_text("")
    assert worktree_tampering(ws, link) is None


def test_too_many_entries_fail_like_too_many_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sandbox's output of more than MAX_ENTRIES files, folders and links is refused (unpack) or not copied
    to the logs (copy_nofollow), as one over the byte bound is; nothing named ``.git`` is copied either."""
    monkeypatch.setattr(transfer, "MAX_ENTRIES", 20)
    dest = tmp_path / "task"
    dest.mkdir()
    members = [(f"f{i}", tarfile.REGTYPE, b"") for i in range(50)]
    assert unpack(stream(*members), dest, max_bytes=1000, label="/task") == (
        "output of /task has too many entries (over 20)"
    )
    assert len(list(dest.iterdir())) == 20

    out = tmp_path / "output"
    for i in range(5):
        (out / f"d{i}").mkdir(parents=True)
        for j in range(4):
            (out / f"d{i}" / f"f{j}").touch()
    assert not copy_nofollow(out, tmp_path / "logs", max_bytes=1000)
    assert not (tmp_path / "logs").exists()
    for j in range(4):
        (out / "d4" / f"f{j}").unlink()
    (out / "d3" / "f3").unlink()  # 5 folders and 15 files: 20 entries, the most copied
    (out / "d4" / ".git").write_text("gitdir: /work/main/.git\n")
    (out / ".GIT").mkdir()
    (out / ".GIT" / "config").write_text("")
    assert copy_nofollow(out, tmp_path / "logs", max_bytes=1000)
    kept = sorted(str(p.relative_to(tmp_path / "logs")) for p in (tmp_path / "logs").rglob("*"))
    assert len(kept) == 20 and not any(".git" in k.lower() for k in kept)
