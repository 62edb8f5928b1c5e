"""The journal: append-only JSON lines, one fact per line, the study's source of truth.

Appends take a cross-process file lock and are fsynced. Job-closing events (``agent_added``,
``evaluation_recorded``, ``expansion_failed``) are idempotent by job id. Replaying the file rebuilds an
``ArchiveIndex``. A torn last line (a crash mid-write) is reported and skipped, and the next append
starts on a fresh line; an invalid line anywhere else is corruption and raises ArchiveError.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metasearch.errors import ArchiveError
from metasearch.types import Agent, Evaluation, Job, job_from_dict

log = logging.getLogger(__name__)

CLOSING_OPS = frozenset({"agent_added", "evaluation_recorded", "expansion_failed"})


@dataclass
class ArchiveIndex:
    """What the journal says, in memory. Built by replay, then kept current by appends."""

    study: str | None = None
    agents: dict[str, Agent] = field(default_factory=dict)
    evaluations: dict[str, Evaluation] = field(default_factory=dict)  # by job id
    failed_expansions: list[dict[str, Any]] = field(default_factory=list)
    open_jobs: dict[str, Job] = field(default_factory=dict)
    job_owner: dict[str, str] = field(default_factory=dict)
    leases: dict[str, dict[str, Any]] = field(default_factory=dict)  # owner -> last lease event
    closed: set[str] = field(default_factory=set)
    tokens: int = 0
    cost_usd: float = 0.0
    finished: str | None = None
    events: int = 0
    torn_tail: bool = False

    def apply(self, event: Mapping[str, Any]) -> None:
        op = event["op"]
        job_id = str(event.get("job_id"))
        self.events += 1
        if op == "agent_added":
            a = event["agent"]
            self.agents[a["id"]] = Agent(
                id=a["id"], parent_id=a["parent_id"], commit=a["commit"], branch=a["branch"],
                created_at=a["created_at"], meta=a.get("meta") or {},
            )
        elif op == "evaluation_recorded":
            e = dict(event["evaluation"])
            e["flags"] = tuple(e.get("flags") or ())
            self.evaluations[e["job_id"]] = Evaluation(**e)
        elif op == "expansion_failed":
            self.failed_expansions.append(
                {"job_id": job_id, "parent_id": event["parent_id"], "reason": event["reason"], "diff_path": event.get("diff_path")}
            )
        elif op == "job_started":
            self.open_jobs[job_id] = job_from_dict(event["job"])
            self.job_owner[job_id] = event.get("owner", "")
            self.finished = None
        elif op == "job_abandoned":
            self.open_jobs.pop(job_id, None)
        elif op == "usage":
            self.tokens += int(event.get("tokens", 0))
            self.cost_usd += float(event.get("cost_usd", 0.0))
        elif op == "lease":
            self.leases[event["owner"]] = dict(event)
        elif op == "study_created":
            self.study = event.get("study")
        elif op == "study_finished":
            self.finished = event.get("reason")
        if op in CLOSING_OPS and event.get("job_id") is not None:
            self.closed.add(job_id)
            self.open_jobs.pop(job_id, None)


class Journal:
    """An append-only JSONL file with a cross-process lock. Thread-safe and process-safe."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock_path = self.path.with_name(self.path.name + ".lock")

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the journal's file lock (also serialises other writers of the study, e.g. git refs)."""
        with open(self._lock_path, "a") as lock_file:
            fcntl.flock(lock_file, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock_file, fcntl.LOCK_UN)

    def append(self, event: dict[str, Any], index: ArchiveIndex | None = None) -> bool:
        """Write one event (adds ``ts``). Returns False, writing nothing, for a job that is already closed."""
        with self.locked():
            return self.append_locked(event, index)

    def append_locked(self, event: dict[str, Any], index: ArchiveIndex | None = None) -> bool:
        """``append`` for a caller that already holds ``locked()``."""
        event = {"op": event["op"], "ts": round(time.time(), 6), **{k: v for k, v in event.items() if k != "op"}}
        line = json.dumps(event, separators=(",", ":"), default=_json_default) + "\n"
        if index is not None:
            self._catch_up(index)
            if event["op"] in CLOSING_OPS and event.get("job_id") in index.closed:
                return False
        self._drop_torn_tail()
        with open(self.path, "ab") as f:
            f.write(line.encode())
            f.flush()
            os.fsync(f.fileno())
            self._offset = f.tell()
        if index is not None:
            index.apply(event)
        return True

    def _drop_torn_tail(self) -> None:
        """Cut bytes after the last newline: a write a crash interrupted. Never glue onto them."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with open(self.path, "rb+") as f:
            f.seek(-1, os.SEEK_END)
            if f.read(1) == b"\n":
                return
            size = f.seek(0, os.SEEK_END)
            chunk = min(size, 1 << 20)
            f.seek(size - chunk)
            tail = f.read(chunk)
            keep = size - chunk + tail.rfind(b"\n") + 1 if b"\n" in tail else 0
            log.warning("%s: dropping %d bytes of a torn last line", self.path, size - keep)
            f.truncate(keep)
            f.flush()
            os.fsync(f.fileno())

    def _catch_up(self, index: ArchiveIndex) -> None:
        """Apply events other processes appended since we last read (cheap when there are none)."""
        offset = getattr(self, "_offset", None)
        if offset is None or not self.path.exists() or self.path.stat().st_size == offset:
            return
        with open(self.path, "rb") as f:
            f.seek(offset)
            data = f.read()
        for event in _parse(data, start_line=None, path=self.path, index=index):
            index.apply(event)
        self._offset = offset + len(data)

    def replay(self) -> ArchiveIndex:
        """Rebuild the index from the whole file."""
        index = ArchiveIndex()
        if not self.path.exists():
            self._offset = 0
            return index
        data = self.path.read_bytes()
        for event in _parse(data, start_line=1, path=self.path, index=index):
            index.apply(event)
        self._offset = len(data)
        return index


def _parse(data: bytes, *, start_line: int | None, path: Path, index: ArchiveIndex) -> Iterator[dict[str, Any]]:
    lines = data.split(b"\n")
    last = len(lines) - 1
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            event = json.loads(raw)
            if not isinstance(event, dict) or "op" not in event:
                raise ValueError("not an event object")
        except ValueError as exc:
            # The final line without a newline is a write cut short by a crash: skip it. A bad line
            # followed by good ones is corruption.
            if i == last:
                log.warning("%s: skipping a torn last line (a crash interrupted a write)", path)
                index.torn_tail = True
                continue
            where = f"line {start_line + i}" if start_line is not None else "an appended line"
            raise ArchiveError(f"{path}: {where} is not a valid journal event ({exc}); the journal is corrupt") from exc
        yield event


def _json_default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    raise TypeError(f"cannot store {type(value).__name__} in the journal")
