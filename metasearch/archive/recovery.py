"""What ``GitArchive.open`` repairs after a crash, and how it tells a dead process from a live one.

A process is named by its owner token ``host:pid:tag``. On this host a dead pid settles it; a process on
another host is judged by its last sign of life in the journal (a lease or a job it started). Worktrees
are removed only when their process is surely gone; jobs also return when their owner is merely silent
for longer than the lease timeout (its results, should it come back, are still accepted once).
"""

from __future__ import annotations

import logging
import socket
import time
from pathlib import Path
from typing import Protocol

from metasearch.archive.index import ArchiveIndex
from metasearch.archive.journal import Journal
from metasearch.archive.plumbing import git, git_ok, pid_alive, prune_worktrees, sweep_temporary
from metasearch.errors import ArchiveError


class Recoverable(Protocol):
    """What repair needs of an archive (``GitArchive`` is one): its folders, journal and index."""

    @property
    def root(self) -> Path: ...
    @property
    def repo(self) -> Path: ...
    @property
    def host(self) -> str: ...
    @property
    def journal(self) -> Journal: ...
    @property
    def index(self) -> ArchiveIndex: ...

    def abandon_job(self, job_id: str, reason: str) -> None: ...


log = logging.getLogger(__name__)


def repair(archive: Recoverable, lease_timeout_s: float) -> None:
    """Make the study consistent again: branches == journaled agents, no leftovers of dead writers,
    no open jobs of dead or silent processes (they are abandoned, so the study queues them again)."""
    now = time.time()
    with archive.journal.locked():
        archive.journal.catch_up()
        for lock in (archive.repo / ".git" / "refs" / "heads" / "agents").rglob("*.lock"):
            lock.unlink(missing_ok=True)  # a branch write cut short; it would block reconciling
        reconcile_branches(archive)
        removed = prune_worktrees(
            archive.repo,
            archive.root / "work",
            lambda folder: _worktrees_dead(archive, folder, now, lease_timeout_s),
        )
        if removed:
            log.warning("%s: removed worktrees of %d dead process(es)", archive.root, len(removed))
        if swept := sweep_temporary(archive.repo / ".git"):
            log.warning("%s: removed %d temporary file(s) of killed writers", archive.root, swept)
    for job_id, job in list(archive.index.open_jobs.items()):
        owner = archive.index.job_owner.get(job_id, "")
        if owner_gone(archive, owner, now, lease_timeout_s):
            log.warning(
                "%s: job %s (%s) was left by %s; returning it to the queue",
                archive.root,
                job_id,
                job.kind,
                owner,
            )
            archive.abandon_job(job_id, "stale lease: the process running it is gone")


def reconcile_branches(archive: Recoverable) -> None:
    """Make the branches agents/* match the journal exactly (call with the lock held).

    A branch without ``agent_added`` is an orphan of a job that crashed before journaling: deleted. A
    journaled agent without its branch gets it back from the recorded commit, or ArchiveError if even
    the commit is gone.
    """
    repo, agents = archive.repo, archive.index.agents
    out = git(repo, "for-each-ref", "--format=%(refname:strip=3) %(objectname)", "refs/heads/agents/")
    refs = dict(line.split(" ", 1) for line in out.splitlines() if line.strip())
    for agent_id, sha in refs.items():
        if agent_id not in agents:
            log.warning(
                "%s: deleting orphan branch agents/%s (its job crashed before journaling it)",
                archive.root,
                agent_id,
            )
            git(repo, "update-ref", "-d", f"refs/heads/agents/{agent_id}", sha)
    for agent_id, agent in agents.items():
        if agent_id in refs:
            continue
        if not git_ok(repo, "cat-file", "-e", f"{agent.commit}^{{commit}}"):
            raise ArchiveError(
                f"{archive.root}: agent {agent_id} is journaled but its commit {agent.commit} is missing"
            )
        log.warning("%s: restoring the missing branch %s", archive.root, agent.branch)
        git(repo, "update-ref", f"refs/heads/{agent.branch}", agent.commit, "")


def owner_gone(archive: Recoverable, owner: str, now: float, lease_timeout_s: float) -> bool:
    """An owner is gone if its pid is dead on this host or it has been silent for too long."""
    return _gone(archive.index, archive.host, owner, now, lease_timeout_s)


def _gone(index: ArchiveIndex, this_host: str, owner: str, now: float, lease_timeout_s: float) -> bool:
    host, _, rest = owner.partition(":")
    pid = rest.split(":")[0]
    if host == this_host and not pid_alive(int(pid) if pid.isdigit() else -1):
        return True
    return now - index.last_seen.get(owner, 0.0) > lease_timeout_s


def live_owner(index: ArchiveIndex, lease_timeout_s: float) -> str | None:
    """A process that holds the study's lease and is alive (its run has not ended), or None."""
    now, host = time.time(), socket.gethostname()
    for owner in index.leases:
        if owner not in index.released and not _gone(index, host, owner, now, lease_timeout_s):
            return owner
    return None


def refuse_if_running(index: ArchiveIndex, root: Path, lease_timeout_s: float) -> None:
    """ArchiveError naming the live process when another run of this study is going on."""
    owner = live_owner(index, lease_timeout_s)
    if owner is None:
        return
    host, _, rest = owner.partition(":")
    raise ArchiveError(
        f"{root}: the study is being run by process {rest.split(':')[0]} on {host}; stop that run first "
        f"(Ctrl-C there), or resume once it has been silent for {lease_timeout_s:g}s"
    )


def _worktrees_dead(archive: Recoverable, folder: str, now: float, lease_timeout_s: float) -> bool:
    """Whether the process owning ``work/<folder>`` (named ``host_pid_tag``) is surely gone."""
    parts = folder.rsplit("_", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return True  # not a process folder: a leftover of an older layout
    host, pid, _ = parts
    if host == archive.host:
        return not pid_alive(int(pid))
    return owner_gone(archive, ":".join(parts), now, lease_timeout_s)
