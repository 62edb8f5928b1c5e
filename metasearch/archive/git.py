"""GitArchive: agent code in git, facts in the journal.

Layout of a study directory::

    <root>/repo/                 git repository; agent <id> is the commit at branch agents/<id>
    <root>/journal.jsonl         the facts (see journal.py); the commit point of every write
    <root>/config.yaml           the resolved configuration, frozen at creation
    <root>/logs/<job id>/        per-job logs, diffs, artifacts
    <root>/work/<process>/<wt>/  disposable worktrees, one folder per process (dead ones pruned on open)

A seed is a root commit; a child's commit has its parent's commit as its only git parent, so plain
``git log --graph --all`` shows the lineage. Git objects and the branch are written first and the
journal event last, so a crash leaves at worst an orphan branch, which ``open`` deletes (recovery.py).
Every write holds the journal's file lock, which serialises threads and processes alike. Objects and
branches are written in-process where the repository layout allows (objects.py), else by git.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from metasearch.archive import objects
from metasearch.archive.index import ArchiveIndex
from metasearch.archive.journal import Journal
from metasearch.archive.plumbing import (
    REPO_CONFIG,
    git,
    git_bytes,
    git_ok,
    neutral_attributes,
    object_format,
    write_tree,
)
from metasearch.archive.recovery import repair
from metasearch.archive.tally import ModelLedger
from metasearch.errors import ArchiveError
from metasearch.types import Agent, Evaluation, Expand, Job, job_to_dict

log = logging.getLogger(__name__)
KEPT_DIFF = 2_000_000  # characters of a diff kept in a log (the gate refuses far smaller ones by default)

BRANCH_PREFIX = "agents/"


class GitArchive:
    """The real Archive. Thread-safe, and process-safe through the journal's file lock.

    Construct with ``create`` or ``open``. ``owner`` (``host:pid:tag``) names this instance in leases
    and started jobs, so another process can tell whether they are still alive.
    """

    def __init__(self, root: Path, journal: Journal) -> None:
        self.root = Path(root).resolve()
        self.repo = self.root / "repo"
        self.journal = journal
        self.study = self.index.study or self.root.name
        self.study_id = study_id_of(self.index, self.root)
        self.host = socket.gethostname()
        tag = uuid.uuid4().hex[:8]
        self.owner = f"{self.host}:{os.getpid()}:{tag}"
        self._work = self.root / "work" / f"{self.host}_{os.getpid()}_{tag}"
        self._fast: bool | None = None  # commit and branch written in-process (see objects.py)
        self._checkouts: dict[Path, str] = {}  # live worktree -> the commit it was made at
        if (self.repo / ".git").is_dir():  # (one made before the file existed gets it here)
            neutral_attributes(self.repo / ".git")

    @property
    def index(self) -> ArchiveIndex:
        """The journal's index: every fact this process has seen (appends keep it current)."""
        index = self.journal.index
        if index is None:  # construction always replays first
            raise ArchiveError(f"{self.root}: the journal was never replayed")
        return index

    # -- lifecycle --------------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        root: Path,
        *,
        study: str,
        config_text: str,
        study_id: str | None = None,
        record_files: Mapping[str, str] | None = None,
        conditions: str | None = None,
    ) -> GitArchive:
        """Make a new study directory; ArchiveError if ``root`` exists and is not an empty folder.

        ``study_id`` (a fresh UUID if not given) names this study and no other, e.g. on its containers.
        ``record_files`` (name -> text, e.g. the provenance record) are written next to config.yaml and,
        with it, into the archive's first commit (branch ``main``); ``conditions`` (the short hash of the
        score-deciding conditions) is journaled with the creation and stamped on every evaluation."""
        root = Path(root)
        if root.exists() and (not root.is_dir() or any(root.iterdir())):
            raise ArchiveError(
                f"{root}: already exists and is not empty; resume it or choose another study name"
            )
        (root / "logs").mkdir(parents=True, exist_ok=True)
        git(root, "init", "-q", "-b", "main", "repo")
        for key, value in REPO_CONFIG.items():
            git(root / "repo", "config", key, value)
        neutral_attributes(root / "repo" / ".git")
        (root / "config.yaml").write_text(config_text)
        if record_files:
            for name, text in record_files.items():
                (root / name).write_text(text)
            files = {"config.yaml": config_text, **record_files}
            _commit_files(
                root / "repo", files, "study record\n\nThe frozen config and the provenance record.\n"
            )
        journal = Journal(root / "journal.jsonl")
        event: dict[str, Any] = {
            "op": "study_created",
            "study": study,
            "study_id": study_id or uuid.uuid4().hex,
        }
        if conditions is not None:
            event["conditions"] = conditions
        journal.append(event)
        return cls(root, journal)

    @classmethod
    def open(cls, root: Path, *, lease_timeout_s: float = 30.0, readonly: bool = False) -> GitArchive:
        """Reopen a study: replay the journal, then (unless ``readonly``, for inspection while a run may
        be live) repair what a crash left.

        Repairs: orphan branches (no ``agent_added``) are deleted; a journaled agent's missing branch is
        restored from its commit; worktrees of dead processes are removed; open jobs whose owner is dead
        on this host or silent for more than ``lease_timeout_s`` are abandoned, so they are queued again.
        """
        root = Path(root)
        if not (root / "journal.jsonl").is_file() or not (root / "repo").is_dir():
            raise ArchiveError(f"{root}: not a study directory (no journal.jsonl or repo/)")
        journal = Journal(root / "journal.jsonl")
        with journal.locked(shared=readonly):
            journal.replay()
        archive = cls(root, journal)
        if readonly:
            return archive
        repair(archive, lease_timeout_s)
        return archive

    def close(self) -> None:
        """Nothing to release (checkouts remove themselves); kept so the archive is a context manager."""

    def __enter__(self) -> GitArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reads ------------------------------------------------------------------------------------

    def get(self, agent_id: str) -> Agent:
        """The agent, or ArchiveError naming it. A miss first reads what other processes journaled."""
        agent = self.index.agents.get(agent_id)
        if agent is None:
            with self.journal.locked():
                agent = self.journal.catch_up().agents.get(agent_id)
        if agent is None:
            raise ArchiveError(f"{self.root}: no agent {agent_id!r}")
        return agent

    def agents(self) -> list[Agent]:
        """All agents, in creation order."""
        return list(self.index.agents.values())

    def log_dir(self, job_id: str) -> Path:
        path = self.root / "logs" / job_id
        path.mkdir(parents=True, exist_ok=True)
        return path

    # -- writes -----------------------------------------------------------------------------------

    def add_seed(
        self, name: str, source_dir: Path, *, job_id: str, meta: Mapping[str, Any] | None = None
    ) -> Agent:
        """A root commit of ``source_dir``'s files. Idempotent by ``job_id``."""
        return self._add(None, Path(source_dir), job_id, {"seed": name, **(meta or {})}, f"seed {name}")

    def add_child(
        self,
        parent_id: str,
        workspace: Path,
        *,
        job_id: str,
        meta: Mapping[str, Any] | None = None,
        tree: str | None = None,
    ) -> Agent:
        """A commit of ``workspace``'s full tree whose only parent is the parent agent's commit; ``tree``,
        when given, is that tree as already written (``workspace_change``), committed as it is, so the
        child is exactly what the gate judged whatever the workspace holds now.

        Idempotent by ``job_id``: a second call returns the first call's agent and writes nothing.
        """
        summary = str((meta or {}).get("summary") or "child")
        return self._add(parent_id, Path(workspace), job_id, dict(meta or {}), summary, tree)

    def _add(
        self,
        parent_id: str | None,
        tree_dir: Path,
        job_id: str,
        meta: dict[str, Any],
        message: str,
        tree: str | None = None,
    ) -> Agent:
        done = self.index.agent_by_job.get(job_id)
        if done is not None:
            return self.index.agents[done]
        parent = self.get(parent_id) if parent_id is not None else None
        # Objects are content-addressed and written atomically: stage outside the lock, so concurrent
        # writers only queue for the id, the commit, the branch and the journal line.
        if tree is None:
            tree = write_tree(self.repo, tree_dir, in_process=self._in_process())
        with self.journal.locked():
            index = self.journal.catch_up()
            done = index.agent_by_job.get(job_id)
            if done is not None:
                return index.agents[done]
            agent_id = f"a{len(index.agents):05d}"
            title = message.strip().splitlines()[0][:200] if message.strip() else "child"
            body = f"{title}\n\nAgent-Id: {agent_id}\nJob-Id: {job_id}\n"
            branch = f"{BRANCH_PREFIX}{agent_id}"
            commit = self._commit_and_branch(tree, parent.commit if parent else None, body, branch)
            agent = Agent(agent_id, parent_id, commit, branch, time.time(), {**meta, "job_id": job_id})
            self.journal.append_locked({"op": "agent_added", "job_id": job_id, "agent": asdict(agent)})
            return agent

    def _in_process(self) -> bool:
        """Whether objects and refs may be written without git processes (see objects.py)."""
        if self._fast is None:
            self._fast = objects.supported(self.repo / ".git", object_format(self.repo))
        return self._fast

    def _commit_and_branch(self, tree: str, parent: str | None, message: str, branch: str) -> str:
        """Write the commit and its write-once branch (call with the lock held); return the commit id."""
        git_dir, ref = self.repo / ".git", f"refs/heads/{branch}"
        if self._in_process():
            commit = objects.write_commit(git_dir, tree, parent, message, int(time.time()))
            created = objects.create_ref(git_dir, ref, commit)
        else:
            commit = self._git(
                "commit-tree", tree, "-m", message, *(["-p", parent] if parent else [])
            ).strip()
            created = self._git_ok("update-ref", ref, commit, "")  # "" = must not exist yet
        if not created:
            # The id is unjournaled (we hold the lock and are caught up), so the branch is an orphan of a
            # writer that crashed after writing it and before its journal line: replace it.
            log.warning("%s: replacing orphan branch %s left by a crashed writer", self.root, branch)
            if self._in_process():
                objects.create_ref(git_dir, ref, commit, replace=True)
            else:
                self._git("update-ref", ref, commit)
        return commit

    def start_job(self, job: Job) -> None:
        """Journal that this process runs ``job`` (until a closing event or ``abandon_job``)."""
        self.journal.append(
            {"op": "job_started", "job_id": job.job_id, "job": job_to_dict(job), "owner": self.owner}
        )

    def record(self, evaluation: Evaluation) -> bool:
        """Journal an evaluation; False (and nothing written) if its job id was already recorded. An
        evaluation without ``conditions`` gets the study's current conditions hash (a lookup)."""
        with self.journal.locked():
            index = self.journal.catch_up()
            if evaluation.agent_id not in index.agents:
                raise ArchiveError(
                    f"{self.root}: evaluation {evaluation.job_id} of unknown agent {evaluation.agent_id!r}"
                )
            if evaluation.conditions is None and index.conditions is not None:
                evaluation = replace(evaluation, conditions=index.conditions)
            event = {
                "op": "evaluation_recorded",
                "job_id": evaluation.job_id,
                "evaluation": asdict(evaluation),
            }
            return self.journal.append_locked(event)

    def accept_drift(
        self, conditions: str, differences: list[dict[str, Any]], record: dict[str, Any]
    ) -> None:
        """Journal that the user accepted changed conditions (``resume --accept-drift``): the differences,
        the new conditions hash (stamped on later evaluations) and the full record they were measured by."""
        self.journal.append(
            {"op": "drift_accepted", "conditions": conditions, "differences": differences, "record": record}
        )

    def fail_expansion(self, job: Expand, reason: str, diff: str = "", *, kind: str = "other") -> None:
        """Journal a rejected expansion; a non-empty ``diff`` is kept as logs/<job_id>/rejected.diff (its
        first ``KEPT_DIFF`` characters: one rejected for its size could fill the disk)."""
        diff_path = None
        if diff:
            path = self.log_dir(job.job_id) / "rejected.diff"
            path.write_text(kept_diff(diff))
            diff_path = str(path.relative_to(self.root))
        self.journal.append(
            {
                "op": "expansion_failed",
                "job_id": job.job_id,
                "parent_id": job.parent_id,
                "reason": reason,
                "kind": kind,
                "diff_path": diff_path,
            }
        )

    def abandon_job(self, job_id: str, reason: str) -> None:
        """Journal that ``job_id`` will not finish here (infra error, cancel, stale lease); it is queued again."""
        self.journal.append({"op": "job_abandoned", "job_id": job_id, "reason": reason})

    def retire_task(self, task_id: str, reason: str) -> None:
        """Journal that ``task_id`` cannot be graded here: the study evaluates it no more, resumed or not."""
        self.journal.append({"op": "task_retired", "task_id": task_id, "reason": reason})

    def learn_task(self, task_id: str, facts: Mapping[str, int | float | str], *, job_id: str) -> None:
        """Journal what grading ``task_id`` taught the suite (``Suite.learn``: e.g. ``grading_mb``), found by
        job ``job_id``; a study hands the facts back to its suite when it opens (``index.learned``)."""
        self.journal.append({"op": "task_learned", "job_id": job_id, "task_id": task_id, "facts": dict(facts)})

    def choose_model(self, job_id: str, decide: Callable[[ModelLedger], str]) -> str:
        """Journal which model the expansion ``job_id`` calls (before its proposer starts): ``decide``'s
        answer on the journal's model ledger, asked with the lock held, so that concurrent choices each
        see the others."""
        with self.journal.locked():
            model = decide(self.journal.catch_up().models)
            self.journal.append_locked({"op": "model_chosen", "job_id": job_id, "model": model})
        return model

    def add_usage(self, job_id: str, tokens: int, cost_usd: float) -> None:
        self.journal.append(
            {"op": "usage", "job_id": job_id, "tokens": int(tokens), "cost_usd": float(cost_usd)}
        )

    def heartbeat(self) -> None:
        """Renew this process's lease; the caller calls it periodically (well inside the lease timeout)."""
        self.journal.append({"op": "lease", "owner": self.owner, "host": self.host, "pid": os.getpid()})

    def release(self) -> None:
        """Journal that this process no longer runs the study (its run ended, however it ended)."""
        self.journal.append({"op": "lease_released", "owner": self.owner})

    def finish(self, reason: str) -> None:
        """Journal that the run ended and why; this process's lease ends with it."""
        self.journal.append({"op": "study_finished", "reason": reason, "owner": self.owner})

    # -- code -------------------------------------------------------------------------------------

    @contextmanager
    def checkout(self, agent_id: str) -> Iterator[Path]:
        """A disposable worktree at the agent's commit (detached HEAD); removed on exit, even on errors.

        Its content may have been written by a candidate: removal deletes the folder without following
        anything in it (not ``git worktree remove``, which would read its ``.git``), then prunes git's entry.
        """
        agent = self.get(agent_id)
        path = self._work / f"{agent_id}-{uuid.uuid4().hex[:8]}"
        with self.journal.locked():  # concurrent `git worktree add` races on .git/worktrees
            self._work.mkdir(parents=True, exist_ok=True)
            self._git("worktree", "add", "--detach", "-q", str(path), agent.commit)
        self._checkouts[path] = agent.commit
        try:
            yield path
        finally:
            self._checkouts.pop(path, None)
            with self.journal.locked():
                shutil.rmtree(path, ignore_errors=True)
                self._git_ok("worktree", "prune")
                with contextlib.suppress(OSError):  # only empty when this was the process's last checkout
                    self._work.rmdir()

    def workspace_diff(self, workspace: Path) -> str:
        """The change in a workspace from ``checkout`` against its commit, new files included, ignored ones
        not. Git never runs inside the workspace (a candidate may have rewritten its ``.git``). Bytes that
        are not UTF-8 are replaced (the diff is a record to read; the child's commit holds the files).
        SandboxViolation for a tree git would refuse to check out: the candidate's failure."""
        base, tree = self._workspace_tree(workspace)
        return self._diff(base, tree)

    def workspace_change(self, workspace: Path, dest: Path) -> tuple[str, list[str], str]:
        """What the gate judges of a workspace from ``checkout``: its diff (as ``workspace_diff``), every
        path that differs from the checkout's commit (both sides of renames and deletions, unquoted, as git
        lists them), and, written under ``dest`` (an empty folder), exactly the files a child commit of the
        workspace holds (its own ``.gitignore`` applied), and the id of that tree, for ``add_child`` to
        commit exactly what was judged. One tree write; git never runs in the workspace. SandboxViolation
        for a tree git would refuse to check out: the candidate's failure."""
        base, tree = self._workspace_tree(workspace)
        diff = self._diff(base, tree)
        listed = git_bytes(self.repo, "diff-tree", "-r", "-z", "--no-renames", "--name-only", base, tree)
        paths = [name.decode("utf-8", "replace") for name in listed.split(b"\0") if name]
        subprocess.run(
            ["tar", "-x", "-C", str(dest)], input=git_bytes(self.repo, "archive", tree), check=True
        )
        return diff, paths, tree

    def _workspace_tree(self, workspace: Path) -> tuple[str, str]:
        """The commit a live checkout started from, and the tree its workspace holds now."""
        base = self._checkouts.get(Path(workspace))
        if base is None:
            raise ArchiveError(f"{workspace}: not a live checkout of this archive")
        return base, write_tree(self.repo, Path(workspace), in_process=self._in_process())

    def _diff(self, base: str, tree: str) -> str:
        return git_bytes(self.repo, "diff", "--binary", base, tree).decode("utf-8", "replace")

    def read_text(self, agent_id: str, path: str) -> str:
        """A file of the agent's commit, read from git (never from a worktree a candidate could write);
        ArchiveError if it is not UTF-8."""
        data = git_bytes(self.repo, "show", f"{self.get(agent_id).commit}:{path}")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ArchiveError(f"{path} of agent {agent_id} is not UTF-8 text: {exc}") from exc

    def archive_bytes(self, agent_id: str) -> bytes:
        """The agent's files as an uncompressed tarball (how code travels to other machines)."""
        return git_bytes(self.repo, "archive", self.get(agent_id).commit)

    def export(self, agent_id: str, dest: Path) -> None:
        """Write the agent's files under ``dest`` (created if needed), without any git metadata."""
        data = self.archive_bytes(agent_id)
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        subprocess.run(["tar", "-x", "-C", str(dest)], input=data, check=True)

    # -- git plumbing -----------------------------------------------------------------------------

    def _git(self, *args: str, env: Mapping[str, str] | None = None, input: str | None = None) -> str:
        return git(self.repo, *args, extra_env=env, input=input)

    def _git_ok(self, *args: str) -> bool:
        return git_ok(self.repo, *args)


def kept_diff(diff: str, limit: int = KEPT_DIFF) -> str:
    """``diff`` as a log keeps it: its first ``limit`` characters, and a line saying what was cut."""
    if len(diff) <= limit:
        return diff
    return diff[:limit] + f"\n[cut: the diff has {len(diff)} characters; the first {limit} are kept]\n"


def _commit_files(repo: Path, files: Mapping[str, str], message: str) -> str:
    """A root commit on ``main`` holding ``files`` (flat names) only; returns its id."""
    entries = []
    for name, text in sorted(files.items()):
        blob = git(repo, "hash-object", "-w", "--stdin", input=text).strip()
        entries.append(f"100644 blob {blob}\t{name}\n")
    tree = git(repo, "mktree", input="".join(entries)).strip()
    commit = git(repo, "commit-tree", tree, "-m", message).strip()
    git(repo, "update-ref", "refs/heads/main", commit, "")
    return commit


def study_id_of(index: ArchiveIndex, root: Path) -> str:
    """The study's unique id: the one written at creation, or (older studies) one derived from its path."""
    return index.study_id or hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:32]


def read_index(root: Path) -> ArchiveIndex:
    """Replay a study's journal without opening it for writing (no repairs, no lease changes)."""
    path = Path(root) / "journal.jsonl"
    if not path.is_file():
        raise ArchiveError(f"{root}: not a study directory (no journal.jsonl)")
    journal = Journal(path)
    with journal.locked(shared=True):
        return journal.replay()
