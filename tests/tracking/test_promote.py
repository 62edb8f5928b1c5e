"""Promotion: registry version + alias + git tag, `mlflow models predict` on the alias, the held-out gate."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from mlflow import MlflowClient
from tracking_helpers import VENV_BIN, make_archive, run_study

from metasearch.archive import GitArchive
from metasearch.errors import ArchiveError, ConfigError
from metasearch.tracking import store
from metasearch.tracking.mirror import JournalMirror
from metasearch.tracking.promote import PromotionRefused, promote_agent, refuse_links
from metasearch.types import Evaluation


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_promote_registers_aliases_and_tags_and_the_alias_predicts(tmp_path: Path) -> None:
    archive = make_archive(tmp_path)
    run_study(archive, budget=8)
    evaluations = archive.index.evaluations.values()
    flagged = {ev.agent_id for ev in evaluations if ev.flags}  # never promotable (the fake flags some)
    evaluated = [ev.agent_id for ev in evaluations if ev.agent_id != "a00000" and ev.agent_id not in flagged]
    best = max(
        set(evaluated), key=evaluated.count
    )  # a child with evaluations (its code differs from the seed)
    result = promote_agent(archive.root, best, "tiny-agent")
    agent = archive.get(best)
    assert result["version"] == 1 and result["model_uri"] == "models:/tiny-agent@production"
    assert result["git_tag"] == "promoted/tiny-agent/v1"
    assert git(archive.repo, "rev-parse", "promoted/tiny-agent/v1^{commit}") == agent.commit

    uri = store.default_tracking_uri(archive.root)
    client = MlflowClient(uri, registry_uri=uri)
    version = client.get_model_version_by_alias("tiny-agent", "production")
    assert str(version.version) == "1" and version.run_id == result["run_id"]
    assert version.tags["metasearch.agent_id"] == best and version.tags["metasearch.commit"] == agent.commit
    own = [ev.score for ev in archive.index.evaluations.values() if ev.agent_id == best]
    assert float(version.tags["metasearch.own_mean"]) == pytest.approx(sum(own) / len(own), abs=1e-6)
    assert version.tags["metasearch.trials"] == str(len(own))
    # the pyfunc declares its requirements: MLflow and pandas for the model code; the agent imports none
    reqs = Path(
        client.download_artifacts(result["run_id"], "model-tiny-agent/requirements.txt", str(tmp_path))
    )
    assert reqs.read_text().split() == [f"mlflow=={mlflow.__version__}", "pandas"]
    run = client.get_run(result["run_id"])
    assert (
        run.data.tags[store.AGENT_ID] == best
        and run.data.tags["metasearch.promoted"] == "tiny-agent/v1@production"
    )

    # The real CLI on the alias URI runs the promoted agent's solve on a task directory.
    task = tmp_path / "task"
    task.mkdir()
    (tmp_path / "input.json").write_text(
        json.dumps({"dataframe_split": {"columns": ["task_dir"], "data": [[str(task)]]}})
    )
    done = subprocess.run(
        [str(VENV_BIN / "mlflow"), "models", "predict", "-m", "models:/tiny-agent@production",
         "-i", str(tmp_path / "input.json"), "-o", str(tmp_path / "out.json"), "--env-manager", "local"],
        env={**os.environ, "MLFLOW_TRACKING_URI": uri}, capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    [row] = json.loads((tmp_path / "out.json").read_text())["predictions"]
    assert row["status"] == "ok" and row["exit_code"] == 0
    answer = task / "output" / "answer.txt"
    assert row["artifacts"] == [str(answer)]  # the training suite's artifact path is output/
    quality = git(archive.repo, "show", f"{agent.commit}:quality.txt")
    assert answer.read_text() == f"solved task with quality {quality}\n"

    # Promoting another agent moves the alias; the old version stays addressable.
    second = promote_agent(archive.root, "a00000", "tiny-agent")
    assert second["version"] == 2
    assert str(client.get_model_version_by_alias("tiny-agent", "production").version) == "2"
    assert git(archive.repo, "rev-parse", "promoted/tiny-agent/v2^{commit}") == archive.get("a00000").commit
    model = mlflow.pyfunc.load_model(second["source"])
    task2 = tmp_path / "task2"
    task2.mkdir()
    out = model.predict(pd.DataFrame({"task_dir": [str(task2)]}))
    assert out["status"].tolist() == ["ok"]
    assert (task2 / "output" / "answer.txt").read_text().endswith("quality 0.3\n")  # the seed's own code
    archive.close()


def test_an_old_journals_lone_surrogates_stall_neither_the_mirror_nor_promotion(tmp_path: Path) -> None:
    """Lines a version before ``utf8_text`` wrote (a non-UTF-8 file name quoted in an error, a summary) carry
    lone surrogates; the mirror and promotion send them to MLflow as their escapes, and go on."""
    archive = make_archive(tmp_path)
    with archive.checkout("a00000") as ws:
        (ws / "quality.txt").write_text("0.5\n")
        child = archive.add_child("a00000", ws, job_id="x1", meta={"summary": "made @NAME@"})
    error = "agent run failed: link out of the tree: /task/@NAME@ -> /etc"
    archive.record(Evaluation("e1", child.id, "t0", 0.0, metrics={"@NAME@": 1.0}, error=error))
    archive.close()
    journal = archive.root / "journal.jsonl"
    journal.write_text(journal.read_text().replace("@NAME@", "\\udcff"))  # os.fsdecode(b"\xff"), escaped
    assert "\udcff" in json.loads(journal.read_text().splitlines()[-1])["evaluation"]["error"]

    mirror = JournalMirror(archive.root)
    assert mirror.catch_up() > 0 and mirror.step() == 0
    assert mirror.draw_lineage(force=True)  # the lineage text holds the summary
    client = MlflowClient(mirror.tracking_uri, registry_uri=mirror.tracking_uri)
    run = client.get_run(mirror.runs[child.id])
    assert run.data.tags["metasearch.last_error"] == error.replace("@NAME@", "\\udcff")
    assert "made \\udcff" in run.data.tags["mlflow.note.content"]

    result = promote_agent(archive.root, child.id, "escaped")
    assert client.get_model_version("escaped", str(result["version"])).description == "made \\udcff"


def test_promotion_refuses_a_tree_with_links_mlflow_would_follow(tmp_path: Path) -> None:
    """MLflow copies what links point to: a chain of links to folders (2^k copies), a link out of the tree or
    to nothing is refused before anything is registered; a link to a file inside is copied as that file."""
    archive = make_archive(tmp_path)
    with archive.checkout("a00000") as ws:
        for i in range(4):
            (ws / f"d{i}").mkdir()
        (ws / "d3" / "leaf.txt").write_text("z\n")
        for i in range(3):
            for name in ("x", "y"):
                (ws / f"d{i}" / name).symlink_to(f"../d{i + 1}")
        child = archive.add_child("a00000", ws, job_id="x1")
    archive.close()
    with pytest.raises(PromotionRefused, match=r"d0/x -> \.\./d1 \(a folder\).* and 1 more"):
        promote_agent(archive.root, child.id, "linked")
    client = MlflowClient(store.default_tracking_uri(archive.root))
    assert client.search_registered_models() == []

    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "m.py").write_text("x = 1\n")
    (tree / "alias.py").symlink_to("pkg/m.py")
    refuse_links(tree, "a1")  # a link to a file inside: kept (as a copy)
    (tree / "gone").symlink_to("missing")
    (tree / "pkg" / "out").symlink_to(tmp_path)
    with pytest.raises(
        PromotionRefused, match=r"gone -> missing \(nothing\); pkg/out -> .* \(out of the tree\)"
    ):
        refuse_links(tree, "a1")


def test_promotion_refuses_bad_input_before_touching_mlflow(tmp_path: Path) -> None:
    archive = make_archive(tmp_path)
    with pytest.raises(ArchiveError, match="a99999"):
        promote_agent(archive.root, "a99999")
    with pytest.raises(ConfigError, match="--name"):
        promote_agent(archive.root, "a00000", "no spaces please")
    with pytest.raises(ConfigError, match="SUITE:THRESHOLD"):
        promote_agent(archive.root, "a00000", gate="training")
    with pytest.raises(ConfigError, match="SUITE:THRESHOLD"):
        promote_agent(archive.root, "a00000", gate="training:1.5")
    assert not (archive.root / "mlflow.db").exists()
    archive.close()


GATE_CONFIG = """study: {name: g, seeds: [const]}
budget: {evaluations: 10}
scheduler: {name: hgm}
suite: {name: training, time_budget_s: 5, grade_timeout_s: 60}
sandbox: {name: local}
"""

SOLVE = """import json, pathlib, sys
import numpy as np
task = pathlib.Path(sys.argv[1])
info = json.loads((task / "task.json").read_text())
x, y, test = (np.load(task / f) for f in ("train_x.npy", "train_y.npy", "test_x.npy"))
(task / "output").mkdir(exist_ok=True)
if MODE == "constant":
    pred = np.zeros(len(test))
else:  # least squares on standardised features (one-vs-rest for classes)
    mu, sd = x.mean(0), x.std(0) + 1e-9
    a = np.c_[(x - mu) / sd, np.ones(len(x))]
    b = np.c_[(test - mu) / sd, np.ones(len(test))]
    if info["kind"] == "regression":
        pred = b @ np.linalg.lstsq(a, y, rcond=None)[0]
    else:
        onehot = np.eye(info["classes"])[y.astype(int)]
        pred = (b @ np.linalg.lstsq(a, onehot, rcond=None)[0]).argmax(1)
np.save(task / "output" / "predictions.npy", pred)
"""


def tabular_agent(dest: Path, mode: str) -> Path:
    dest.mkdir(parents=True)
    (dest / "agent.toml").write_text(
        f'name = "{mode}"\n[entry]\nsolve = ["python3", "solve.py", "{{task_dir}}"]\n'
    )
    (dest / "solve.py").write_text(f"MODE = {mode!r}\n" + SOLVE)
    return dest


def test_the_heldout_gate_refuses_a_weak_agent_and_passes_a_good_one(tmp_path: Path) -> None:
    archive = GitArchive.create(tmp_path / "g", study="g", config_text=GATE_CONFIG)
    weak = archive.add_seed("constant", tabular_agent(tmp_path / "constant", "constant"), job_id="seed-c")
    good = archive.add_seed("linear", tabular_agent(tmp_path / "linear", "linear"), job_id="seed-l")
    with pytest.raises(PromotionRefused) as refused:
        promote_agent(archive.root, weak.id, "tabular", gate="training:0.3")
    assert set(refused.value.result.scores) == {"training/moons", "training/friedman"}  # the heldout subset
    assert refused.value.result.mean < 0.3
    assert not (archive.root / "mlflow.db").exists(), "a refused agent registers nothing"

    result = promote_agent(archive.root, good.id, "tabular", gate="training:0.3")
    gate = result["gate"]
    assert gate["passed"] and gate["mean"] >= 0.3 and not gate["errors"], gate
    uri = store.default_tracking_uri(archive.root)
    version = MlflowClient(uri, registry_uri=uri).get_model_version_by_alias("tabular", "production")
    assert version.tags["metasearch.gate"] == "training:0.3"
    assert float(version.tags["metasearch.gate_mean"]) == pytest.approx(gate["mean"], rel=1e-5)
    assert (
        version.tags["metasearch.gate_subset"] == "heldout" and version.tags["metasearch.suite"] == "training"
    )
    client = MlflowClient(uri, registry_uri=uri)
    model_dir = Path(client.download_artifacts(result["run_id"], "model-tabular", str(tmp_path / "m")))
    numpy_pin = f"numpy=={importlib.metadata.version('numpy')}"
    assert numpy_pin in (model_dir / "requirements.txt").read_text().split()  # the agent imports numpy
    assert "torch" not in (model_dir / "requirements.txt").read_text()  # and not torch
    assert (model_dir / "artifacts" / "agent" / "requirements.txt").read_text().split() == [numpy_pin]
    archive.close()
