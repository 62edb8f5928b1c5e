"""transfer.unpack on crafted tar streams: what a sandbox hands back is never trusted."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

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
