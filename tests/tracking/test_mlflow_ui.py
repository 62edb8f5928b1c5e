"""`metasearch ui`: the MLflow server on a study's store, over its REST API and in headless Chromium."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from tracking_helpers import free_port, make_archive, run_study

from metasearch.archive import GitArchive
from metasearch.tracking import store

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass(frozen=True)
class Served:
    archive: GitArchive
    url: str
    experiment_url: str
    agents_url: str
    experiment_id: str


def ctrl_c_as_in_a_terminal() -> None:
    """SIGINT at its default in the child, as a shell's foreground command has it, whatever this test
    process inherited (a child started with SIGINT ignored, as background jobs are, keeps ignoring it)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`serve_ui` (what `metasearch ui` calls) in its own process, as a user would run it; Ctrl-C at the end."""
    archive = make_archive(tmp_path_factory.mktemp("ui"))
    run_study(archive, budget=6)  # no mirror: the UI syncs the journal before it starts
    port = free_port()
    code = f"from metasearch.tracking.ui import serve_ui; serve_ui({str(archive.root)!r}, {port})"
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ctrl_c_as_in_a_terminal,
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(3)]  # blocks until the server answers
        assert lines[0].startswith("MLflow UI for s: "), (lines, proc.stderr.read() if proc.poll() else "")
        experiment_url = lines[0].split(": ", 1)[1].strip()
        agents_url = lines[1].split(": ", 1)[1].strip()
        assert experiment_url.startswith(f"http://127.0.0.1:{port}/#/experiments/")
        assert "ctrl-c" in lines[2].lower()
        experiment_id = experiment_url.rsplit("/experiments/", 1)[1].split("/")[0]
        yield Served(archive, f"http://127.0.0.1:{port}", experiment_url, agents_url, experiment_id)
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C: serve_ui stops its server's process group and returns
        status = proc.wait(timeout=60)
    assert status == 0
    with pytest.raises(httpx.ConnectError):  # the server went with it
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
    archive.close()


def test_the_ui_serves_the_study_store(served: Served) -> None:
    archive, server = served.archive, served
    api = f"{server.url}/api/2.0/mlflow"
    body = {
        "experiment_ids": [server.experiment_id],
        "filter": f"tags.`{store.KIND}` = 'agent'",
        "max_results": 1000,
    }
    runs = httpx.post(f"{api}/runs/search", json=body, timeout=30).json()["runs"]
    agent_ids = sorted(t["value"] for r in runs for t in r["data"]["tags"] if t["key"] == store.AGENT_ID)
    assert agent_ids == sorted(archive.index.agents)
    [study_run] = httpx.post(
        f"{api}/runs/search", json={**body, "filter": f"tags.`{store.KIND}` = 'study'"}, timeout=30
    ).json()["runs"]
    page = httpx.get(
        f"{server.url}/get-artifact",
        params={"path": "lineage/lineage.html", "run_uuid": study_run["info"]["run_id"]},
        timeout=30,
    )
    assert page.status_code == 200 and all(f'data-id="{a}"' in page.text for a in archive.index.agents)


def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited; only its parent's wait is missing


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_metasearch_ui_stops_its_server_on_sigterm_and_sigint(served: Served, signum: int) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "metasearch.cli", "ui", str(served.archive.root), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ctrl_c_as_in_a_terminal,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # printed once the server answers
        assert first.startswith("MLflow UI for s: "), (first, proc.stderr.read() if proc.poll() else "")
        server = _descendants(proc.pid)
        assert server, "mlflow server runs as a child of `metasearch ui`"
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).status_code == 200
        proc.send_signal(signum)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    left = {pid for pid in server if _alive(pid)}
    assert not left, f"mlflow server processes left running after {signal.Signals(signum).name}: {left}"
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)


@pytest.mark.browser
def test_agent_runs_are_listed_in_a_real_browser(
    served: Served, tmp_path_factory: pytest.TempPathFactory
) -> None:
    if CHROMIUM is None:
        message = "chromium is not installed (apt-get install -y chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the browser test: {message}")
        pytest.skip(message)
    archive, server = served.archive, served
    out = tmp_path_factory.mktemp("browser")
    flags = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={out / 'profile'}", "--window-size=1600,1000", "--virtual-time-budget=30000",
    ]  # fmt: skip
    dom = subprocess.run(
        [*flags, "--dump-dom", server.agents_url], capture_output=True, text=True, timeout=180
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    missing = [a for a in archive.index.agents if f">{a}<" not in dom.stdout]
    assert not missing, f"agent runs not rendered: {missing}"
    artifacts = Path(os.environ.get("METASEARCH_TEST_ARTIFACTS", "test-artifacts"))
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = artifacts / "mlflow-agents.png"
    done = subprocess.run(
        [*flags, f"--screenshot={shot}", server.agents_url], capture_output=True, timeout=180
    )
    assert done.returncode == 0 and shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")
