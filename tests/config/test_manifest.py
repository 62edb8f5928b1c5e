from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from metasearch.errors import ConfigError
from metasearch.manifest import (
    MAX_ARG_CHARS,
    MAX_ARGS,
    MAX_MANIFEST_BYTES,
    CategoricalKnob,
    FloatKnob,
    load_manifest,
    parse_manifest,
)

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


@pytest.mark.parametrize(
    "file",
    [
        "/etc/victim.json",
        "../victim.json",
        "conf/../../victim.json",
        ".git/config",
        "sub/.GIT/x",
        ".",
        "a\\u0000b",
    ],
)
def test_knobs_file_must_stay_inside_the_agent_tree(file: str) -> None:
    with pytest.raises(ConfigError, match=r"knobs\.file"):
        parse_manifest(GOOD.replace('file = "knobs.json"', f'file = "{file}"'))


def test_knobs_file_may_be_nested_in_the_agent_tree() -> None:
    assert (
        parse_manifest(GOOD.replace('"knobs.json"', '"conf/./knobs.json"')).knobs.file == "conf/./knobs.json"
    )


def test_entry_placeholders_are_plain_text_replacements() -> None:
    args = [
        "{task_dir}/in",
        "{nope}",
        "{task_dir:>200000000}",
        "${HOME}",
        "{}",
        "{{task_dir}}",
        "{problem_file}",
    ]
    m = parse_manifest(f'name = "x"\n[entry]\nsolve = {json.dumps(["run", *args])}\n')
    assert m.command("solve", task_dir="/task", agent_dir="/agent") == [
        "run",
        "/task/in",
        "{nope}",
        "{task_dir:>200000000}",
        "${HOME}",
        "{}",
        "{/task}",
        "{problem_file}",  # not given for solve: left as written, never a KeyError
    ]
    with pytest.raises(TypeError, match="nope"):
        m.command("solve", nope="x")


@pytest.mark.parametrize(
    "solve",
    [
        ["x" * (MAX_ARG_CHARS + 1)],
        ["true"] * (MAX_ARGS + 1),
        ["true", "a\u0000b"],
        ["true", 3],
        [],
    ],
)
def test_entry_arguments_are_bounded_strings(solve: list[object]) -> None:
    with pytest.raises(ConfigError, match=r"entry\.solve"):
        parse_manifest(f'name = "x"\n[entry]\nsolve = {json.dumps(solve)}\n')


def test_load_manifest_turns_unreadable_files_into_config_errors(tmp_path: Path) -> None:
    cases = {
        "binary": lambda p: p.write_bytes(GOOD.encode() + b"# \x00\xff\n"),
        "deep": lambda p: p.write_text("a = " + "[" * 100_000),
        "huge": lambda p: p.write_text(GOOD + "#" * (MAX_MANIFEST_BYTES + 1)),
        "link": lambda p: p.symlink_to(tmp_path / "outside.toml"),
        "fifo": lambda p: os.mkfifo(p),  # opened without blocking, then refused
        "folder": lambda p: p.mkdir(),
    }
    (tmp_path / "outside.toml").write_text(GOOD)
    expected = {
        "binary": "not UTF-8",
        "deep": "nested too deeply",
        "huge": "larger than",
        "link": "symbolic link",
        "fifo": "not a regular file",
        "folder": "not a regular file",
    }
    for name, make in cases.items():
        (tmp_path / name).mkdir()
        make(tmp_path / name / "agent.toml")
        with pytest.raises(ConfigError, match=expected[name]) as info:
            load_manifest(tmp_path / name)
        assert str(tmp_path / name / "agent.toml") in str(info.value)
