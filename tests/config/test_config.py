from __future__ import annotations

from pathlib import Path

import pytest

from metasearch.config import apply_overrides, load_config, load_config_data
from metasearch.errors import ConfigError


def test_defaults_resolve_every_plugin() -> None:
    resolved = load_config_data({})
    assert set(resolved.plugins) == {"scheduler", "proposer", "suite"}
    assert resolved.config.scheduler.name == "hgm"
    assert resolved.plugins["scheduler"].config.model_dump()["alpha"] == pytest.approx(0.6)


def test_plugin_options_reach_the_plugin_config() -> None:
    resolved = load_config_data({"scheduler": {"name": "hgm", "alpha": 0.5}})
    assert resolved.plugins["scheduler"].config.model_dump()["alpha"] == pytest.approx(0.5)


def test_overrides_parse_yaml_scalars() -> None:
    data = apply_overrides({}, ["scheduler.alpha=0.4", "study.workers=3", "study.seeds=[a, b]"])
    assert data == {"scheduler": {"alpha": 0.4}, "study": {"workers": 3, "seeds": ["a", "b"]}}
    resolved = load_config_data({}, ["budget.evaluations=7"])
    assert resolved.config.budget.evaluations == 7


@pytest.mark.parametrize(
    ("data", "overrides", "needle"),
    [
        ({"studdy": {}}, [], "studdy: Extra inputs are not permitted"),
        ({"study": {"wrokers": 2}}, [], "study.wrokers"),
        ({"study": {"workers": 0}}, [], "study.workers"),
        (
            {"scheduler": {"name": "hgmm"}},
            [],
            "scheduler.name: unknown scheduler 'hgmm'; allowed: dgm, gea, greedy, hgm",
        ),
        ({"scheduler": {"name": "hgm", "alpah": 0.5}}, [], "scheduler.alpah"),
        ({"scheduler": {"name": "hgm", "alpha": 7}}, [], "scheduler.alpha"),
        ({"sandbox": {"name": "podman"}}, [], "sandbox.name"),
        ({}, ["budget.evaluations=null"], "evaluations or wall_time_s"),
        ({}, ["nonsense"], "expected key.path=value"),
    ],
)
def test_bad_config_names_the_key(data: dict, overrides: list[str], needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config_data(data, overrides)
    assert needle in str(info.value)


def test_load_config_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("study:\n  naem: x\n")
    with pytest.raises(ConfigError, match=r"(?s)c\.yaml.*study\.naem"):
        load_config(path)
    path.write_text("- a list\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(path)
    with pytest.raises(ConfigError, match="no such config"):
        load_config(tmp_path / "missing.yaml")


def test_resolved_config_round_trips_through_yaml(tmp_path: Path) -> None:
    resolved = load_config_data({"scheduler": {"name": "hgm", "alpha": 0.5}, "budget": {"evaluations": 9}})
    path = tmp_path / "frozen.yaml"
    path.write_text(resolved.to_yaml())
    again = load_config(path)
    assert again.config == resolved.config
