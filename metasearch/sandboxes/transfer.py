"""A writable mount's files into and out of a sandbox as tar streams, refusing what could hurt the host.

In, ``pack`` tars a host folder as it is (links as links), its top-level ``.git`` left out: a worktree's
``.git`` names host paths and is none of the sandbox's business. Out, ``unpack`` extracts a stream a
sandbox produced into a fresh folder and trusts nothing in it: names are relative and stay inside; only
regular files, folders and links whose target stays inside are made (as links, never followed); nothing
is written through a link; special files, a ``.git`` at the top, a ``.git`` file or link below it (a
gitfile makes host git open whatever repository it names) or any other spelling of ``.git`` anywhere, more
than ``MAX_ENTRIES`` entries, names over ``MAX_NAME`` bytes and bytes beyond the bound are refused. The
first refusal is returned as the violation; everything else is kept, for the logs.
"""

from __future__ import annotations

import logging
import os
import posixpath
import shutil
import tarfile
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Protocol, cast

log = logging.getLogger(__name__)

KEPT = ".git"
MAX_ENTRIES = 10_000  # files, folders and links one sandbox may hand the host: each costs an inode in logs
MAX_NAME = 255  # bytes in one path component, as most filesystems allow
_CHUNK = 1 << 20
# Code points HFS+ ignores in names, so ".g\u200cit" is ".git" there (git's own list, is_hfs_dotgit).
_IGNORED = dict.fromkeys([*range(0x200C, 0x2010), *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF])


def is_git_name(name: str) -> bool:
    """Whether a path component may name ``.git`` to git on some filesystem: case-folded, without the
    trailing dots and spaces Windows drops, without the code points HFS+ ignores."""
    return name.translate(_IGNORED).rstrip(". ").casefold() == KEPT


def pack(folder: Path, out: IO[bytes]) -> None:
    """Write ``folder``'s content (not ``.git`` at its top) to ``out`` as a tar stream."""
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(os.listdir(folder)):
            if name != KEPT:
                tar.add(os.path.join(folder, name), arcname=name, recursive=True)  # lstat: links stay links


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class ChunkReader:
    """A read-only file over an iterator of byte chunks (a Docker exec's stdout)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._buffer = b""

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._buffer) < size:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            self._buffer += chunk
        if size < 0:
            size = len(self._buffer)
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data

    def drain(self) -> None:
        for _ in self._chunks:
            pass


def unpack(stream: Readable, dest: Path, *, max_bytes: int, label: str) -> str | None:
    """Extract a tar stream into the empty folder ``dest``; return the first violation, or None.

    ``label`` names the folder in messages (``/task``). Never raises for what the stream holds."""
    violations: list[str] = []
    regular: set[str] = set()
    total = entries = 0
    try:
        with tarfile.open(fileobj=cast(IO[bytes], stream), mode="r|") as tar:
            for member in tar:
                name = "" if member.name.startswith("/") else posixpath.normpath(member.name)
                if name == "." and member.isdir():
                    continue
                entries += 1
                if entries > MAX_ENTRIES:  # the rest is left unread: the caller drains the stream
                    violations.append(f"output of {label} has too many entries (over {MAX_ENTRIES})")
                    break
                problem, total = _extract(tar, member, name, dest, label, regular, total, max_bytes)
                if problem:
                    violations.append(problem)
    except (tarfile.TarError, OSError, EOFError) as exc:
        violations.append(f"output of {label} unreadable: {exc}")
    violations.extend(links_out_of(dest, label, remove=True))
    return violations[0] if violations else None


def _extract(
    tar: tarfile.TarFile,
    member: tarfile.TarInfo,
    name: str,
    dest: Path,
    label: str,
    regular: set[str],
    total: int,
    max_bytes: int,
) -> tuple[str | None, int]:
    shown = f"{label}/{name}"
    parts = name.split("/")
    if not name or name == "." or ".." in parts:
        return f"refused {member.name!r} in {label}: not a path inside it", total
    if is_git_name(parts[0]):
        return f"tampered: {label}/{parts[0]} was written", total
    if any(len(os.fsencode(part)) > MAX_NAME for part in parts):
        return f"refused {shown[:300]!r}: a name over {MAX_NAME} bytes", total
    gitlike = _nested_git(parts, member.isdir())
    if gitlike:
        return f"tampered: a nested .git at {label}/{gitlike}", total
    parent = dest
    for part in parts[:-1]:
        parent = parent / part
        if parent.is_symlink() or not parent.is_dir():
            return f"refused {shown}: a parent is not a folder", total
    path = parent / parts[-1]
    if member.isdir():
        if not path.is_dir() or path.is_symlink():
            if os.path.lexists(path):
                return f"refused {shown}: exists and is not a folder", total
            path.mkdir(mode=0o755)
        return None, total
    if os.path.lexists(path):
        return f"refused {shown}: listed twice", total
    if member.issym():
        target = member.linkname
        if posixpath.isabs(target) or _outside(posixpath.join(posixpath.dirname(name), target)):
            return f"link out of the tree: {shown} -> {target}", total
        os.symlink(target, path)
        return None, total
    if member.isreg() or member.islnk():
        source = posixpath.normpath(member.linkname) if member.islnk() else None
        if source is not None and source not in regular:
            return f"refused {shown}: a hard link to {member.linkname!r}", total
        total += member.size
        if total > max_bytes:
            return f"output of {label} too large (over {max_bytes} bytes)", total
        fd = os.open(
            path,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
            0o755 if member.mode & 0o100 else 0o644,
        )
        with os.fdopen(fd, "wb") as out:
            if source is not None:
                with open(dest / source, "rb", opener=_nofollow) as f:
                    shutil.copyfileobj(f, out, _CHUNK)
            else:
                data = tar.extractfile(member)
                if data is not None:
                    shutil.copyfileobj(data, out, _CHUNK)
        regular.add(name)
        return None, total
    return f"refused {shown}: not a regular file, folder or link", total


def _nested_git(parts: list[str], is_dir: bool) -> str | None:
    """The path up to a ``.git`` below the top that host git could read as a repository, or None.

    A ``.git`` file (a gitfile naming any repository) or link is refused, and so is any other spelling of
    it (``.GIT``, ``.git.``). A ``.git`` folder spelt exactly so is kept: a suite's task may hold a
    repository (code-edit's ``/task/repo``), and the agent worktree, the one tree host git reads, is
    checked whole by ``worktree_tampering``."""
    for i, part in enumerate(parts):
        if is_git_name(part) and (part != KEPT or (i == len(parts) - 1 and not is_dir)):
            return "/".join(parts[: i + 1])
    return None


def _outside(relative: str) -> bool:
    normal = posixpath.normpath(relative)
    return normal == ".." or normal.startswith("../")


def links_out_of(folder: Path, label: str, *, remove: bool = False) -> list[str]:
    """Links under ``folder`` that resolve outside it, as violations (removed with ``remove``).

    A link whose target looks inside can still leave through another link (``a -> x/..`` with
    ``x -> .``), so each is resolved on the tree as it is. Resolving reads link names, never file data."""
    found = []
    root = os.path.realpath(folder)
    for parent, dirs, files in os.walk(folder):
        for name in [*dirs, *files]:
            path = os.path.join(parent, name)
            if os.path.islink(path):
                real = os.path.realpath(path)
                if real != root and not real.startswith(root + os.sep):
                    shown = f"{label}/{os.path.relpath(path, folder)}"
                    found.append(f"link out of the tree: {shown} -> {os.readlink(path)}")
                    if remove:
                        os.unlink(path)
    return found


def worktree_tampering(workspace: Path, git_link: bytes) -> str | None:
    """Why a worktree a candidate wrote in may not be read by git or stored, or None: its ``.git`` link is
    not the file it was (``git_link``), another ``.git`` (any spelling, any depth) would make host git
    open the repository it names, or a link in it leads out of it."""
    git = workspace / KEPT
    if git.is_symlink() or not git.is_file():
        return f"{KEPT} is no longer the worktree's link file"
    with open(git, "rb", opener=_nofollow) as f:
        if f.read(len(git_link) + 1) != git_link:
            return f"{KEPT} was rewritten"
    for parent, dirs, files in os.walk(workspace):  # links are listed, never followed
        for name in [*dirs, *files]:
            if is_git_name(name) and not (parent == str(workspace) and name == KEPT):
                return f"nested .git at {os.path.relpath(os.path.join(parent, name), workspace)}"
    escaping = links_out_of(workspace, ".")
    return escaping[0] if escaping else None


def copy_nofollow(source: Path, dest: Path, *, max_bytes: int) -> bool:
    """Copy the regular files and folders under ``source`` to ``dest`` (for the logs), nothing if they
    exceed ``max_bytes`` or ``MAX_ENTRIES`` (logged); links and anything named ``.git`` are left out, links
    are never followed. Returns whether it copied."""
    if source.is_symlink() or not source.exists():
        return False
    if source.is_file():
        pairs, folders = [(source, dest)], []
    else:
        pairs, folders = [], [dest]
        for parent, dirs, files in os.walk(source):
            rel = Path(parent).relative_to(source)
            dirs[:] = [d for d in dirs if not is_git_name(d) and not os.path.islink(os.path.join(parent, d))]
            folders += [dest / rel / d for d in dirs]
            for name in files:
                path = os.path.join(parent, name)
                if not is_git_name(name) and not os.path.islink(path) and os.path.isfile(path):
                    pairs.append((Path(path), dest / rel / name))
            if len(pairs) + len(folders) - 1 > MAX_ENTRIES:  # stop walking: a sandbox can leave millions
                log.warning("not copying %s to the logs: over %d entries", source, MAX_ENTRIES)
                return False
    size = sum(a.lstat().st_size for a, _ in pairs)
    if size > max_bytes:
        log.warning("not copying %s to the logs: %d bytes, over %d", source, size, max_bytes)
        return False
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
    for a, b in pairs:
        with open(a, "rb", opener=_nofollow) as f, open(b, "wb") as out:
            shutil.copyfileobj(f, out, _CHUNK)
    return True


def _nofollow(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW)


def replace_contents(folder: Path, new: Path) -> None:
    """Make ``folder`` hold exactly ``new``'s entries (moved, not copied), keeping its top-level ``.git``;
    ``new`` (on the same filesystem) is removed. Nothing is followed: links are removed as links."""
    for entry in os.scandir(folder):
        if entry.name == KEPT:
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)
    for entry in os.scandir(new):
        os.rename(entry.path, os.path.join(folder, entry.name))
    os.rmdir(new)


def scratch_beside(folder: Path) -> Path:
    """A fresh empty folder next to ``folder`` (same filesystem, so ``replace_contents`` only renames)."""
    return Path(tempfile.mkdtemp(prefix=f".{folder.name}-out-", dir=folder.parent))
