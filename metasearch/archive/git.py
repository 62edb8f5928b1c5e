"""GitArchive: agent code in git, facts in the journal.

Layout of a study directory::

    <root>/repo/           git repository; agent <id> is the commit at branch agents/<id>
    <root>/journal.jsonl   the facts (see journal.py); the commit point of every write
    <root>/config.yaml     the resolved configuration, frozen at creation
    <root>/logs/<job id>/  per-job logs, diffs, artifacts
    <root>/work/           disposable worktrees of running jobs (pruned on open)

A seed is a root commit; a child's commit has its parent's commit as its only git parent, so plain
``git log --graph --all`` shows the lineage. Git objects and the branch are written first and the
journal event last, so a crash leaves at worst an orphan branch, which ``open`` deletes.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from metasearch.archive.journal import ArchiveIndex, Journal
from metasearch.errors import ArchiveError
from metasearch.types import Agent, Evaluation, Expand, Job, job_to_dict

log = logging.getLogger(__name__)

IGNORED = "__pycache__/\n*.pyc\n.pytest_cache/\n.mypy_cache/\ntranscripts/\n*.log\nlogs/\n.DS_Store\n"
BRANCH_PREFIX = "agents/"
_GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "metasearch",
    "GIT_AUTHOR_EMAIL": "metasearch@localhost",
    "GIT_COMMITTER_NAME": "metasearch",
    "GIT_COMMITTER_EMAIL": "metasearch@localhost",
    "GIT_TERMINAL_PROMPT": "0",
}


class GitArchive:
    """The real Archive. Thread-safe within a process; process-safe through the journal's file lock."""

    def __init__(self, root: Path, index: ArchiveIndex, journal: Journal) -> None:
        self.root = Path(root).resolve()
        self.repo = self.root / "repo"
        self.journal = journal
        self.index = index
        self.study = index.study or self.root.name
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._lock = threading.RLock()
        self._excludes = self.repo / ".git" / "metasearch-excludes"
        self._ignore_blob: str | None = None

    # -- lifecycle --------------------------------------------------------------------------------

    @classmethod
    def create(cls, root: Path, *, study: str, config_text: str) -> GitArchive:
        root = Path(root)
        if root.exists() and any(root.iterdir()):
            raise ArchiveError(
                f"{root}: already exists and is not empty; resume it or choose another study name"
            )
        (root / "logs").mkdir(parents=True, exist_ok=True)
        _git(root, "init", "-q", "-b", "main", "repo")
        for key, value in (
            ("gc.auto", "0"),
            ("core.fsync", "objects,reference"),
            ("advice.detachedHead", "false"),
        ):
            _git(root / "repo", "config", key, value)
        (root / "repo" / ".git" / "metasearch-excludes").write_text(IGNORED)
        (root / "config.yaml").write_text(config_text)
        journal = Journal(root / "journal.jsonl")
        index = journal.replay()
        journal.append({"op": "study_created", "study": study}, index)
        return cls(root, index, journal)

    @classmethod
    def open(cls, root: Path, *, lease_timeout_s: float = 30.0, readonly: bool = False) -> GitArchive:
        """Reopen a study: replay the journal, then (unless ``readonly``, for inspection while a run may be
        live) repair what a crash left: orphan branches, stale worktrees, jobs of dead processes."""
        root = Path(root)
        if not (root / "journal.jsonl").is_file() or not (root / "repo").is_dir():
            raise ArchiveError(f"{root}: not a study directory (no journal.jsonl or repo/)")
        journal = Journal(root / "journal.jsonl")
        with journal.locked():
            index = journal.replay()
        archive = cls(root, index, journal)
        if readonly:
            return archive
        with journal.locked():
            archive._reconcile_branches()
            archive._clean_work()
        archive._return_stale_jobs(lease_timeout_s)
        return archive

    def close(self) -> None:
        """Nothing to release but worktrees, which every checkout removes itself; kept for symmetry."""

    def __enter__(self) -> GitArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _reconcile_branches(self) -> None:
        refs = self._agent_refs()
        known = {a.id: a for a in self.index.agents.values()}
        for agent_id, sha in refs.items():
            if agent_id not in known:
                log.warning(
                    "%s: deleting orphan branch %s%s (a job crashed before journaling it)",
                    self.root,
                    BRANCH_PREFIX,
                    agent_id,
                )
                self._git("update-ref", "-d", f"refs/heads/{BRANCH_PREFIX}{agent_id}", sha)
        for agent_id, agent in known.items():
            if agent_id not in refs:
                if self._git_ok("cat-file", "-e", f"{agent.commit}^{{commit}}"):
                    self._git("update-ref", f"refs/heads/{agent.branch}", agent.commit, "")
                else:
                    raise ArchiveError(
                        f"{self.root}: agent {agent_id} is journaled but its commit {agent.commit} is missing"
                    )

    def _clean_work(self) -> None:
        for lock in (self.repo / ".git" / "refs").rglob("*.lock"):
            lock.unlink(missing_ok=True)
        # Worktrees of crashed jobs; a worktree interrupted while being added is locked ("initializing")
        # and `git worktree prune` would keep it, so drop the administrative entries directly.
        shutil.rmtree(self.root / "work", ignore_errors=True)
        shutil.rmtree(self.repo / ".git" / "worktrees", ignore_errors=True)
        self._git("worktree", "prune")

    def _return_stale_jobs(self, lease_timeout_s: float) -> None:
        now = time.time()
        host = socket.gethostname()
        for job_id, owner in list(self.index.job_owner.items()):
            if job_id not in self.index.open_jobs:
                continue
            owner_host, _, rest = owner.partition(":")
            pid = int(rest.split(":")[0]) if rest.split(":")[0].isdigit() else -1
            lease = self.index.leases.get(owner, {})
            dead = owner_host == host and not _pid_alive(pid)
            if dead or now - float(lease.get("ts", 0)) > lease_timeout_s:
                self.abandon_job(job_id, "stale lease: the process running it is gone")

    # -- reads ------------------------------------------------------------------------------------

    def get(self, agent_id: str) -> Agent:
        try:
            return self.index.agents[agent_id]
        except KeyError:
            raise ArchiveError(f"{self.root}: no agent {agent_id!r}") from None

    def agents(self) -> list[Agent]:
        return list(self.index.agents.values())

    def log_dir(self, job_id: str) -> Path:
        path = self.root / "logs" / job_id
        path.mkdir(parents=True, exist_ok=True)
        return path

    # -- writes -----------------------------------------------------------------------------------

    def add_seed(
        self, name: str, source_dir: Path, *, job_id: str, meta: Mapping[str, Any] | None = None
    ) -> Agent:
        return self._add(
            None, Path(source_dir), job_id=job_id, meta={"seed": name, **(meta or {})}, message=f"seed {name}"
        )

    def add_child(
        self, parent_id: str, workspace: Path, *, job_id: str, meta: Mapping[str, Any] | None = None
    ) -> Agent:
        self.get(parent_id)
        summary = str((meta or {}).get("summary") or "child")
        return self._add(parent_id, Path(workspace), job_id=job_id, meta=dict(meta or {}), message=summary)

    def _add(
        self, parent_id: str | None, tree_dir: Path, *, job_id: str, meta: dict[str, Any], message: str
    ) -> Agent:
        with self._lock, self.journal.locked():
            self.journal._catch_up(self.index)
            existing = next((a for a in self.index.agents.values() if a.meta.get("job_id") == job_id), None)
            if existing is not None:
                return existing
            agent_id = f"a{len(self.index.agents):05d}"
            parent = self.index.agents[parent_id] if parent_id else None
            tree = self._write_tree(tree_dir)
            body = f"{message.splitlines()[0][:200]}\n\nAgent-Id: {agent_id}\nJob-Id: {job_id}\n"
            args = ["commit-tree", tree, "-m", body] + (["-p", parent.commit] if parent else [])
            commit = self._git(*args).strip()
            branch = f"{BRANCH_PREFIX}{agent_id}"
            ref = f"refs/heads/{branch}"
            if not self._git_ok("update-ref", ref, commit, ""):
                # An orphan left by a crashed writer that has not been reopened since: replace it.
                self._git("update-ref", "-d", ref)
                self._git("update-ref", ref, commit, "")
            agent = Agent(agent_id, parent_id, commit, branch, time.time(), {**meta, "job_id": job_id})
            event = {"op": "agent_added", "job_id": job_id, "agent": asdict(agent)}
            self.journal.append_locked(event, self.index)
            return agent

    def _write_tree(self, tree_dir: Path) -> str:
        tmp_index = self.repo / ".git" / f"tmp-index-{uuid.uuid4().hex}"
        env = {"GIT_INDEX_FILE": str(tmp_index), "GIT_WORK_TREE": str(tree_dir)}
        try:
            self._git("-c", f"core.excludesFile={self._excludes}", "add", "-A", "--", ".", env=env)
            if not (tree_dir / ".gitignore").exists():
                if self._ignore_blob is None:
                    self._ignore_blob = self._git("hash-object", "-w", "--stdin", input=IGNORED).strip()
                self._git(
                    "update-index", "--add", "--cacheinfo", f"100644,{self._ignore_blob},.gitignore", env=env
                )
            return self._git("write-tree", env=env).strip()
        finally:
            tmp_index.unlink(missing_ok=True)

    def start_job(self, job: Job) -> None:
        self.journal.append(
            {"op": "job_started", "job_id": job.job_id, "job": job_to_dict(job), "owner": self.owner},
            self.index,
        )

    def record(self, evaluation: Evaluation) -> bool:
        if evaluation.agent_id not in self.index.agents:
            raise ArchiveError(f"{self.root}: evaluation of unknown agent {evaluation.agent_id!r}")
        event = {"op": "evaluation_recorded", "job_id": evaluation.job_id, "evaluation": asdict(evaluation)}
        return self.journal.append(event, self.index)

    def fail_expansion(self, job: Expand, reason: str, diff: str = "") -> None:
        diff_path = None
        if diff:
            path = self.log_dir(job.job_id) / "rejected.diff"
            path.write_text(diff)
            diff_path = str(path.relative_to(self.root))
        event = {
            "op": "expansion_failed",
            "job_id": job.job_id,
            "parent_id": job.parent_id,
            "reason": reason,
            "diff_path": diff_path,
        }
        self.journal.append(event, self.index)

    def abandon_job(self, job_id: str, reason: str) -> None:
        self.journal.append({"op": "job_abandoned", "job_id": job_id, "reason": reason}, self.index)

    def add_usage(self, job_id: str, tokens: int, cost_usd: float) -> None:
        self.journal.append(
            {"op": "usage", "job_id": job_id, "tokens": int(tokens), "cost_usd": float(cost_usd)}, self.index
        )

    def heartbeat(self) -> None:
        self.journal.append(
            {"op": "lease", "owner": self.owner, "host": socket.gethostname(), "pid": os.getpid()}, self.index
        )

    def finish(self, reason: str) -> None:
        self.journal.append({"op": "study_finished", "reason": reason}, self.index)

    # -- code -------------------------------------------------------------------------------------

    @contextmanager
    def checkout(self, agent_id: str) -> Iterator[Path]:
        """A disposable worktree at the agent's commit (detached); removed on exit, even on errors."""
        agent = self.get(agent_id)
        path = self.root / "work" / f"{agent_id}-{uuid.uuid4().hex[:8]}"
        path.parent.mkdir(exist_ok=True)
        with self._lock, self.journal.locked():
            self._git("worktree", "add", "--detach", "-q", str(path), agent.commit)
        try:
            yield path
        finally:
            with self._lock, self.journal.locked():
                if not self._git_ok("worktree", "remove", "--force", str(path)):
                    shutil.rmtree(path, ignore_errors=True)
                    self._git_ok("worktree", "prune")

    def workspace_diff(self, workspace: Path) -> str:
        """The change in a checked-out workspace against its commit, new files included."""
        workspace = Path(workspace)
        tree = self._write_tree(workspace)
        base = _git(workspace, "rev-parse", "HEAD").strip()
        return self._git("diff", "--binary", base, tree)

    def archive_bytes(self, agent_id: str) -> bytes:
        """The agent's files as an uncompressed tarball (how code travels to other machines)."""
        agent = self.get(agent_id)
        result = subprocess.run(
            ["git", "-C", str(self.repo), "archive", agent.commit],
            capture_output=True,
            env=_env(),
            check=False,
        )
        if result.returncode != 0:
            raise ArchiveError(f"git archive {agent.commit} failed: {result.stderr.decode()[-500:]}")
        return result.stdout

    def export(self, agent_id: str, dest: Path) -> None:
        data = self.archive_bytes(agent_id)
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        subprocess.run(["tar", "-x", "-C", str(dest)], input=data, check=True)

    # -- git plumbing -----------------------------------------------------------------------------

    def _agent_refs(self) -> dict[str, str]:
        out = self._git(
            "for-each-ref", "--format=%(refname:strip=3) %(objectname)", f"refs/heads/{BRANCH_PREFIX}"
        )
        return dict(line.split(" ", 1) for line in out.splitlines() if line.strip())

    def _git(self, *args: str, env: Mapping[str, str] | None = None, input: str | None = None) -> str:
        return _git(self.repo, *args, env=env, input=input)

    def _git_ok(self, *args: str) -> bool:
        return (
            subprocess.run(
                ["git", "-C", str(self.repo), *args], capture_output=True, env=_env(), check=False
            ).returncode
            == 0
        )


def read_index(root: Path) -> ArchiveIndex:
    """Replay a study's journal without opening it for writing (no reconciliation, no lease changes)."""
    path = Path(root) / "journal.jsonl"
    if not path.is_file():
        raise ArchiveError(f"{root}: not a study directory (no journal.jsonl)")
    return Journal(path).replay()


def _env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    return {**os.environ, **_GIT_ENV, **(extra or {})}


def _git(cwd: Path, *args: str, env: Mapping[str, str] | None = None, input: str | None = None) -> str:
    result = subprocess.run(
        ["git", "-C", str(cwd), *args],
        capture_output=True,
        text=True,
        env=_env(env),
        input=input,
        check=False,
    )
    if result.returncode != 0:
        raise ArchiveError(f"git {' '.join(args[:3])} failed in {cwd}: {result.stderr.strip()[-800:]}")
    return result.stdout


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
