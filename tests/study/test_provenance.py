"""The provenance record and drift-refusing resume, end to end: a real study (local sandbox, KernelBench
problems in a temporary folder, the llm proposer against the scripted OpenAI-compatible server), resumed
after one score-deciding change at a time."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from metasearch import launch
from metasearch.archive import read_index
from metasearch.config import load_config
from metasearch.drift import DriftRefused
from metasearch.llm.scripted import ScriptedLLM
from metasearch.provenance import conditions_hash

PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * {factor}


batch_size = 4
dim = 8


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
"""


def _problems(root: Path) -> Path:
    level = root / "level1"
    level.mkdir(parents=True)
    for i in range(1, 5):
        (level / f"{i}_Scale.py").write_text(PROBLEM.format(factor=i))
    return root


def _config(tmp_path: Path, base_url: str, problems: Path, name: str = "prov", **over: Any) -> Path:
    data: dict[str, Any] = {
        "study": {"name": name, "seeds": ["trainer"], "workers": 1, "seed_evaluations": "none"},
        "budget": {"evaluations": 1, "expansions": 1, "wall_time_s": 300},
        "scheduler": {"name": "greedy"},
        "proposer": {"name": "llm", "temperature": 0.7},
        "suite": {"name": "kernelbench", "path": str(problems), "levels": [1], "device": "cpu"},
        "sandbox": {"name": "local"},
        "llm": {"base_url": base_url, "api_key_env": None, "max_retries": 0},
        "tracking": {"mlflow": {"enabled": False}},
    }
    for key, value in over.items():
        data[key] = {**data[key], **value}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _run(launched: launch.Launched) -> str:
    try:
        return launched.study.run(launched.runner, workers=1)
    finally:
        launched.close()


def test_the_record_is_written_once_at_creation_and_stamped_on_every_evaluation(tmp_path: Path) -> None:
    problems = _problems(tmp_path / "kb")
    with ScriptedLLM(["no change this time"], model="scripted-7b") as llm:
        study_dir = tmp_path / "a" / "prov"
        _run(launch.create(load_config(_config(tmp_path, llm.base_url, problems)), study_dir))
    record = json.loads((study_dir / "provenance.json").read_text())
    assert record["llm"]["model"] == "scripted-7b" and record["llm"]["served"] == ["scripted-7b"]
    assert record["llm"]["sampling"] == {
        "llm.max_tokens": 4096,
        "proposer.temperature": 0.7,
        "proposer.reply_tokens": 1024,
        "proposer.frequency_penalty": None,
    }
    assert record["sandbox"]["kind"] == "local" and record["scheduler"]["name"] == "greedy"
    assert record["seeds"] == {"study.seed": 0}
    assert set(record["suite"]["tasks"]) == {f"kernelbench/L1/{i}_Scale" for i in range(1, 5)}
    assert len(set(record["suite"]["tasks"].values())) == 4  # one content hash per task
    assert record["packages"]["mlflow"] and record["python"]["version"]
    revision = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent
    )
    assert record["metasearch"]["revision"] == revision.stdout.strip()
    # The archive's first commit (branch main) holds the same record and the frozen config.
    repo = study_dir / "repo"
    shown = subprocess.run(
        ["git", "-C", str(repo), "show", "main:provenance.json"], capture_output=True, text=True
    )
    assert json.loads(shown.stdout) == record
    first = subprocess.run(
        ["git", "-C", str(repo), "log", "--all", "--reverse", "--format=%s"], capture_output=True, text=True
    )
    assert first.stdout.splitlines()[0] == "study record"
    index = read_index(study_dir)
    assert index.conditions == conditions_hash(record)
    assert index.evaluations and all(e.conditions == index.conditions for e in index.evaluations.values())
    # Promotion mirrors the study to MLflow first: the study run and the model version carry the record.
    from mlflow import MlflowClient

    from metasearch.tracking import store
    from metasearch.tracking.promote import promote_agent

    result = promote_agent(study_dir, "a00000", "prov-agent")
    uri = store.default_tracking_uri(study_dir)
    client = MlflowClient(uri, registry_uri=uri)
    version = client.get_model_version("prov-agent", str(result["version"]))
    assert version.tags["provenance.llm.model"] == "scripted-7b"
    assert (
        version.tags["provenance.suite.tasks.kernelbench/L1/1_Scale"]
        == record["suite"]["tasks"]["kernelbench/L1/1_Scale"]
    )
    assert version.tags["metasearch.conditions"] == index.conditions
    assert version.tags["metasearch.conditions_match"] == "true"
    run = client.get_run(client.get_run(result["run_id"]).data.tags["mlflow.parentRunId"])
    assert run.data.tags["metasearch.provenance.conditions"] == index.conditions
    assert run.data.params["provenance.llm.sampling.proposer.temperature"] == "0.7"
    model_files = {Path(a.path).name for a in client.list_artifacts(result["run_id"], "model-prov-agent")}
    assert "provenance.json" in model_files


def test_resume_refuses_each_score_deciding_change_and_accept_drift_journals_it(tmp_path: Path) -> None:
    problems = _problems(tmp_path / "kb")
    study_dir = tmp_path / "a" / "prov"
    with ScriptedLLM(["no change this time"], model="scripted-7b") as llm:
        _run(launch.create(load_config(_config(tmp_path, llm.base_url, problems)), study_dir))
        first = read_index(study_dir).conditions

        def change_task() -> list[str]:
            (problems / "level1" / "2_Scale.py").write_text(PROBLEM.format(factor=20))
            return []

        def change_model() -> list[str]:
            llm.model = "scripted-8b"
            return []

        task = "suite.tasks.kernelbench/L1/2_Scale"
        changes = [  # (change, the score-deciding keys it changes, old, new)
            (change_task, [task, "suite.content_hash"], None, None),  # the suite hashes its files too
            (change_model, ["llm.model"], "scripted-7b", "scripted-8b"),
            (lambda: ["proposer.temperature=0.2"], ["llm.sampling.proposer.temperature"], "0.7", "0.2"),
        ]
        hashes = [first]
        for step, (change, keys, old, new) in enumerate(changes, start=2):
            key = keys[0]
            overrides = [*change(), f"budget.evaluations={step}"]
            with pytest.raises(DriftRefused) as refused:
                launch.reopen(study_dir, overrides)
            message = str(refused.value)
            assert key in message and "--accept-drift" in message, message
            assert sorted(d["key"] for d in refused.value.differences) == sorted(keys)  # only that change
            if old is not None:
                assert f"{key}: {old} -> {new}" in message, message
            assert read_index(study_dir).conditions == hashes[-1]  # nothing was written
            _run(launch.reopen(study_dir, overrides, accept_drift=True))
            index = read_index(study_dir)
            event = index.drift[-1]
            assert sorted(d["key"] for d in event["differences"] if d["score_deciding"]) == sorted(keys)
            assert index.conditions == event["conditions"] not in hashes
            hashes.append(index.conditions)
            # The evaluation made after the change carries the new conditions; the older ones keep theirs.
            stamped = [e.conditions for e in sorted(index.evaluations.values(), key=lambda e: e.finished_at)]
            assert stamped == hashes, stamped
        # Resuming again under the accepted conditions needs no flag.
        _run(launch.reopen(study_dir, ["proposer.temperature=0.2", "budget.evaluations=5"]))
    assert len(read_index(study_dir).drift) == 3


def test_harmless_changes_are_warnings_and_resume_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    problems = _problems(tmp_path / "kb")
    study_dir = tmp_path / "a" / "prov"
    with ScriptedLLM(["no change this time"]) as llm:
        _run(launch.create(load_config(_config(tmp_path, llm.base_url, problems)), study_dir))
        path = study_dir / "provenance.json"
        record = json.loads(path.read_text())
        record["packages"]["mlflow"] = "2.0.0"  # as if the study had been created under an older MLflow
        path.write_text(json.dumps(record))
        with caplog.at_level(logging.WARNING, logger="metasearch.drift"):
            _run(launch.reopen(study_dir, ["scheduler.alpha=0.5", "budget.evaluations=2"]))
    warned = "\n".join(r.getMessage() for r in caplog.records)
    assert "packages.mlflow: 2.0.0 ->" in warned and "scheduler.options.alpha: 0.6 -> 0.5" in warned
    assert read_index(study_dir).drift == []  # nothing to accept


CLI = [sys.executable, "-m", "metasearch.cli"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_BASE_URL"}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, env=env)


def test_cli_resume_status_and_diff_runs(tmp_path: Path) -> None:
    problems = _problems(tmp_path / "kb")
    a, b = tmp_path / "a" / "one", tmp_path / "a" / "two"
    with ScriptedLLM(["no change this time"]) as llm:
        _run(launch.create(load_config(_config(tmp_path, llm.base_url, problems, "one")), a))
        hot = _config(tmp_path, llm.base_url, problems, "two", proposer={"temperature": 1.1})
        _run(launch.create(load_config(hot), b))
        refused = _cli("resume", str(a), "-o", "proposer.temperature=0.3")
        assert refused.returncode == 2, refused.stderr
        assert "llm.sampling.proposer.temperature: 0.7 -> 0.3" in refused.stderr, refused.stderr
        accepted = _cli(
            "resume", str(a), "-o", "proposer.temperature=0.3", "-o", "budget.evaluations=2", "--accept-drift"
        )
        assert accepted.returncode == 0, accepted.stderr
    assert read_index(a).drift[-1]["differences"][0]["key"] == "llm.sampling.proposer.temperature"
    # The mirror puts the accepted drift on the study run and both conditions on the seed's run.
    from mlflow import MlflowClient

    from metasearch.tracking import store
    from metasearch.tracking.mlflow_callback import sync

    sync(a)
    client = MlflowClient(store.default_tracking_uri(a))
    exp = store.find_experiment(client, a, "one")
    assert exp is not None
    [study_run] = store.runs_by_kind(client, exp, "study")
    assert study_run.data.tags["metasearch.drift_accepted"] == "llm.sampling.proposer.temperature: 0.7 -> 0.3"
    assert study_run.data.tags["metasearch.provenance.conditions"] == read_index(a).conditions
    [seed_run] = store.runs_by_kind(client, exp, "agent")
    stamped = {e.conditions for e in read_index(a).evaluations.values()}
    assert len(stamped) == 2 and seed_run.data.tags["metasearch.conditions"] == ",".join(sorted(stamped))
    status = json.loads(_cli("status", str(a), "--json").stdout)
    headline = status["provenance"]
    assert headline["model"] == "scripted" and headline["image"] == "local"
    assert headline["suite"].startswith("kernelbench 4 tasks @ ") and headline["drift_accepted"] == 1
    assert headline["conditions"] == read_index(a).conditions
    assert "conditions" in _cli("status", str(a)).stdout
    diff = _cli("diff-runs", str(a), str(b))
    assert diff.returncode == 1 and "NOT comparable" in diff.stdout, diff.stdout + diff.stderr
    assert "llm.sampling.proposer.temperature: 0.3 -> 1.1" in diff.stdout, diff.stdout
    same = _cli("diff-runs", str(a), str(a), "--json")
    assert same.returncode == 0 and json.loads(same.stdout)["comparable"] is True


def _build(tag: str, label: str) -> str:
    from metasearch.sandboxes.images import default_image_tag

    dockerfile = f"FROM {default_image_tag()}\nLABEL metasearch.test.provenance={label}\n"
    done = subprocess.run(
        ["docker", "build", "-q", "-t", tag, "-"], input=dockerfile, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", tag], capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.mark.docker
def test_resume_refuses_a_rebuilt_image_behind_the_same_tag(
    tmp_path: Path, docker_sandbox_factory: Any
) -> None:
    import uuid

    tag = f"metasearch-provenance-test-{uuid.uuid4().hex[:8]}:latest"
    built = [_build(tag, "one")]
    try:
        problems = _problems(tmp_path / "kb")
        study_dir = tmp_path / "a" / "prov"
        with ScriptedLLM(["no change this time"]) as llm:
            config = _config(tmp_path, llm.base_url, problems, sandbox={"name": "docker", "image": tag})
            launch.create(load_config(config), study_dir).close()
            record = json.loads((study_dir / "provenance.json").read_text())
            assert record["sandbox"]["image"] == tag and record["sandbox"]["image_id"] == built[0]
            built.append(_build(tag, "two"))  # `docker build` again: same tag, another image
            with pytest.raises(DriftRefused) as refused:
                launch.reopen(study_dir)
            assert [d["key"] for d in refused.value.differences] == ["sandbox.image_id"]
            assert f"sandbox.image_id: {built[0]} -> {built[1]}" in str(refused.value)
            launch.reopen(study_dir, accept_drift=True).close()
        event = read_index(study_dir).drift[-1]
        assert [(d["key"], d["new"]) for d in event["differences"]] == [("sandbox.image_id", built[1])]
    finally:
        subprocess.run(["docker", "rmi", "-f", tag, *built], capture_output=True)


def test_a_study_without_a_record_gets_one_on_resume(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    problems = _problems(tmp_path / "kb")
    study_dir = tmp_path / "a" / "prov"
    with ScriptedLLM(["no change this time"]) as llm:
        _run(launch.create(load_config(_config(tmp_path, llm.base_url, problems)), study_dir))
        (study_dir / "provenance.json").unlink()  # as a study created before metasearch kept records
        with caplog.at_level(logging.WARNING, logger="metasearch.launch"):
            _run(launch.reopen(study_dir, ["proposer.temperature=1.5", "budget.evaluations=2"]))
    assert "no provenance record" in caplog.text
    index = read_index(study_dir)
    [event] = index.drift
    assert event["differences"] == [] and event["record"]["llm"]["sampling"]["proposer.temperature"] == 1.5
    latest = max(index.evaluations.values(), key=lambda e: e.finished_at)
    assert latest.conditions == index.conditions == conditions_hash(event["record"])
    with ScriptedLLM(["no change this time"]) as llm, pytest.raises(DriftRefused, match=r"1\.5 -> 0\.7"):
        launch.reopen(study_dir, [f"llm.base_url={llm.base_url}"])  # compared with the record made then


def test_gpu_models_decide_scores_and_the_driver_is_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from metasearch.drift import compare
    from metasearch.provenance import gpu_record

    smi = tmp_path / "bin" / "nvidia-smi"  # what the real tool prints for this query on a two-GPU host
    smi.parent.mkdir()
    smi.write_text(
        "#!/bin/sh\necho 'NVIDIA H100 80GB HBM3, 550.54.15'\necho 'NVIDIA H100 80GB HBM3, 550.54.15'\n"
    )
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}{os.pathsep}{os.environ['PATH']}")
    gpu = gpu_record()
    assert gpu == {"models": ["NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"], "driver": "550.54.15"}
    base = {"sandbox": {"kind": "docker"}, "gpu": gpu, "python": {"version": "3.11.7"}}
    newer_driver = {**base, "gpu": {**gpu, "driver": "560.1"}, "python": {"version": "3.11.9"}}
    drift = compare(base, newer_driver)
    assert drift.deciding == [] and [d["key"] for d in drift.harmless] == ["gpu.driver", "python.version"]
    other_card = {**base, "gpu": {**gpu, "models": ["NVIDIA H200"]}}
    assert [d["key"] for d in compare(base, other_card).deciding] == ["gpu.models"]
    # With local sandboxes the host's interpreter runs the graders: its version decides scores too.
    local = {**base, "sandbox": {"kind": "local"}}
    assert [d["key"] for d in compare(local, {**local, "python": {"version": "3.12.1"}}).deciding] == [
        "python.version"
    ]


def test_a_commit_outside_the_package_is_no_drift_and_a_change_inside_is() -> None:
    """A new commit that leaves the package's files alone (docs, tests) keeps scores comparable; a change to
    the package (committed: its tree; uncommitted: the digest of the change) does not."""
    from metasearch.drift import compare
    from metasearch.provenance import source_revision

    today = source_revision()
    tree = subprocess.run(
        ["git", "rev-parse", "HEAD:metasearch"], capture_output=True, text=True, cwd=Path(__file__).parent
    )
    assert today["tree"] == tree.stdout.strip()
    base = {
        "metasearch": {
            "version": "0.1.0",
            "revision": "a" * 40,
            "tree": "t1",
            "dirty": False,
            "changes": None,
        }
    }
    docs_only = {"metasearch": {**base["metasearch"], "revision": "b" * 40}}
    drift = compare(base, docs_only)
    assert drift.deciding == [] and [d["key"] for d in drift.harmless] == ["metasearch.revision"]
    code = {"metasearch": {**base["metasearch"], "revision": "c" * 40, "tree": "t2"}}
    assert [d["key"] for d in compare(base, code).deciding] == ["metasearch.tree"]
    edited = {"metasearch": {**base["metasearch"], "dirty": True, "changes": "0123abcd"}}
    assert [d["key"] for d in compare(base, edited).deciding] == ["metasearch.changes"]
