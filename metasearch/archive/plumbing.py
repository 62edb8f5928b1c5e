"""Plain ``git`` subprocesses for the archive, independent of the user's git configuration.

Every call is a fresh ``git -C <repo> ...`` process: nothing persistent to leak, safe from any thread
(GitPython's shared ``Repo`` objects are neither). Identity and config come from the environment so a
user's global or system config can't change what the archive writes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from metasearch.archive import objects
from metasearch.errors import ArchiveError, SandboxViolation

# What every agent commit ignores (written as its .gitignore when it has none, and always applied as
# an exclude file when staging), so logs and caches never enter a tree or a diff.
IGNORED = "__pycache__/\n*.pyc\n.pytest_cache/\n.mypy_cache/\ntranscripts/\n*.log\nlogs/\n.DS_Store\n"

_GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "metasearch",
    "GIT_AUTHOR_EMAIL": "metasearch@localhost",
    "GIT_COMMITTER_NAME": "metasearch",
    "GIT_COMMITTER_EMAIL": "metasearch@localhost",
    "GIT_TERMINAL_PROMPT": "0",
}
# Repository config written by ``init``: no automatic gc (it would block a writer for seconds), durable
# objects and refs, no detached-HEAD advice in worktrees.
REPO_CONFIG = {"gc.auto": "0", "core.fsync": "objects,reference", "advice.detachedHead": "false"}
# The repository's ``info/attributes``, which outrank any ``.gitattributes`` an agent commits: git stores,
# checks out, diffs and exports every file's bytes as they are (no line-ending or encoding conversion, no
# filter, no keyword expansion, nothing left out of an export).
ATTRIBUTES = (
    "* !text !eol !crlf !filter !diff !merge !ident !working-tree-encoding !export-ignore !export-subst "
    "!whitespace\n"
)


def env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    return {**os.environ, **_GIT_ENV, **(extra or {})}


def git(cwd: Path, *args: str, extra_env: Mapping[str, str] | None = None, input: str | None = None) -> str:
    """Run git in ``cwd``; its stdout, or ArchiveError with git's message."""
    result = subprocess.run(
        ["git", "-C", str(cwd), *args],
        capture_output=True,
        text=True,
        env=env(extra_env),
        input=input,
        check=False,
    )
    if result.returncode != 0:
        raise ArchiveError(f"git {' '.join(args[:3])} failed in {cwd}: {result.stderr.strip()[-800:]}")
    return result.stdout


def git_ok(cwd: Path, *args: str) -> bool:
    """Run git in ``cwd`` for its exit status only."""
    result = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, env=env(), check=False)
    return result.returncode == 0


def git_bytes(cwd: Path, *args: str, extra_env: Mapping[str, str] | None = None) -> bytes:
    """Run git in ``cwd``; its raw stdout (e.g. ``git archive``)."""
    result = subprocess.run(
        ["git", "-C", str(cwd), *args], capture_output=True, env=env(extra_env), check=False
    )
    if result.returncode != 0:
        raise ArchiveError(f"git {' '.join(args[:3])} failed in {cwd}: {result.stderr.decode()[-800:]}")
    return result.stdout


def write_tree(repo: Path, folder: Path, *, in_process: bool = False) -> str:
    """Stage ``folder`` in a private index (never the repo's own) and write its tree; return the tree id.

    Ignored: IGNORED (always, as an exclude file) and the folder's own .gitignore files. A folder without
    a top-level .gitignore gets IGNORED as one. With ``in_process`` (see objects.py), git only lists the
    files and the objects are written here (one git process); otherwise git stages and writes them all.
    """
    if not folder.is_dir():
        raise ArchiveError(f"{repo}: cannot store {folder}: not a directory")
    git_dir = repo / ".git"
    excludes = git_dir / "metasearch-excludes"
    if not excludes.exists():  # a study created before the exclude file existed
        _write_atomic(excludes, IGNORED.encode())
    neutral_attributes(git_dir)
    has_gitignore = (folder / ".gitignore").exists()
    tmp_index = git_dir / f"tmp-index-{os.getpid()}-{uuid.uuid4().hex}"
    extra = {"GIT_INDEX_FILE": str(tmp_index), "GIT_WORK_TREE": str(folder)}
    exclude = f"core.excludesFile={excludes}"
    if in_process:
        listed = git_bytes(
            repo, "-c", exclude, "ls-files", "-z", "--others", "--exclude-standard", extra_env=extra
        )
        paths = listed.split(b"\0")[:-1]
        tree = objects.write_tree(git_dir, folder, paths, None if has_gitignore else IGNORED.encode())
        if tree is not None:
            return tree
    try:
        try:
            git(repo, "-c", exclude, "add", "-A", "--", ".", extra_env=extra)
        except ArchiveError as exc:
            if "invalid path" in str(exc):  # a name git refuses to hold (objects.refuse_path)
                raise SandboxViolation(f"a path git refuses to check out: {exc}") from exc
            raise
        if not has_gitignore:
            blob = git(repo, "hash-object", "-w", "--stdin", input=IGNORED).strip()
            git(repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},.gitignore", extra_env=extra)
        return git(repo, "write-tree", extra_env=extra).strip()
    finally:
        tmp_index.unlink(missing_ok=True)


def neutral_attributes(git_dir: Path) -> None:
    """Write ``ATTRIBUTES`` as the repository's ``info/attributes`` unless it is there already."""
    path = git_dir / "info" / "attributes"
    if not path.is_file() or path.read_text() != ATTRIBUTES:
        path.parent.mkdir(exist_ok=True)
        _write_atomic(path, ATTRIBUTES.encode())


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def object_format(repo: Path) -> str:
    return git(repo, "rev-parse", "--show-object-format").strip()


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


def sweep_temporary(git_dir: Path, *, max_age_s: float = 3600.0) -> int:
    """Delete temporary files writers killed mid-write left behind; return how many.

    Ours carry their pid (``objects/xx/tmp_obj_ms<pid>-<rand>``, ``tmp-index-<pid>-<rand>``) and go when
    it is dead; git's own (``tmp_obj_XXXXXX``) go once older than ``max_age_s``, as ``git gc`` would.
    Objects are written outside the archive's lock, so a live writer's files must be left alone.
    """
    now, removed = time.time(), 0
    for path in [*git_dir.glob("objects/??/tmp_obj_*"), *git_dir.glob("tmp-index-*")]:
        ours = _OUR_TEMPORARY.match(path.name)
        try:
            if (not pid_alive(int(ours[1]))) if ours else now - path.stat().st_mtime > max_age_s:
                path.unlink()
                removed += 1
        except FileNotFoundError:  # its writer finished meanwhile
            continue
    return removed


_OUR_TEMPORARY = re.compile(r"^(?:tmp_obj_ms|tmp-index-)(\d+)-")


def prune_worktrees(repo: Path, work: Path, dead: Callable[[str], bool]) -> list[str]:
    """Remove worktrees of dead processes; return the names of the per-process folders removed.

    ``work/<owner folder>/<worktree>`` holds each process's checkouts; ``dead(folder name)`` says whether
    its process is gone. Then git's administrative entries whose worktree no longer exists are dropped
    directly: ``git worktree prune`` alone keeps an entry a crash left locked ("initializing"). Call with
    the archive's lock held, so no worktree is being added meanwhile.
    """
    removed = []
    if work.is_dir():
        for folder in work.iterdir():
            if not folder.is_dir():
                folder.unlink()
            elif dead(folder.name):
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder.name)
    admin = repo / ".git" / "worktrees"
    if admin.is_dir():
        for entry in admin.iterdir():
            gitdir = entry / "gitdir"
            target = (entry / gitdir.read_text().strip()).parent if gitdir.is_file() else None
            if target is None or not target.exists():  # (an absolute gitdir path replaces `entry`)
                shutil.rmtree(entry, ignore_errors=True)
    git(repo, "worktree", "prune")
    return removed
