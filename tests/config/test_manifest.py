from __future__ import annotations

from pathlib import Path

import pytest

from metasearch.errors import ConfigError
from metasearch.manifest import CategoricalKnob, FloatKnob, load_manifest, parse_manifest

GOOD = """
name = "demo"
description = "a demo agent"
protected = ["tests/**"]

[entry]
solve = ["python3", "-m", "demo.solve", "{task_dir}"]
smoke = ["python3", "-c", "import demo"]

[knobs]
file = "knobs.json"

[knobs.params.lr]
type = "float"
low = 1e-4
high = 1.0
log = true

[knobs.params.opt]
type = "categorical"
choices = ["sgd", "adam"]
"""


def test_parses_entry_points_and_knobs() -> None:
    m = parse_manifest(GOOD)
    assert m.name == "demo"
    assert m.command("solve", task_dir="/task") == ["python3", "-m", "demo.solve", "/task"]
    assert isinstance(m.knobs.params["lr"], FloatKnob)
    assert isinstance(m.knobs.params["opt"], CategoricalKnob)
    assert m.protected == ["tests/**"]


def test_missing_entry_point_is_named() -> None:
    m = parse_manifest(GOOD)
    with pytest.raises(ConfigError, match=r"entry\.self_improve"):
        m.command("self_improve")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (GOOD.replace('name = "demo"', 'nmae = "demo"'), "nmae"),
        (GOOD.replace('type = "float"', 'type = "double"'), "knobs.params.lr"),
        (GOOD.replace("high = 1.0", "high = 1e-5"), "knobs.params.lr"),
        (GOOD.replace("[entry]", "[entryx]"), "entry"),
        ("name = [", "not valid TOML"),
    ],
)
def test_bad_manifests_name_the_key(text: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace(".", r"\.")):
        parse_manifest(text)


def test_load_manifest_requires_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="missing"):
        load_manifest(tmp_path)
