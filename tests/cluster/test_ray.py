"""The RayExecutor against a local `ray.init()` cluster, through the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from metasearch.archive import read_index

pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parents[2]
BASE = [
    "-o",
    "executor.name=ray",
    "-o",
    "sandbox.name=local",
    "-o",
    "suite.subset=smoke",
    "-o",
    "suite.time_budget_s=5",
    "-o",
    "study.workers=2",
]


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "metasearch.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=env,
    )


def test_evaluations_run_as_ray_tasks_and_results_reach_the_head(tmp_path: Path) -> None:
    """Evaluations, expansions and smoke runs go through Ray; what a worker's suite learns of a task comes
    back to the head, is journaled, and the next worker's suite starts from it (``counting_suite``: each
    grading counts itself as a learned fact and reports the count it started from)."""
    path = os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])
    result = cli(
        "run",
        "configs/quickstart.yaml",
        *BASE,
        "-o",
        "budget.evaluations=3",
        "-o",
        "suite.name=counting_suite:CountingSuite",
        "--archive-dir",
        str(tmp_path),
        "--study",
        "ray",
        env={**os.environ, "PYTHONPATH": path},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    study = tmp_path / "ray"
    events = [json.loads(line) for line in (study / "journal.jsonl").read_text().splitlines()]
    recorded = [e["evaluation"] for e in events if e["op"] == "evaluation_recorded"]
    assert len(recorded) >= 5 and all(r["error"] is None for r in recorded), recorded
    # With two jobs at a time, the third evaluation of a task starts after one of the first two came back:
    # it starts from a count of at least 1, which only the head could have given it.
    by_task: dict[str, list[float]] = {}
    for r in recorded:
        by_task.setdefault(r["task_id"], []).append(r["metrics"]["graded_before"])
    assert any(len(seen) >= 3 for seen in by_task.values()), by_task
    assert all(max(seen) >= 1 for seen in by_task.values() if len(seen) >= 3), by_task
    learned = [e for e in events if e["op"] == "task_learned"]
    assert {e["task_id"] for e in learned} == set(by_task), learned
    known = read_index(study).learned  # what the last evaluation to come back counted
    assert all(known[t]["graded"] in {b + 1 for b in seen} for t, seen in by_task.items()), (known, by_task)
    assert all(
        (study / "logs" / r["job_id"] / "agent.log").read_text().startswith("# exit_code=0") for r in recorded
    )
    kinds = {json.loads(x)["kind"] for x in (study / "ray_nodes.jsonl").read_text().splitlines()}
    assert kinds == {"evaluate", "expand", "smoke"}  # every job kind went through Ray
    import ray

    from metasearch.cluster.ray_executor import stop_ray
    from metasearch.tracking.heldout import Gate, run_gate

    try:  # the promotion gate's held-out re-evaluations run on the study's Ray too
        result = run_gate(study, "a00000", Gate("training", 0.0))
        assert ray.is_initialized()
    finally:
        stop_ray()
    assert len(result.scores) == 2 and not result.errors, result
    promoted = sorted((study / "logs").glob("promote-*/agent.log"))
    assert len(promoted) == 2 and all(p.read_text().startswith("# exit_code=0") for p in promoted)


def test_a_gpu_request_on_a_cpu_cluster_fails_at_start_naming_both_numbers(tmp_path: Path) -> None:
    result = cli(
        "run", "configs/quickstart.yaml", *BASE, "-o", "executor.num_gpus=1",
        "--archive-dir", str(tmp_path), "--study", "gpu",
    )  # fmt: skip
    assert result.returncode == 2, result.stderr[-3000:]
    assert (
        "executor.num_gpus: each evaluate job asks for 1 GPU but the largest node of the cluster has 0"
        in result.stderr
    ), result.stderr[-3000:]
    assert not (tmp_path / "gpu").exists()  # refused before anything was written


def test_agents_that_use_an_llm_get_a_gateway_on_the_worker(tmp_path: Path) -> None:
    """The coding-agent seed evaluated as Ray tasks: each worker runs the job's gateway to the scripted
    server, and the tokens it metered are journaled on the head."""
    from metasearch.llm.scripted import ScriptedLLM

    solve = (
        "Predict the majority class.\n```bash\npython3 - <<'EOF'\nimport json\nimport numpy as np\n"
        "y = np.load('train_y.npy')\ninfo = json.load(open('task.json'))\n"
        "pred = np.full(info['n_test'], np.bincount(y.astype(int)).argmax() if info['kind'] == 'classification' else float(y.mean()))\n"
        "np.save('output/predictions.npy', pred)\nEOF\n```"
    )

    def script(body: dict[str, object]) -> str:
        messages = body["messages"]
        assert isinstance(messages, list)
        return solve if len(messages) == 2 else "SUBMIT\nwrote predictions"

    with ScriptedLLM(script) as llm:
        result = cli(
            "run", "configs/quickstart.yaml", *BASE,
            "-o", "study.seeds=[coding-agent]", "-o", f"llm.base_url={llm.base_url}", "-o", "llm.api_key_env=null",
            "-o", "budget.evaluations=1", "-o", "budget.expansions=1",
            "-o", "tracking.mlflow.enabled=false", "--archive-dir", str(tmp_path), "--study", "rayllm",
        )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    study = tmp_path / "rayllm"
    events = [json.loads(line) for line in (study / "journal.jsonl").read_text().splitlines()]
    recorded = [e["evaluation"] for e in events if e["op"] == "evaluation_recorded"]
    assert len(recorded) >= 2 and all(r["error"] is None for r in recorded), recorded
    transcripts = [
        json.loads(x)
        for r in recorded
        for x in (study / "logs" / r["job_id"] / "llm.jsonl").read_text().splitlines()
    ]
    journaled = sum(e["tokens"] for e in events if e["op"] == "usage")
    assert journaled == sum(t["prompt_tokens"] + t["completion_tokens"] for t in transcripts) > 0


def test_the_token_budget_holds_for_meta_agents_on_ray_workers(tmp_path: Path) -> None:
    """The ``llm`` meta-agent runs on Ray workers; every call reserves in the study's host actor, so the
    journaled spend (what the scripted server reported, call by call) stays within budget.tokens."""
    import threading

    from metasearch.llm.scripted import ScriptedLLM

    cap = 40_000
    reported: list[int] = []
    lock = threading.Lock()

    def script(body: dict[str, object]) -> dict[str, object]:
        max_tokens = body["max_tokens"]
        messages = body["messages"]
        assert isinstance(max_tokens, int) and isinstance(messages, list)
        words = ("word " * 3000).split()[:max_tokens]
        with lock:
            reported.append(sum(len(str(m["content"]).split()) for m in messages) + len(words))
        return {"content": " ".join(words), "delay_s": 0.5}

    with ScriptedLLM(script) as llm:
        result = cli(
            "run", "configs/quickstart.yaml", *BASE, "-o", "proposer={name: llm, mode: diff}", "-o", "scheduler={name: random}",
            "-o", "study.seed_evaluations=none", "-o", f"llm.base_url={llm.base_url}", "-o", "llm.api_key_env=null",
            "-o", "llm.max_tokens=3000", "-o", f"budget.tokens={cap}", "-o", "budget.expansions=12",
            "-o", "tracking.mlflow.enabled=false", "--archive-dir", str(tmp_path), "--study", "raybudget",
        )  # fmt: skip
    events = [
        json.loads(line) for line in (tmp_path / "raybudget" / "journal.jsonl").read_text().splitlines()
    ]
    journaled = sum(e["tokens"] for e in events if e["op"] == "usage")
    assert 0 < journaled == sum(reported) <= cap, (journaled, reported, result.stderr[-2000:])
    assert "token budget exhausted" in events[-1]["reason"], events[-1]
    nodes = [json.loads(x) for x in (tmp_path / "raybudget" / "ray_nodes.jsonl").read_text().splitlines()]
    assert {r["kind"] for r in nodes if r["state"] == "done"} >= {"expand"}
