"""``metasearch ui``: the MLflow UI on a study's own store.

``ui_server`` catches the mirror up with the journal (unless a running study holds the mirror lock, in which
case that study's mirror is doing it), starts ``mlflow server`` on the study's SQLite store bound to
``host`` (127.0.0.1 by default: the UI has no authentication), waits until it answers, and stops the whole
process group on exit. ``serve_ui`` prints the URL and blocks until Ctrl-C.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlencode

from metasearch.errors import ConfigError, InfrastructureError
from metasearch.tracking import store
from metasearch.tracking.mlflow_callback import MirrorBusy, sync

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class UIServer:
    url: str
    experiment_id: str | None
    process: subprocess.Popen[bytes]

    @property
    def experiment_url(self) -> str:
        """The study's runs page: the study run, its agent runs nested under it (expand with +)."""
        return f"{self.url}/#/experiments/{self.experiment_id}/runs" if self.experiment_id else self.url

    @property
    def agents_url(self) -> str:
        """The experiment's agents view (``store.view_tags``): agent runs only, flat, best own mean first,
        with own mean, trials, clade score and state as columns."""
        if not self.experiment_id:
            return self.url
        return f"{self.experiment_url}?{urlencode({'viewStateShareKey': store.AGENTS_VIEW})}"


@contextmanager
def ui_server(
    study_dir: Path,
    port: int = 5000,
    host: str = "127.0.0.1",
    *,
    sync_first: bool = True,
    startup_timeout_s: float = 120.0,
) -> Iterator[UIServer]:
    """A running MLflow server on the study's store; stopped (process group) on exit."""
    study_dir = Path(study_dir).resolve()
    if not (study_dir / "journal.jsonl").is_file():
        raise ConfigError(f"{study_dir}: not a study directory (no journal.jsonl)")
    uri = store.study_tracking_uri(study_dir)
    if not store.is_local_store(uri):
        raise ConfigError(f"{study_dir} is mirrored to {uri}: open that server's UI instead")
    experiment_id = None
    if sync_first:
        try:
            experiment_id = sync(study_dir, lock_timeout_s=2.0)["experiment_id"]
        except MirrorBusy:
            log.info("a running study is mirroring %s; showing what it has mirrored so far", study_dir)
    cmd = [
        sys.executable, "-m", "mlflow", "server",
        "--backend-store-uri", uri,
        "--registry-store-uri", uri,
        "--artifacts-destination", str(study_dir / store.ARTIFACT_DIR),
        "--host", host, "--port", str(port), "--workers", "1",
    ]  # fmt: skip
    with tempfile.TemporaryFile() as output:
        # Server-side jobs (GenAI scorers) are not needed to browse a study, and cost seconds of startup.
        env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
        proc = subprocess.Popen(cmd, stdout=output, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        try:
            url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"
            _wait_ready(url, proc, output, startup_timeout_s)
            yield UIServer(url, experiment_id, proc)
        finally:
            _stop(proc)


def serve_ui(study_dir: Path, port: int = 5000, host: str = "127.0.0.1") -> None:
    """Start the UI, print its URL, block until Ctrl-C, SIGTERM or SIGHUP (or the server exits); the
    server's process group goes with it whichever way it stops, during startup too."""
    previous = _stop_on_signals()
    try:
        with suppress(KeyboardInterrupt), ui_server(study_dir, port, host) as server:
            print(f"MLflow UI for {Path(study_dir).name}: {server.experiment_url}", flush=True)
            print(f"agents ranked by own mean: {server.agents_url}", flush=True)
            print("press Ctrl-C to stop", flush=True)
            server.process.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _stop_on_signals() -> dict[int, Any]:
    """SIGTERM and SIGHUP raise KeyboardInterrupt, like Ctrl-C, so the context managers clean up (the
    default action ends Python on the spot and leaves the server, in its own session, running)."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    return {signum: signal.signal(signum, interrupt) for signum in (signal.SIGTERM, signal.SIGHUP)}


def _wait_ready(url: str, proc: subprocess.Popen[bytes], output: IO[bytes], timeout_s: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise InfrastructureError(f"mlflow server exited with {proc.returncode}: {_tail(output)}")
        try:
            if httpx.get(url + "/health", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise InfrastructureError(f"mlflow server did not answer on {url} within {timeout_s:g}s: {_tail(output)}")


def _tail(output: IO[bytes]) -> str:
    try:
        output.seek(0)
        return output.read().decode(errors="replace")[-1500:]
    except OSError:
        return ""


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass
