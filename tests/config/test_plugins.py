"""Plugins are built only with keywords their constructors name: an unknown option or keyword is a ConfigError
naming it, never dropped by a ``**kwargs``; ``mix`` checks its members' options with the rest of the config."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict

from metasearch.config import build_suite, load_config_data
from metasearch.errors import ConfigError
from metasearch.registry import PROPOSERS, SANDBOXES, SCHEDULERS, SUITES, Registry
from metasearch.sandboxes.protocol import Sandbox
from metasearch.suites.protocol import Suite, Task, TaskResult

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


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PlainSuite:
    """A suite of the old, structural kind: the three methods and a Config, no base class."""

    Config = _Options
    name = "plain"
    description = "one task"

    def __init__(self, config: _Options) -> None:
        self.config = config

    def tasks(self, subset: str | None = None) -> list[Task]:
        return [Task(id="plain/1", suite=self.name, statement="x")]

    def prepare(self, task_id: str, dest: Path) -> None:
        (dest / "output").mkdir()

    def grade(self, task_id: str, artifact_dir: Path, sandbox: Sandbox) -> TaskResult:
        return TaskResult(1.0)


class MinimalSuite(PlainSuite, Suite):
    """The same suite on the base class: what it does not say, the base's defaults say."""


def test_a_suite_plugin_inherits_the_base_class_and_gets_its_defaults() -> None:
    plain = f"{__name__}:PlainSuite"
    for build in (lambda: load_config_data({"suite": {"name": plain}}), lambda: build_suite(plain)):
        with pytest.raises(ConfigError) as caught:
            build()
        assert f"{__name__}:PlainSuite) does not inherit metasearch.suites.protocol.Suite" in str(
            caught.value
        )
    suite = load_config_data({"suite": {"name": f"{__name__}:MinimalSuite"}}).plugins["suite"].create()
    assert isinstance(suite, Suite) and not isinstance(PlainSuite(_Options()), Suite)
    suite.needs()  # nothing is missing
    assert (suite.artifact_path, suite.needs_docker, suite.needs_gpu, suite.content_hash) == (
        "output",
        False,
        False,
        None,
    )
    assert suite.plan_note() == "" and suite.grader_files("plain/1") == {}
