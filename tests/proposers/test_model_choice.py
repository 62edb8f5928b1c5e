"""Two models in a real study (git archive, local sandbox, training suite), each a scripted OpenAI-compatible
server of its own: the bandit gives both expansions, both write children, each child and transcript names
its model, each call is priced at its model's price, and the per-model tallies appear in ``status``,
``status --json`` and the study's MLflow run."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import yaml
from mlflow import MlflowClient
from test_llm_proposer import SOLVE, write_seed

from metasearch import launch
from metasearch.archive import read_index
from metasearch.config import load_config
from metasearch.llm.scripted import ScriptedLLM
from metasearch.report import status_dict
from metasearch.tracking import store
from metasearch.tracking.mlflow_callback import sync


def whole_file(n: int) -> str:
    """A reply that rewrites solve.py with a new comment: always a change, whatever the parent."""
    return f"Note attempt {n} in solve.py.\n\nsolve.py\n```python\n# attempt {n}\n{SOLVE}```\n"


def scripted(name: str, calls: Counter[str]) -> Any:
    def script(body: dict[str, Any]) -> str:
        calls[name] += 1
        return whole_file(sum(calls.values()))

    return script


def test_two_models_write_children_and_their_tallies_show(tmp_path: Path) -> None:
    seed = write_seed(tmp_path / "seed")
    calls: Counter[str] = Counter()
    with (
        ScriptedLLM(scripted("small", calls), model="smol-135m") as small,
        ScriptedLLM(scripted("large", calls), model="gemma-270m") as large,
    ):
        config = tmp_path / "study.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "study": {"name": "two", "seeds": [str(seed)], "workers": 1},
                    "budget": {"evaluations": 20, "expansions": 6, "wall_time_s": 300},
                    "scheduler": {"name": "greedy"},
                    "proposer": {"name": "llm", "edit_format": "whole"},
                    "suite": {"name": "training", "subset": "smoke", "time_budget_s": 2},
                    "sandbox": {"name": "local"},
                    "llm": {
                        "api_key_env": None,
                        "choose": "bandit",
                        "models": [
                            {"name": "small", "base_url": small.base_url},
                            {"name": "large", "base_url": large.base_url, "price_input_per_mtok": 2.0},
                        ],
                    },
                    "tracking": {"mlflow": {"enabled": False}},
                }
            )
        )
        study_dir = tmp_path / "archive" / "two"
        launched = launch.create(load_config(config), study_dir)
        try:
            launched.study.run(launched.runner, workers=1)
        finally:
            launched.close()
    index = launched.archive.index
    failures = [f["reason"] for f in index.failed_expansions]
    by_model = Counter(a.meta.get("model") for a in index.agents.values() if a.parent_id is not None)
    assert set(by_model) == {"small", "large"}, (by_model, failures)
    assert calls["small"] >= 2 and calls["large"] >= 2  # each model is tried at least twice first
    child = next(a for a in index.agents.values() if a.meta.get("model") == "large")
    transcript = [json.loads(line) for line in Path(child.meta["transcript_path"]).read_text().splitlines()]
    assert {"model": "large", "served": "gemma-270m"} in transcript

    data = status_dict(study_dir)
    assert list(data)[-1] == "models"  # appended: the keys before it keep their order
    tallies = data["models"]
    assert list(tallies) == ["small", "large"]
    for name in ("small", "large"):
        assert tallies[name]["children"] == by_model[name]
        assert tallies[name]["expansions"] >= tallies[name]["children"]
        assert tallies[name]["tokens"] > 0 and tallies[name]["running"] == 0
    assert tallies["small"]["cost_usd"] == 0.0 and tallies["large"]["cost_usd"] > 0.0
    assert sum(t["tokens"] for t in tallies.values()) == index.tokens  # every call was the meta-agent's
    assert read_index(study_dir).models.pulls() == index.models.pulls()  # rebuilt from the journal alone

    mirrored = sync(study_dir)
    client = MlflowClient(mirrored["tracking_uri"])
    (run,) = [
        r for r in client.search_runs([mirrored["experiment_id"]]) if r.data.tags.get(store.KIND) == "study"
    ]
    assert run.data.metrics["models.small.children"] == by_model["small"]
    assert run.data.metrics["models.large.tokens"] == tallies["large"]["tokens"]
    assert run.data.params["llm.models.large.price_input_per_mtok"] == "2.0"
    agent_models = {
        r.data.params.get("model")
        for r in client.search_runs([mirrored["experiment_id"]])
        if r.data.tags.get(store.KIND) == "agent" and r.data.params.get("parent_id") != "none"
    }
    assert agent_models == {"small", "large"}
