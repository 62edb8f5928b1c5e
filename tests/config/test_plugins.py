"""Plugins are built only with keywords their constructors name: an unknown option or keyword is a ConfigError
naming it, never dropped by a ``**kwargs``; ``mix`` checks its members' options with the rest of the config."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from metasearch.config import load_config_data
from metasearch.errors import ConfigError
from metasearch.registry import PROPOSERS, SANDBOXES, SCHEDULERS, SUITES, Registry

REGISTRIES = (SCHEDULERS, PROPOSERS, SUITES, SANDBOXES)
PROPOSER_KEYWORDS = {"study_dir", "llm", "knobs_host"}  # what launch, mix and a Ray worker build one with


@pytest.mark.parametrize(
    ("registry", "name"), [(r, n) for r in REGISTRIES for n in r.names()], ids=lambda x: getattr(x, "kind", x)
)
def test_no_plugin_constructor_swallows_unknown_keywords(registry: Registry, name: str) -> None:
    parameters = inspect.signature(registry.resolve(name)).parameters.values()
    assert not [p.name for p in parameters if p.kind is p.VAR_KEYWORD]
    if registry is PROPOSERS:
        assert {p.name for p in parameters if p.kind is p.KEYWORD_ONLY} >= PROPOSER_KEYWORDS


def test_a_keyword_the_constructor_does_not_take_is_named() -> None:
    suite = load_config_data({}).plugins["suite"]
    with pytest.raises(ConfigError, match=r"suite 'training': .*TrainingSuite takes no keyword 'study_dri'"):
        suite.create(study_dri="x")


def test_a_plugin_built_by_name_checks_its_options_and_keywords(tmp_path: Path) -> None:
    assert SUITES.create("training", {"subset": "smoke"}).config.subset == "smoke"
    with pytest.raises(ConfigError, match=r"suite 'training'\.subsett: Extra inputs are not permitted"):
        SUITES.create("training", {"subsett": "smoke"})
    with pytest.raises(
        ConfigError, match=r"takes no keyword 'studydir'; it takes knobs_host, llm, study_dir"
    ):
        PROPOSERS.create("knobs", {}, studydir=tmp_path)
    knobs = PROPOSERS.create("knobs", {}, study_dir=tmp_path, llm=None, knobs_host=None)
    assert knobs.storage_path == tmp_path / "optuna.journal"


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"llm": {"mdoe": "tools"}}, "llm.mdoe: Extra inputs are not permitted"),
        ({"knobs": {"sampler": "grid"}}, "knobs.sampler"),
        ({"self": {}}, "options for ['self'], which have no weight"),
    ],
)
def test_mix_member_options_are_checked_with_the_config(options: dict, needle: str) -> None:
    proposer = {"name": "mix", "weights": {"llm": 0.5, "knobs": 0.5}, "options": options}
    with pytest.raises(ConfigError) as caught:
        load_config_data({"proposer": proposer})
    assert "proposer.options" in str(caught.value) and needle in str(caught.value)
