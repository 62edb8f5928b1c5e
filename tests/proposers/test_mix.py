"""``mix``: one of several proposers per expansion, by weight, deterministic per job id; in a real study
with the scripted LLM both members produce children and each child records which one made it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from test_llm_proposer import GOOD, write_seed

from metasearch import launch
from metasearch.config import load_config
from metasearch.llm.config import LLMSection
from metasearch.llm.scripted import ScriptedLLM
from metasearch.proposers.mix import MixProposer

KNOBS = """
[knobs]
file = "knobs.json"
[knobs.params.threshold]
type = "float"
low = 0.0
high = 1.0
"""


def test_the_pick_is_deterministic_and_follows_the_weights(tmp_path: Path) -> None:
    config = MixProposer.Config(weights={"llm": 0.8, "knobs": 0.2})
    mix = MixProposer(
        config, study_dir=tmp_path, llm=LLMSection(base_url="http://127.0.0.1:9", api_key_env=None)
    )
    picks = [mix.choose(f"job-{i}") for i in range(4000)]
    assert picks == [mix.choose(f"job-{i}") for i in range(4000)]  # a resumed study picks the same
    assert 0.77 < picks.count("llm") / len(picks) < 0.83


def test_both_members_make_children_in_a_study(tmp_path: Path) -> None:
    seed = write_seed(tmp_path / "seed")
    (seed / "agent.toml").write_text((seed / "agent.toml").read_text() + KNOBS)
    (seed / "knobs.json").write_text('{"threshold": 0.5}\n')
    calls: list[int] = []

    def script(body: dict[str, Any]) -> str:
        calls.append(1)
        return GOOD if len(calls) == 1 else "no idea"

    with ScriptedLLM(script) as llm:
        config = tmp_path / "study.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "study": {"name": "mixed", "seeds": [str(seed)], "workers": 1},
                    # each expansion picks a member at random (by its job id): with evaluations to spare
                    # for ten expansions, one member misses them all once in 512 runs
                    "budget": {"evaluations": 60, "expansions": 10, "wall_time_s": 300},
                    "scheduler": {"name": "greedy"},
                    "proposer": {"name": "mix", "weights": {"llm": 0.5, "knobs": 0.5}},
                    "suite": {"name": "training", "subset": "smoke", "time_budget_s": 2},
                    "sandbox": {"name": "local"},
                    "llm": {"base_url": llm.base_url, "api_key_env": None},
                    "tracking": {"mlflow": {"enabled": False}},
                }
            )
        )
        launched = launch.create(load_config(config), tmp_path / "archive" / "mixed")
        try:
            launched.study.run(launched.runner, workers=1)
        finally:
            launched.close()
    index = launched.archive.index
    made_by = {a.meta.get("proposer") for a in index.agents.values() if a.parent_id is not None}
    assert made_by == {"llm", "knobs"}, (made_by, [f["reason"] for f in index.failed_expansions])
    assert calls, "the llm member was asked"
