"""A study whose agents use an LLM, end to end: the coding-agent seed solves training tasks in Docker
sandboxes through the gateway, and the ``self`` proposer has it modify its own code — all against the
scripted OpenAI-compatible server playing a competent model."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from metasearch import launch
from metasearch.archive import GitArchive
from metasearch.config import load_config
from metasearch.llm.scripted import ScriptedLLM

SOLVE_STEP = """I will predict a constant: the majority class (or the mean for regression).
```bash
python3 - <<'EOF'
import json
import numpy as np
y = np.load("train_y.npy")
info = json.load(open("task.json"))
if info["kind"] == "classification":
    pred = np.full(info["n_test"], np.bincount(y.astype(int)).argmax())
else:
    pred = np.full(info["n_test"], float(y.mean()))
np.save("output/predictions.npy", pred)
print("wrote", pred.shape)
EOF
```"""
IMPROVE_STEP = """Fewer steps waste less budget on these short tasks.
```bash
sed -i 's/"max_steps": 30/"max_steps": 12/' knobs.json && python3 -m unittest discover -s tests -q
```"""


def competent(body: dict[str, Any]) -> str:
    messages = body["messages"]
    steps = sum(1 for m in messages if m["role"] == "assistant")
    improving = "Your own source code is in" in messages[1]["content"]
    if steps == 0:
        return IMPROVE_STEP if improving else SOLVE_STEP
    if "exit code 0" not in messages[-1]["content"]:
        return "SUBMIT\ngave up: the command failed"
    return "SUBMIT\nlowered max_steps to 12" if improving else "SUBMIT\nwrote constant predictions"


@pytest.mark.docker
def test_coding_agent_and_self_modification_through_the_gateway(tmp_path: Path) -> None:
    with ScriptedLLM(competent) as llm:
        config = tmp_path / "study.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "study": {"name": "coder", "seeds": ["coding-agent"], "workers": 2},
                    "budget": {"evaluations": 6, "expansions": 2, "wall_time_s": 400},
                    "scheduler": {"name": "greedy"},
                    "proposer": {"name": "self", "timeout_s": 300},
                    "suite": {"name": "training", "subset": "smoke", "time_budget_s": 5},
                    "sandbox": {"name": "docker"},
                    "llm": {"base_url": llm.base_url, "api_key_env": None},
                    "tracking": {"mlflow": {"enabled": False}},
                }
            )
        )
        study_dir = tmp_path / "archive" / "coder"
        launched = launch.create(load_config(config), study_dir)
        try:
            launched.study.run(launched.runner, workers=2)
        finally:
            launched.close()
    index = launched.archive.index
    seed = next(a for a in index.agents.values() if a.parent_id is None)
    seed_evals = [e for e in index.evaluations.values() if e.agent_id == seed.id]
    assert seed_evals and all(e.error is None for e in seed_evals), [e.error for e in seed_evals]
    assert all(e.score >= 0.0 for e in seed_evals)
    children = [a for a in index.agents.values() if a.parent_id is not None]
    assert children, [f["reason"] for f in index.failed_expansions]
    child = children[0]
    assert child.meta["proposer"] == "self" and child.meta["summary"] == "lowered max_steps to 12"
    with GitArchive.open(study_dir, readonly=True) as archive, archive.checkout(child.id) as code:
        assert json.loads((code / "knobs.json").read_text())["max_steps"] == 12
    # Every call went through a gateway: metered, journaled as usage, and kept in the job's transcript.
    transcripts = list((study_dir / "logs").glob("*/llm.jsonl"))
    lines = [json.loads(x) for t in transcripts for x in t.read_text().splitlines()]
    assert lines and all(line["status"] == 200 for line in lines)
    assert index.tokens == sum(line["prompt_tokens"] + line["completion_tokens"] for line in lines)
    assert len(llm.requests) == len(lines)
    left = subprocess.run(
        ["docker", "ps", "-aq", "--filter", "label=metasearch.study=coder"], capture_output=True, text=True
    )
    assert left.stdout.strip() == ""


def _llm_study(tmp_path: Path, base_url: str, **overrides: Any) -> Path:
    data: dict[str, Any] = {
        "study": {"name": "llmrun", "seeds": ["coding-agent"], "workers": 1},
        "budget": {"evaluations": 4, "wall_time_s": 300},
        "scheduler": {"name": "greedy"},
        "proposer": {"name": "knobs"},
        "suite": {"name": "training", "subset": "smoke", "time_budget_s": 5},
        "sandbox": {"name": "local"},  # the seed is trusted; Docker is covered above
        "llm": {"base_url": base_url, "api_key_env": None, "max_retries": 1, "retry_backoff_s": 0.01},
        "tracking": {"mlflow": {"enabled": False}},
    }
    for key, value in overrides.items():
        data[key] = {**data[key], **value}
    config = tmp_path / "study.yaml"
    config.write_text(yaml.safe_dump(data))
    return config


def test_an_upstream_that_stays_down_stops_the_study_cleanly(tmp_path: Path) -> None:
    with ScriptedLLM([{"status": 503}]) as llm:
        config = _llm_study(tmp_path, llm.base_url)
        launched = launch.create(load_config(config), tmp_path / "a" / "down")
        try:
            reason = launched.study.run(launched.runner, workers=1)
        finally:
            launched.close()
    assert "infrastructure" in reason and "LLM upstream unavailable" in reason and "503" in reason, reason
    index = launched.archive.index
    assert index.evaluations == {}  # nothing was scored: an outage is not the candidate's fault
    assert not index.open_jobs  # the failed jobs went back to the queue for a resume
    assert len(llm.requests) == 3 * 2  # three jobs in a row, each: the call and one retry


def test_an_exhausted_token_budget_stops_the_study_and_resume_continues_it(tmp_path: Path) -> None:
    with ScriptedLLM(competent) as llm:
        config = _llm_study(tmp_path, llm.base_url, budget={"tokens": 150})
        study_dir = tmp_path / "a" / "tokens"
        launched = launch.create(load_config(config), study_dir)
        try:
            reason = launched.study.run(launched.runner, workers=1)
        finally:
            launched.close()
        assert "token budget" in reason, reason
        spent = launched.archive.index.tokens
        done = len(launched.archive.index.evaluations)
        # the budget holds (calls reserve their worst case first, so none runs past the cap) and what it
        # refused is not scored
        assert spent <= 150 and done < 2
        resumed = launch.reopen(study_dir, ["budget.tokens=100000"])
        try:
            reason = resumed.study.run(resumed.runner, workers=1)
        finally:
            resumed.close()
    index = resumed.archive.index
    assert "token budget" not in reason, reason
    assert len(index.evaluations) > done and index.tokens > spent
    seed = next(a for a in index.agents.values() if a.parent_id is None)
    assert {e.task_id for e in index.evaluations.values() if e.agent_id == seed.id} == set(
        resumed.runner.tasks
    )
