"""The journal: append-only JSON lines, one fact per line, the study's source of truth.

Every event has ``op`` and ``ts`` (added on append) and usually ``job_id``. Appends take a cross-process
file lock (``fcntl.flock`` on ``journal.jsonl.lock``; it also serialises threads, since each hold opens
its own descriptor) and are flushed and fsynced before the lock is released. Job-closing events
(``agent_added``, ``evaluation_recorded``, ``expansion_failed``) are idempotent by job id: a second one
is refused and ``append`` returns False.

Replaying the file rebuilds an ``ArchiveIndex``. A torn tail (a crash mid-write: a last line without
its newline, or invalid JSON as the last line) is logged, reported as ``ArchiveIndex.torn_tail`` and
skipped; the next append cuts it off first, so a new event never glues onto it. An invalid line followed
by valid ones is corruption and raises ArchiveError naming the line.

Every string an event holds is stored as valid UTF-8 (``utf8_text``): a file name that is not UTF-8,
decoded with ``surrogateescape``, would otherwise reach readers (the MLflow mirror) as lone surrogates
that no UTF-8 writer accepts.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from metasearch.archive.index import CLOSING_OPS, ArchiveIndex
from metasearch.errors import ArchiveError

__all__ = ["CLOSING_OPS", "ArchiveIndex", "Journal", "utf8_text"]

log = logging.getLogger(__name__)


class Journal:
    """An append-only JSONL file with a cross-process lock, and the index it has been replayed into.

    ``index`` is built by ``replay`` (lazily by the first append) and kept current: every append first
    applies what other processes wrote since this journal last read (``catch_up``), so the idempotency
    check sees their events too. Thread-safe and process-safe.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.index: ArchiveIndex | None = None
        self._lock_path = self.path.with_name(self.path.name + ".lock")
        self._offset = 0  # bytes of the file applied to ``index`` (complete, valid lines only)

    @contextmanager
    def locked(self, *, shared: bool = False) -> Iterator[None]:
        """Hold the journal's file lock (it also serialises the study's other writers: refs, worktrees).

        Not re-entrant: code that already holds it calls ``append_locked``. ``shared`` is for readers.
        """
        try:
            lock_file = open(self._lock_path, "a")  # noqa: SIM115 (closed below, after the early exit)
        except OSError:
            if not shared:
                raise ArchiveError(f"{self.path}: cannot open the journal lock {self._lock_path}") from None
            yield  # a reader of a study it may not write (e.g. a read-only copy): nothing to lock
            return
        with lock_file:
            fcntl.flock(lock_file, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock_file, fcntl.LOCK_UN)

    def append(self, event: dict[str, Any]) -> bool:
        """Write one event (adds ``ts``) and apply it to ``index``.

        Returns False, writing nothing, for a closing event of a job that is already closed.
        """
        with self.locked():
            return self.append_locked(event)

    def append_locked(self, event: dict[str, Any]) -> bool:
        """``append`` for a caller that already holds ``locked()``."""
        index = self.catch_up()
        if event["op"] in CLOSING_OPS and event.get("job_id") in index.closed:
            return False
        rest = {k: v for k, v in event.items() if k != "op"}
        event = utf8_text({"op": event["op"], "ts": round(time.time(), 6), **rest})
        line = (json.dumps(event, separators=(",", ":"), default=_json_default) + "\n").encode()
        with open(self.path, "ab") as f:
            size = f.seek(0, os.SEEK_END)
            if size > self._offset:  # catch_up stopped before a torn tail: cut it, never glue onto it
                log.warning("%s: dropping %d bytes of a torn last line", self.path, size - self._offset)
                f.truncate(self._offset)
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
            self._offset = f.tell()
        index.apply(event)
        return True

    def catch_up(self) -> ArchiveIndex:
        """Bring ``index`` up to date with the file (replaying it the first time) and return it.

        Cheap when nothing changed (one ``stat``). Call with the lock held when the result must be exact.
        """
        if self.index is None:
            return self.replay()
        if not self.path.exists() or self.path.stat().st_size <= self._offset:
            return self.index
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        self._offset += _apply(data, self.index, self.path, first_line=None)
        return self.index

    def replay(self) -> ArchiveIndex:
        """Rebuild ``index`` from the whole file (callers that may race a writer hold the lock)."""
        index = ArchiveIndex()
        data = self.path.read_bytes() if self.path.exists() else b""
        self._offset = _apply(data, index, self.path, first_line=1)
        self.index = index
        return index


def _apply(data: bytes, index: ArchiveIndex, path: Path, *, first_line: int | None) -> int:
    """Apply the events in ``data`` to ``index``; return the bytes consumed (a torn tail is not consumed).

    The last non-blank line is torn when it lacks its newline (the write never completed) or is not a
    valid event (garbage a crash left); it is skipped and reported. Any other invalid line is corruption.
    """
    lines = data.split(b"\n")
    # Fast path: the complete lines parsed as one JSON array, a third quicker than a loads per line. Any
    # doubt (a parse error, a count that does not match the lines, a non-event) takes the line-by-line
    # path, which finds and names the bad line.
    complete = [line for line in lines[:-1] if line and not line.isspace()]
    try:
        events = json.loads(b"[" + b",".join(complete) + b"]")
    except ValueError:
        events = None
    if (
        events is not None
        and len(events) == len(complete)
        and all(type(e) is dict and "op" in e for e in events)
    ):
        for event in events:
            index.apply(event)
        if lines[-1] and not lines[-1].isspace():  # bytes after the last newline: the write never completed
            return _torn(index, path, lines, len(lines) - 1)
        return len(data)
    return _apply_lines(lines, index, path, first_line=first_line)


def _apply_lines(lines: list[bytes], index: ArchiveIndex, path: Path, *, first_line: int | None) -> int:
    last = len(lines) - 1
    while last >= 0 and (not lines[last] or lines[last].isspace()):
        last -= 1
    apply, loads = index.apply, json.loads
    for i in range(last + 1):
        raw = lines[i]
        if not raw or raw.isspace():
            continue
        if i == last == len(lines) - 1:  # no newline after it: the write never completed
            return _torn(index, path, lines, last)
        try:
            event = loads(raw)
            if not isinstance(event, dict) or "op" not in event:
                raise ValueError("not an event object")
        except ValueError as exc:
            if i == last:
                return _torn(index, path, lines, last)
            where = f"line {first_line + i}" if first_line is not None else "an appended line"
            raise ArchiveError(
                f"{path}: {where} is not a valid journal event ({exc}); the journal is corrupt"
            ) from exc
        apply(event)
    return sum(len(line) + 1 for line in lines) - 1


def _torn(index: ArchiveIndex, path: Path, lines: list[bytes], last: int) -> int:
    log.warning("%s: skipping a torn last line (a crash interrupted a write)", path)
    index.torn_tail = True
    return len(b"\n".join(lines[:last])) + 1 if last > 0 else 0


def utf8_text(value: Any) -> Any:
    """``value`` with every string in it (through dicts, lists, tuples, sets; keys too) valid UTF-8: lone
    surrogates (``os.fsdecode`` of a name that is not UTF-8) become their escapes as text (the byte
    ``\\xff`` becomes the six characters ``\\udcff``); the rest is returned as it is."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if isinstance(value, dict):
        return {utf8_text(k): utf8_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [utf8_text(v) for v in value]
    if isinstance(value, tuple | set | frozenset):  # JSON arrays all: a plain tuple keeps the order
        return tuple(utf8_text(v) for v in value)
    if isinstance(value, Path):
        return utf8_text(str(value))
    return value


def _json_default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    raise TypeError(f"cannot store {type(value).__name__} in the journal")
