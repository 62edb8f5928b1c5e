"""Browse and promote as a user does, in a real browser: a finished quickstart study (small budget), the
link `metasearch ui` prints opened in headless Chromium (Selenium + chromedriver), the agent runs with their
metric columns, the best agent's run and a diff artifact; then `metasearch promote --gate`, `metasearch task
prepare` and `mlflow models predict` / `mlflow models serve` on ``models:/NAME@production``, with the
prediction graded by the suite's own grader.

Marked ``browser``: CI runs it (``.ci/setup`` installs chromium and chromium-driver there) and fails when
the browser is missing; elsewhere it skips with the command that installs it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from test_e2e import check_consistent

from metasearch.llm.serve import free_port

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "metasearch.cli"]
MLFLOW = str(Path(sys.executable).parent / "mlflow")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
SMALL = [
    "-o", "budget.evaluations=6", "-o", "budget.wall_time_s=900", "-o", "suite.subset=smoke",
    "-o", "suite.time_budget_s=5", "-o", "study.workers=2",
]  # fmt: skip

pytestmark = [pytest.mark.browser, pytest.mark.timeout(2400)]  # a study, a gate, three model loads


def cli(*args: str, timeout: float = 1500) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    missing = [n for n, p in (("chromium", CHROMIUM), ("chromedriver", CHROMEDRIVER)) if p is None]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("selenium (pip install -e '.[dev]')")
    if missing:
        message = f"needs {', '.join(missing)} (apt-get install -y chromium chromium-driver)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the browser test: {message}")
        pytest.skip(message)
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=2400,1200", "--no-first-run", "--disable-background-networking"):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory, docker_reason: str | None) -> Path:
    """A finished quickstart study: the README's command with a smaller budget, in Docker sandboxes
    where a daemon answers (as the quickstart does). Both tests of this module read it."""
    where = tmp_path_factory.mktemp("journey")
    docker = ["-o", "sandbox.name=docker"] if docker_reason is None else []
    done = cli(
        "run", "configs/quickstart.yaml", *SMALL, *docker, "--archive-dir", str(where), "--study", "qs"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return where / "qs"


@pytest.mark.docker
def test_the_quickstart_runs_a_small_study_in_docker(study: Path, docker_sandbox_factory: Any) -> None:
    """The main job's result, read back: the journal, the archive's branches and the budget agree, no
    container is left, and `best` and `tree` show the study (``check_consistent``)."""
    status = check_consistent(study, 6)
    assert (
        status["agents"] >= 2 and status["evaluations"] >= 6 + 2
    )  # the seed's free evaluations on both tasks
    best = json.loads(cli("best", str(study), "--json").stdout)
    assert best["agent_id"] in cli("tree", str(study)).stdout and best["seed_mean"] is not None
    assert (study / "optuna.journal").exists() and (study / "config.yaml").exists()


def wait_for(driver: Any, what: str, found: Any, timeout: float = 90) -> Any:
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.5).until(lambda d: found(d) or None)
    except TimeoutException:
        shot = Path(os.environ.get("METASEARCH_TEST_ARTIFACTS", "test-artifacts"))
        shot.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(shot / "journey-timeout.png"))
        raise AssertionError(f"the browser never showed {what} (screenshot in {shot})") from None


def test_browse_then_promote_and_predict(study: Path, browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    best = json.loads(cli("best", str(study), "--json").stdout)
    assert best["agent_id"], best

    # -- browse: the link `metasearch ui` prints ------------------------------------------------------
    port = free_port()
    ui = subprocess.Popen(
        [*CLI, "ui", str(study), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert ui.stdout is not None
        lines = [ui.stdout.readline() for _ in range(2)]
        assert lines[1].startswith("agents ranked by own mean: "), (lines, ui.poll())
        agents_url = lines[1].split(": ", 1)[1].strip()
        browser.get(agents_url)
        wait_for(browser, "the best agent's run", lambda d: d.find_elements(By.LINK_TEXT, best["agent_id"]))
        headers = {e.text for e in browser.find_elements(By.CSS_SELECTOR, "[role=columnheader]")}
        assert {"own_mean", "trials", "cmp"} <= headers, headers  # the agents view's metric columns
        assert "Duration" in headers  # agent runs end: their duration is shown
        names = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "a") if e.text.startswith("a0")]
        assert best["agent_id"] in names and len(names) >= 2, names

        # the best agent's run page, then the diff artifact of the best agent that has one
        browser.find_element(By.LINK_TEXT, best["agent_id"]).click()
        wait_for(browser, "the run page", lambda d: "/runs/" in d.current_url)
        wait_for(browser, "the run's own mean", lambda d: "own_mean" in d.page_source)
        with_diff = best["agent_id"] if best["agent_id"] != "a00000" else child_with_most_trials(study)
        if with_diff != best["agent_id"]:
            browser.get(agents_url)
            wait_for(browser, with_diff, lambda d: d.find_elements(By.LINK_TEXT, with_diff))
            browser.find_element(By.LINK_TEXT, with_diff).click()
            wait_for(browser, "the run page", lambda d: "/runs/" in d.current_url)
        tab = wait_for(
            browser,
            "the Artifacts tab",
            lambda d: [t for t in d.find_elements(By.CSS_SELECTOR, "[role=tab]") if t.text == "Artifacts"],
        )
        tab[0].click()
        wait_for(
            browser,
            "proposal.diff.txt",
            lambda d: d.find_elements(By.XPATH, "//*[text()='proposal.diff.txt']"),
        )
        browser.find_element(By.XPATH, "//*[text()='proposal.diff.txt']").click()
        wait_for(
            browser, "the diff's text", lambda d: "knobs.json" in d.page_source and "@@" in d.page_source
        )
    finally:
        ui.send_signal(signal.SIGTERM)
        assert ui.wait(timeout=60) == 0

    # -- promote with a gate, then predict on the alias ---------------------------------------------
    done = cli(
        "promote", str(study), best["agent_id"], "--name", "qs-agent", "--gate", "training:0", "--json"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    promoted = json.loads(done.stdout)
    gate = promoted["gate"]
    assert gate["subset"] == "heldout" and set(gate["scores"]) == {"training/moons", "training/friedman"}
    # as in a shell with the venv activated (`mlflow models serve` starts `uvicorn` from PATH)
    path = os.pathsep.join([str(Path(MLFLOW).parent), os.environ.get("PATH", "")])
    env = {**os.environ, "PATH": path, "MLFLOW_TRACKING_URI": promoted["tracking_uri"]}

    folder = tmp_path / "moons"
    done = cli("task", "prepare", "training", "training/moons", str(folder), "--study", str(study))
    assert done.returncode == 0, done.stderr
    out = tmp_path / "prediction.json"
    done = subprocess.run(
        [MLFLOW, "models", "predict", "-m", "models:/qs-agent@production", "-i", str(folder / "input.json"),
         "-t", "json", "-o", str(out), "--env-manager", "local"],
        env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    [row] = json.loads(out.read_text())["predictions"]
    assert row["status"] == "ok", row["output_tail"]
    predictions = folder / "task" / "output" / "predictions.npy"
    assert row["artifacts"] == [str(predictions)]
    assert len(np.load(predictions)) == len(np.load(folder / "task" / "test_x.npy"))
    graded = grade(folder / "task" / "output", "training/moons", study)
    assert graded.error is None and graded.score > 0, graded  # the suite's grader, on the hidden labels

    # -- the same alias behind `mlflow models serve`, with a folder from `task prepare` ----------------
    served_folder = tmp_path / "friedman"
    assert cli("task", "prepare", "training", "friedman", str(served_folder)).returncode == 0
    row = serve_and_post(env, served_folder / "input.json", tmp_path)
    assert row["status"] == "ok" and (served_folder / "task" / "output" / "predictions.npy").is_file(), row


def child_with_most_trials(study: Path) -> str:
    events = [json.loads(line) for line in (study / "journal.jsonl").read_text().splitlines()]
    children = {e["agent"]["id"] for e in events if e["op"] == "agent_added" and e["agent"]["parent_id"]}
    trials = [e["evaluation"]["agent_id"] for e in events if e["op"] == "evaluation_recorded"]
    assert children, "the study proposed no child"
    return max(sorted(children), key=trials.count)


def grade(artifact_dir: Path, task_id: str, study: Path) -> Any:
    """The study's own training suite (its data key decides the hidden labels) grades the artifact."""
    from metasearch.config import build_suite, study_config
    from metasearch.sandboxes.local import LocalSandbox

    return build_suite("training", study_config(study)).grade(task_id, artifact_dir, LocalSandbox())


def serve_and_post(env: dict[str, str], body: Path, cwd: Path) -> dict[str, Any]:
    port = free_port()
    server = subprocess.Popen(
        [MLFLOW, "models", "serve", "-m", "models:/qs-agent@production", "-p", str(port), "--env-manager",
         "local"],
        env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(240):
            assert server.poll() is None, server.stderr.read()[-3000:].decode() if server.stderr else ""
            try:
                if httpx.get(f"{url}/ping", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        reply = httpx.post(
            f"{url}/invocations",
            content=body.read_bytes(),
            headers={"Content-Type": "application/json"},
            timeout=300,
        )
        assert reply.status_code == 200, reply.text[-2000:]
        [row] = reply.json()["predictions"]
        return dict(row)
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
