"""Writing git objects and a branch in-process: adding an agent with one git process instead of five.

Each git process costs 5-15 ms here, most of an add. Git stays in charge of what is subtle, deciding
which files belong to the tree (``git ls-files --others --exclude-standard``: every ignore rule), and
this module writes what is simple: blobs, trees and the commit as loose objects (temporary file, fsync,
rename; as git does with ``core.fsync=objects``) and the branch as a ref file via ``<ref>.lock``. The
ids are exactly git's (tests compare them with ``git write-tree`` and ``git commit-tree``).

Only for the classic repository layout (``supported``: SHA-1 objects, files ref backend), and only for
plain folders: ``write_tree`` returns None for anything git must handle itself (nested repositories,
special files), and callers then fall back to git. A tree's own ``.gitattributes`` changes nothing here or
in git: the repository's ``info/attributes`` (``plumbing.ATTRIBUTES``) unsets every attribute that would
make git store, check out or export other bytes than the files hold.
"""

from __future__ import annotations

import hashlib
import os
import stat
import zlib
from pathlib import Path
from typing import Union

from metasearch.errors import SandboxViolation

IDENTITY = "metasearch <metasearch@localhost>"
# what git refuses to hold as a link (it reads them from the tree: a link would lead it elsewhere)
NO_LINKS = frozenset({b".gitmodules", b".gitattributes", b".gitignore", b".mailmap"})


def supported(git_dir: Path, object_format: str) -> bool:
    """Whether ``write_commit``/``create_ref`` may be used on this repository."""
    return object_format == "sha1" and not (git_dir / "reftable").exists()


def commit_bytes(tree: str, parent: str | None, message: str, when: int) -> bytes:
    """The commit object's content (without the git header), as ``git commit-tree`` formats it."""
    stamp = f"{IDENTITY} {when} +0000"
    lines = [
        f"tree {tree}",
        *([f"parent {parent}"] if parent else []),
        f"author {stamp}",
        f"committer {stamp}",
    ]
    text = "\n".join(lines) + "\n\n" + message.rstrip("\n") + "\n"
    return text.encode()


def write_object(git_dir: Path, kind: bytes, data: bytes) -> str:
    """Store one object as a durable loose object (unless present) and return its id."""
    raw = b"%s %d\0" % (kind, len(data)) + data
    sha = hashlib.sha1(raw).hexdigest()
    folder = git_dir / "objects" / sha[:2]
    path = folder / sha[2:]
    if path.exists():  # (an object that only exists packed is written again loose: harmless)
        return sha
    folder.mkdir(exist_ok=True)
    tmp = folder / f"tmp_obj_ms{os.getpid()}-{os.urandom(6).hex()}"  # see plumbing.sweep_temporary
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
    try:
        os.write(fd, zlib.compress(raw))
        os.fsync(fd)  # durable before the journal line that will name it
    finally:
        os.close(fd)
    os.replace(tmp, path)  # same content under the same name: a race with another writer is harmless
    return sha


def write_commit(git_dir: Path, tree: str, parent: str | None, message: str, when: int) -> str:
    """Write a commit object and return its id."""
    return write_object(git_dir, b"commit", commit_bytes(tree, parent, message, when))


_Tree = dict[bytes, Union["_Tree", tuple[bytes, str]]]  # name -> subtree, or (mode, blob id)


def write_tree(git_dir: Path, folder: Path, paths: list[bytes], gitignore: bytes | None) -> str | None:
    """Write the tree of ``paths`` (relative to ``folder``, as ``git ls-files -z`` lists them) and return
    its id, adding ``gitignore`` as .gitignore when given; None when git must do it instead."""
    root: _Tree = {}
    base = os.fsencode(folder)
    for rel in paths:
        parts = rel.split(b"/")
        if rel.endswith(b"/"):  # a nested repository
            return None
        refuse_path(parts)
        full = os.path.join(base, rel)
        st = os.lstat(full)
        if stat.S_ISLNK(st.st_mode):
            if _folded(parts[-1]) in NO_LINKS:
                raise SandboxViolation(f"a link git refuses to hold: {os.fsdecode(rel)}")
            mode, data = b"120000", os.readlink(full)
        elif stat.S_ISREG(st.st_mode):
            mode = b"100755" if st.st_mode & stat.S_IXUSR else b"100644"
            with open(full, "rb") as f:
                data = f.read()
        else:
            return None
        node = root
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                return None
            node = child
        node[parts[-1]] = (mode, write_object(git_dir, b"blob", data))
    if gitignore is not None and b".gitignore" not in root:
        root[b".gitignore"] = (b"100644", write_object(git_dir, b"blob", gitignore))
    return _write_tree_node(git_dir, root)


def refuse_path(parts: list[bytes]) -> None:
    """SandboxViolation for a path git would refuse to check out (``invalid path``): a part that names
    git's own folder as another file system would read it (``.GIT``, ``.git.``, ``.git::$INDEX_ALLOCATION``,
    ``git~1``). Written into a tree, such a path fails every later checkout of it."""
    for part in parts:
        folded = _folded(part)
        if folded == b".git" or folded == b"git~1" or folded.startswith(b".git:"):
            raise SandboxViolation(f"a path git refuses to check out: {os.fsdecode(b'/'.join(parts))}")


def _folded(part: bytes) -> bytes:
    """A path part as a case-insensitive file system that drops trailing dots and spaces reads it."""
    return part.lower().rstrip(b" .")


def _write_tree_node(git_dir: Path, node: _Tree) -> str:
    entries = []
    for name, value in node.items():
        if isinstance(value, dict):  # git orders a subtree as if its name ended with "/"
            entries.append((name + b"/", b"40000", name, _write_tree_node(git_dir, value)))
        else:
            entries.append((name, value[0], name, value[1]))
    entries.sort()
    body = b"".join(mode + b" " + name + b"\0" + bytes.fromhex(sha) for _, mode, name, sha in entries)
    return write_object(git_dir, b"tree", body)


def create_ref(git_dir: Path, ref: str, sha: str, *, replace: bool = False) -> bool:
    """Point ``ref`` (e.g. ``refs/heads/agents/a00001``) at ``sha``; False if it exists and not ``replace``.

    Callers hold the archive's lock, so no other writer touches agents/* refs meanwhile; git's own
    ``<ref>.lock`` protocol still keeps a concurrent git command (a user's) from seeing a half-written
    ref. Not fsynced: a ref lost to a power cut is restored from the journal on open.
    """
    path = git_dir / ref
    if not replace and (path.exists() or _packed(git_dir, ref)):
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_name(path.name + ".lock")
    lock.unlink(missing_ok=True)  # under the archive's lock, a leftover lock file is a crashed writer's
    fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, f"{sha}\n".encode())
    finally:
        os.close(fd)
    os.replace(lock, path)
    return True


def _packed(git_dir: Path, ref: str) -> bool:
    packed = git_dir / "packed-refs"
    return packed.exists() and f" {ref}\n" in packed.read_text()
