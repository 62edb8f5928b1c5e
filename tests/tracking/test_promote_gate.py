"""The held-out gate beyond the training suite: a coding agent found for code-edit, gated in Docker on the
tasks its search never evaluated, talking to the study's LLM endpoint (the scripted server) through the
job's gateway; the registered version records the gate's numbers, the suite and the commit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient
from test_e2e_coding_agent import FIX_TEXTSTATS, script_for

from metasearch.archive import GitArchive
from metasearch.errors import ConfigError
from metasearch.launch import resolve_seed
from metasearch.llm.scripted import ScriptedLLM
from metasearch.suites.code_edit import CodeEditSuite
from metasearch.tracking import store
from metasearch.tracking.heldout import heldout_tasks
from metasearch.tracking.promote import promote_agent
from metasearch.types import Evaluate, Evaluation

SEEN = ("code-edit/intervals", "code-edit/pagination", "code-edit/shop")


def config(base_url: str) -> str:
    return f"""study: {{name: ce, seeds: [coding-agent]}}
budget: {{evaluations: 10}}
suite: {{name: code-edit, subset: all}}
sandbox: {{name: docker}}
llm: {{base_url: "{base_url}", api_key_env: null, model: scripted}}
"""


def study_that_saw(tmp_path: Path, base_url: str, seen: tuple[str, ...]) -> tuple[GitArchive, str]:
    """A code-edit study whose seed (the coding agent) was evaluated on ``seen`` during the search."""
    archive = GitArchive.create(tmp_path / "ce", study="ce", config_text=config(base_url))
    agent = archive.add_seed("coding-agent", resolve_seed("coding-agent"), job_id="seed-ce")
    for i, task in enumerate(seen):
        job = Evaluate(agent_id=agent.id, task_id=task, job_id=f"ev-{i}")
        archive.start_job(job)
        archive.record(Evaluation(job.job_id, agent.id, task, score=0.0))
    return archive, agent.id


def test_heldout_tasks_are_the_suites_subset_or_the_tasks_never_evaluated() -> None:
    suite = CodeEditSuite()  # no "heldout" subset: every task the search never evaluated
    subset, tasks = heldout_tasks(suite, set(SEEN))
    assert subset == "unseen" and [t.id for t in tasks] == ["code-edit/textstats"]
    with pytest.raises(ConfigError, match="never evaluated"):
        heldout_tasks(suite, {t.id for t in suite.tasks("all")})
    from metasearch.suites.training import TrainingSuite

    training = TrainingSuite(TrainingSuite.Config())
    subset, tasks = heldout_tasks(training, set())
    assert subset == "heldout" and {t.id for t in tasks} == {"training/moons", "training/friedman"}
    subset, tasks = heldout_tasks(training, {"training/moons"})  # seen during the search: left out
    assert [t.id for t in tasks] == ["training/friedman"]


@pytest.mark.docker
def test_a_coding_agent_is_gated_on_unseen_code_edit_tasks_with_the_study_llm(
    docker_sandbox_factory: Any, tmp_path: Path
) -> None:
    docker_sandbox_factory()  # skips (or fails in CI) without Docker and the sandbox image
    steps = ["First read the task.\n```bash\ncat TASK.md && ls repo\n```", FIX_TEXTSTATS]
    with ScriptedLLM(script_for(steps)) as llm:
        archive, agent_id = study_that_saw(tmp_path, llm.base_url, SEEN)
        result = promote_agent(archive.root, agent_id, "coder", gate="code-edit:0.9")
        assert len(llm.requests) == 3, "the agent talked to the study's endpoint through the gateway"
    gate = result["gate"]
    assert gate["subset"] == "unseen" and gate["scores"] == {"code-edit/textstats": 1.0}, gate
    assert gate["passed"] and not gate["errors"]
    uri = store.default_tracking_uri(archive.root)
    version = MlflowClient(uri, registry_uri=uri).get_model_version_by_alias("coder", "production")
    tags = version.tags
    assert tags["metasearch.commit"] == archive.get(agent_id).commit
    assert tags["metasearch.suite"] == "code-edit" and tags["metasearch.gate_suite"] == "code-edit"
    assert tags["metasearch.gate_subset"] == "unseen" and tags["metasearch.gate_tasks"] == "1"
    assert tags["metasearch.gate_threshold"] == "0.9" and tags["metasearch.gate_passed"] == "true"
    assert float(tags["metasearch.gate_mean"]) == 1.0 and tags["metasearch.gate.code-edit/textstats"] == "1"
    archive.close()


def test_an_llm_agent_is_refused_a_gate_when_the_study_has_no_endpoint(tmp_path: Path) -> None:
    archive = GitArchive.create(
        tmp_path / "ce", study="ce", config_text=config("").replace('base_url: ""', "base_url: null")
    )
    agent = archive.add_seed("coding-agent", resolve_seed("coding-agent"), job_id="seed-ce")
    with pytest.raises(ConfigError, match=r"llm\.base_url"):
        promote_agent(archive.root, agent.id, "coder", gate="code-edit:0.5")
    assert not (archive.root / "mlflow.db").exists()
    archive.close()


def test_a_gate_whose_tasks_were_all_seen_is_refused_naming_the_suite(tmp_path: Path) -> None:
    archive, agent_id = study_that_saw(tmp_path, "http://127.0.0.1:9/v1", (*SEEN, "code-edit/textstats"))
    with pytest.raises(ConfigError, match="code-edit"):
        promote_agent(archive.root, agent_id, "coder", gate="code-edit:0.5")
    archive.close()
