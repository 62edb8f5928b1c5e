"""The quickstart search on a real three-node Ray cluster on this machine (a head with no CPUs for jobs, two
worker raylets with their own custom resources), every job kind remote, with a numpy k-NN seed instead of the
torch trainer (whose runs take minutes on two shared cores); one worker node is killed mid-run (its raylet and its
workers, while it runs a job). The study must finish with exactly its budget of evaluations, nothing counted twice, the journal,
git and MLflow agreeing, and no container of the study left behind."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from ray_cluster import ENV, Cluster, make_root, write_seed

pytest.importorskip("ray")
pytestmark = pytest.mark.ray_cluster

ROOT = Path(__file__).resolve().parents[2]
BUDGET = 12


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    root = make_root()
    pool = {"pool": 2.0}
    running = Cluster(root)
    try:
        yield running.start(0, [{**pool, "worker1": 1.0}, {**pool, "worker2": 1.0}], worker_cpus=2)
    finally:
        running.stop()
        shutil.rmtree(root, ignore_errors=True)


def journal(study: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (study / "journal.jsonl").read_text().splitlines()]


def node_records(study: Path) -> list[dict[str, object]]:
    path = study / "ray_nodes.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def dry_run(cluster: Cluster, tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess[str]:
    args = [
        sys.executable, "-m", "metasearch.cli", "run", "configs/ray-cluster.yaml", "--dry-run",
        "-o", f"executor.address={cluster.address}", "-o", "executor.resources={pool: 1}",
        "-o", "executor.expand.resources={pool: 1}", "-o", "executor.smoke.resources={pool: 1}",
        *overrides, "--archive-dir", str(tmp_path),
    ]  # fmt: skip
    return subprocess.run(args, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)


def test_a_dry_run_checks_the_cluster_answers_and_can_hold_every_job(
    cluster: Cluster, tmp_path: Path
) -> None:
    fits = dry_run(cluster, tmp_path, "-o", "executor.num_cpus=2")
    assert fits.returncode == 0, fits.stderr[-3000:]
    assert "ray at" in fits.stdout and "3 nodes" in fits.stdout and "CPU=4" in fits.stdout, fits.stdout
    too_big = dry_run(cluster, tmp_path, "-o", "executor.num_gpus=1")
    assert too_big.returncode == 1, too_big.stderr[-3000:]
    assert (
        "missing: ray resources: executor.num_gpus: each evaluate job asks for 1 GPU but the largest node "
        "of the cluster has 0" in too_big.stdout
    ), too_big.stdout[-3000:]
    wide = dry_run(cluster, tmp_path, "-o", "executor.expand.num_cpus=3")
    assert wide.returncode == 1 and "executor.expand.num_cpus: each expand job asks for 3 CPU" in wide.stdout
    assert not any(tmp_path.iterdir())


@pytest.mark.timeout(900)
def test_resume_reattaches_to_the_cluster_after_the_driver_dies(cluster: Cluster, tmp_path: Path) -> None:
    """SIGKILL the head's driver mid-run; ``metasearch resume`` joins the same cluster and finishes."""
    budget = 4
    seed = write_seed(tmp_path / "seeds" / "knn")
    args = [
        "-o", f"study.seeds=[{seed}]",
        "-o", "executor.name=ray", "-o", f"executor.address={cluster.address}",
        "-o", "executor.resources={pool: 1}", "-o", "executor.expand.resources={pool: 1}",
        "-o", "sandbox.name=local", "-o", "suite.subset=smoke",
        "-o", "gate.smoke=false", "-o", "tracking.mlflow.enabled=false", "-o", "study.workers=4",
        "-o", f"budget.evaluations={budget}",
    ]  # fmt: skip
    study = tmp_path / "reattach"
    cmd = [sys.executable, "-m", "metasearch.cli"]
    first = subprocess.Popen(
        [*cmd, "run", "configs/quickstart.yaml", *args, "--archive-dir", str(tmp_path), "--study", "reattach"],
        cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 400
        while (
            time.monotonic() < deadline and len([r for r in node_records(study) if r["state"] == "done"]) < 2
        ):
            assert first.poll() is None, "the first run ended before it could be killed"
            time.sleep(0.5)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    killed = journal(study)
    assert killed[-1]["op"] != "study_finished"
    resumed = subprocess.run(
        [*cmd, "resume", str(study)], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    events = journal(study)
    assert str(events[-1]["reason"]).startswith("budget exhausted"), events[-1]
    seeds = {e["agent"]["id"] for e in events if e["op"] == "agent_added" and e["agent"]["parent_id"] is None}  # type: ignore[index]
    recorded = [e["evaluation"] for e in events if e["op"] == "evaluation_recorded"]
    assert sum(r["agent_id"] not in seeds for r in recorded) == budget  # type: ignore[index]
    pairs = Counter((r["agent_id"], r["task_id"]) for r in recorded)  # type: ignore[index]
    assert max(pairs.values()) == 1
    assert len({r["node_id"] for r in node_records(study) if r["state"] == "done"}) == 2


@pytest.mark.timeout(1500)
def test_the_quickstart_survives_a_worker_node_dying(
    cluster: Cluster, tmp_path: Path, docker_reason: str | None
) -> None:
    if docker_reason and os.environ.get("CI") == "true":
        pytest.fail(f"CI must run this test in Docker sandboxes, but {docker_reason}")
    sandbox = "docker" if docker_reason is None else "local"
    seed = write_seed(tmp_path / "seeds" / "knn")  # the trainer's torch runs would need minutes per job here
    on_pool = "{pool: 1}"
    args = [
        sys.executable, "-m", "metasearch.cli", "run", "configs/quickstart.yaml",
        "-o", "executor.name=ray", "-o", f"executor.address={cluster.address}",
        "-o", f"executor.resources={on_pool}", "-o", f"executor.expand.resources={on_pool}",
        "-o", f"executor.smoke.resources={on_pool}", "-o", "executor.wait_timeout_s=400",
        "-o", f"sandbox.name={sandbox}", "-o", "suite.time_budget_s=3", "-o", "study.workers=4",
        "-o", f"budget.evaluations={BUDGET}", "-o", "budget.wall_time_s=900", "-o", f"study.seeds=[{seed}]",
        "--archive-dir", str(tmp_path), "--study", "cluster",
    ]  # fmt: skip
    study = tmp_path / "cluster"
    out = (tmp_path / "driver.log").open("w")
    nodes = cluster.alive_nodes()
    worker1 = next(str(n["NodeID"]) for n in nodes if "worker1" in n["Resources"])  # type: ignore[operator]
    driver = subprocess.Popen(args, cwd=ROOT, env=ENV, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline and driver.poll() is None:
            records = node_records(study)
            done = {r["node_id"] for r in records if r["state"] == "done"}
            ended = {r["job_id"] for r in records if r["state"] != "started"}
            busy = {r["node_id"] for r in records if r["state"] == "started" and r["job_id"] not in ended}
            # both workers have finished jobs and worker1 runs one now (each lasts over 3 s): killing it
            # loses that job
            if len(done) >= 2 and worker1 in busy:
                break
            time.sleep(0.2)
        assert driver.poll() is None, (tmp_path / "driver.log").read_text()[-3000:]
        killed_at = time.time()
        cluster.kill_node("worker1")
        rc = driver.wait(timeout=1200)
    finally:
        if driver.poll() is None:
            driver.kill()
        out.close()
    log = (tmp_path / "driver.log").read_text()
    assert rc == 0, log[-4000:]

    events = journal(study)
    assert str(events[-1]["reason"]).startswith("budget exhausted"), events[-1]
    agents = {e["agent"]["id"]: e["agent"] for e in events if e["op"] == "agent_added"}  # type: ignore[index]
    seeds = {a for a, agent in agents.items() if agent["parent_id"] is None}  # type: ignore[index]
    recorded = [e["evaluation"] for e in events if e["op"] == "evaluation_recorded"]
    pairs = Counter((r["agent_id"], r["task_id"]) for r in recorded)  # type: ignore[index]
    assert max(pairs.values()) == 1 and len({r["job_id"] for r in recorded}) == len(recorded)  # type: ignore[index]
    assert sum(r["agent_id"] not in seeds for r in recorded) == BUDGET  # type: ignore[index]

    # Jobs ran on both workers; the killed node's jobs came back as transient failures and work went on.
    records = node_records(study)
    assert len({r["node_id"] for r in records if r["state"] == "done"}) == 2
    lost = [
        e for e in events if e["op"] == "job_abandoned" and "lost with its Ray worker" in str(e["reason"])
    ]
    assert lost, [e for e in events if e["op"] == "job_abandoned"]
    assert [r for r in records if r["state"] == "lost"]
    assert [r for r in records if r["state"] == "done" and float(r["started"]) > killed_at]  # type: ignore[arg-type]
    assert {e["job_id"] for e in events if e["op"] == "job_started"} >= {e["job_id"] for e in lost}
    kinds = Counter(str(r["kind"]) for r in records if r["state"] == "done")
    assert kinds["evaluate"] and kinds["expand"] and kinds["smoke"], kinds
    status = subprocess.run(
        [sys.executable, "-m", "metasearch.cli", "status", str(study), "--json"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    nodes = json.loads(status.stdout)["ray_nodes"]
    # A job lost before its task reported where it ran (sent to the node as it died) is on no known node.
    known = [n for n in nodes if n["node"] != "unknown"]
    assert len(known) == 2 and all(n["done"] and n["running"] == 0 for n in known), nodes
    assert all(n["done"] == n["running"] == 0 for n in nodes if n["node"] == "unknown"), nodes
    assert sum(n["failed"] for n in nodes) >= len(lost), nodes  # lost jobs count on the node they started on
    # Times are the head's (a task's report in, its result back): a little past 1 only when slots stay full.
    assert all(0 < n["utilisation"] <= 1.2 for n in known), nodes

    # The archive agrees with the journal, git is sound, MLflow mirrors every agent and evaluation.
    repo = study / "repo"
    branches = subprocess.run(
        ["git", "-C", str(repo), "for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads/agents/"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert dict(zip(branches[::2], branches[1::2], strict=True)) == {
        a["branch"]: a["commit"]  # type: ignore[index]
        for a in agents.values()
    }
    fsck = subprocess.run(["git", "-C", str(repo), "fsck", "--strict"], capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stderr
    from mlflow import MlflowClient

    from metasearch.tracking import store

    client = MlflowClient(store.default_tracking_uri(study))
    exp = store.find_experiment(client, study, "cluster")
    assert exp is not None
    agent_runs = store.runs_by_kind(client, exp, "agent")
    assert {r.data.tags[store.AGENT_ID] for r in agent_runs} == set(agents)
    [study_run] = store.runs_by_kind(client, exp, "study")
    assert study_run.data.metrics["evaluations"] == len(recorded)

    if sandbox == "docker":
        study_id = next(e["study_id"] for e in events if e["op"] == "study_created")
        left = subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"label=metasearch.study_id={study_id}"],
            capture_output=True, text=True,
        ).stdout.split()  # fmt: skip
        assert not left, f"containers of the study left behind: {left}"
