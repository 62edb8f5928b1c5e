"""The MLflow mirror as a study callback, and ``sync`` for catching up later.

On the study thread the callback only puts the event on a queue (about a microsecond). A background thread
wakes on it, waits a moment so events coalesce into batches, and mirrors the journal (not the events: they
are only wake-ups) with ``JournalMirror``. When MLflow is unreachable the search goes on: the thread backs
off and retries, and whatever it could not send is still in the journal, so the next attempt, the next
process, or ``sync(study_dir)`` catches up. One process mirrors a study at a time (``mlflow-mirror.lock``);
a second one waits for the lock instead of writing twice.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from filelock import FileLock, Timeout

from metasearch.errors import InfrastructureError
from metasearch.events import Event, StudyFinished
from metasearch.tracking import store
from metasearch.tracking.mirror import JournalMirror

if TYPE_CHECKING:
    from metasearch.study import Study

log = logging.getLogger(__name__)

_FLUSH = object()
_STOP = object()


class MirrorBusy(InfrastructureError):
    """Another process holds the study's mirror lock (a running study mirrors it already)."""


class MlflowMirror:
    """A ``Callback`` that mirrors a study to MLflow on a background thread. Use as a context manager,
    or ``start()`` it and let ``StudyFinished`` close it (after a final flush of ``final_flush_s``)."""

    def __init__(
        self,
        study_dir: Path,
        tracking_uri: str | None = None,
        *,
        poll_s: float = 2.0,
        batch_delay_s: float = 0.5,
        retry_max_s: float = 30.0,
        lineage_interval_s: float = 30.0,
        final_flush_s: float = 60.0,
        max_lines: int = 5000,
    ) -> None:
        self.study_dir = Path(study_dir).resolve()
        self.tracking_uri = store.study_tracking_uri(self.study_dir, tracking_uri)
        self.poll_s = poll_s
        self.batch_delay_s = batch_delay_s
        self.retry_max_s = retry_max_s
        self.lineage_interval_s = lineage_interval_s
        self.final_flush_s = final_flush_s
        self.max_lines = max_lines
        self.errors = 0
        self.last_error: str | None = None
        self.engine: JournalMirror | None = None
        self.closed: bool | None = None  # set by close(): whether everything was mirrored by then
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._progress = threading.Condition()
        self._caught_up = -1  # journal bytes mirrored when the worker last found nothing new
        self._flushes_done = 0
        self._thread: threading.Thread | None = None

    # -- the callback (study thread) ----------------------------------------------------------------

    def __call__(self, study: Study | None, event: Event) -> None:
        if self.closed is not None:  # closed (StudyFinished): nobody would take it off the queue
            return
        self._queue.put(event)
        if isinstance(event, StudyFinished):
            self.close(self.final_flush_s)

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> MlflowMirror:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="metasearch-mlflow", daemon=True)
            self._thread.start()
        return self

    def flush(self, timeout_s: float = 60.0) -> bool:
        """Wait until everything journaled before this call is in MLflow (and the lineage redrawn)."""
        if self._thread is None or not self._thread.is_alive():
            return False
        target = self.study_dir.joinpath("journal.jsonl").stat().st_size
        with self._progress:
            asked = self._flushes_done
        self._queue.put(_FLUSH)
        with self._progress:
            return (
                self._progress.wait_for(
                    lambda: (self._caught_up >= target and self._flushes_done > asked) or not self._alive(),
                    timeout=timeout_s,
                )
                and self._alive()
            )

    def close(self, timeout_s: float = 60.0) -> bool:
        """Flush (up to ``timeout_s``), then stop the thread. Returns whether everything was mirrored."""
        if self._thread is None:
            return False
        if self.closed is not None:
            return self.closed
        done = self.flush(timeout_s)
        if not done:
            log.warning(
                "MLflow mirror of %s is behind (%s); nothing is lost: it catches up on the next run, "
                "`metasearch ui` or tracking.sync()",
                self.study_dir,
                self.last_error or "timed out",
            )
        self.closed = done
        self._stop.set()
        self._queue.put(_STOP)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=10)
        return done

    def __enter__(self) -> MlflowMirror:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close(self.final_flush_s)

    def _alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._stop.is_set()

    # -- the worker -------------------------------------------------------------------------------

    def _run(self) -> None:
        lock = FileLock(self.study_dir / store.LOCK_FILE)
        retry_at = 0.0
        backoff = 0.0
        waiting_for_lock = False
        flush = False  # sticky: a flush asked for during an outage is honoured once MLflow is back
        try:
            while not self._stop.is_set():
                flush |= self._wait(max(0.0, retry_at - time.monotonic()) if backoff else self.poll_s)
                if self._stop.is_set():
                    break
                if time.monotonic() < retry_at:
                    continue
                if not lock.is_locked:
                    try:
                        lock.acquire(timeout=0)
                    except Timeout:
                        if not waiting_for_lock:
                            log.info("another process is mirroring %s; waiting for it", self.study_dir)
                        waiting_for_lock = True
                        continue
                try:
                    self._mirror(flush)
                    flush, backoff, retry_at = False, 0.0, 0.0
                except Exception as exc:
                    self.errors += 1
                    if backoff == 0.0:
                        log.warning("MLflow mirror paused (%s); retrying; the search goes on", _describe(exc))
                    self.last_error = _describe(exc)
                    backoff = min(self.retry_max_s, max(0.5, 2 * backoff))
                    retry_at = time.monotonic() + backoff
        finally:
            if lock.is_locked:
                lock.release()
            with self._progress:
                self._progress.notify_all()

    def _mirror(self, flush: bool) -> None:
        if self.engine is None:
            self.engine = JournalMirror(
                self.study_dir,
                self.tracking_uri,
                max_lines=self.max_lines,
                lineage_interval_s=self.lineage_interval_s,
            )
        engine = self.engine
        while not self._stop.is_set():
            if engine.step() == 0:
                break
        engine.draw_lineage(force=flush)
        with self._progress:
            self._caught_up = engine.mirrored
            self._flushes_done += flush
            self._progress.notify_all()

    def _wait(self, timeout: float) -> bool:
        """Block for an event (or ``timeout``), let more arrive for ``batch_delay_s``, then drain.
        Returns whether a flush was asked for."""
        try:
            items = [self._queue.get(timeout=timeout)]
        except queue.Empty:
            return False
        if not any(i is _FLUSH or i is _STOP for i in items):
            self._stop.wait(self.batch_delay_s)
        while True:
            try:
                items.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return any(i is _FLUSH for i in items)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"


def sync(study_dir: Path, tracking_uri: str | None = None, *, lock_timeout_s: float = 30.0) -> dict[str, Any]:
    """Replay the journal into MLflow until caught up, and redraw the lineage. Idempotent.

    Raises InfrastructureError if another process keeps mirroring the study for ``lock_timeout_s`` (it is
    doing this work already) or if the tracking store cannot be reached.
    """
    study_dir = Path(study_dir).resolve()
    engine = JournalMirror(study_dir, tracking_uri)
    lock = FileLock(study_dir / store.LOCK_FILE)
    try:
        lock.acquire(timeout=lock_timeout_s)
    except Timeout:
        raise MirrorBusy(
            f"{study_dir}: another process (a running study?) is mirroring this study; it will catch up itself"
        ) from None
    started = time.monotonic()
    try:
        lines = engine.catch_up()
        engine.draw_lineage(force=True)
    except InfrastructureError:
        raise
    except Exception as exc:  # MLflow's own errors (store locked, server gone): say what to do
        raise InfrastructureError(
            f"cannot mirror {study_dir} to {engine.tracking_uri} ({_describe(exc)}); nothing is lost, "
            "run it again when the tracking store is reachable"
        ) from exc
    finally:
        lock.release()
    return {
        "tracking_uri": engine.tracking_uri,
        "experiment_id": engine.experiment_id,
        "study_run_id": engine.runs.get(""),
        "lines": lines,
        "agents": len(engine.replay.agents),
        "agent_runs": len(engine.runs) - 1,
        "evaluations": engine.replay.evaluations,
        "seconds": round(time.monotonic() - started, 3),
    }
