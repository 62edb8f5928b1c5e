"""Exporting an agent (its files and requirements), and task folders for a promoted agent."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest

from metasearch.archive import GitArchive
from metasearch.errors import ConfigError
from metasearch.export import agent_requirements, export_agent, prepare_task
from metasearch.launch import resolve_seed


def pinned(dist: str) -> str:
    return f"{dist}=={importlib.metadata.version(dist).split('+')[0]}"


def test_requirements_are_what_the_code_imports_outside_the_stdlib_and_the_agent(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    (agent / "pkg").mkdir(parents=True)
    (agent / "tests").mkdir()
    (agent / "pkg" / "__init__.py").write_text("")
    (agent / "pkg" / "run.py").write_text(
        "import os, json\nfrom pkg import helper\nfrom . import sibling\n"
        "def f():\n    import numpy as np\n    from yaml import safe_load\n"
    )
    (agent / "main.py").write_text(
        "from __future__ import annotations\nimport pkg.run\nimport main\nimport requests_nowhere\n"
    )
    (agent / "tests" / "test_x.py").write_text("import pytest\n")  # tests are not needed to solve
    # not installed here: listed by name, unpinned (better a failed install than a missing package)
    assert agent_requirements(agent) == [pinned("numpy"), pinned("PyYAML"), "requests_nowhere"]
    (agent / "requirements.txt").write_text("# the agent's own list wins\nnumpy>=2\n\nscipy\n")
    assert agent_requirements(agent) == ["numpy>=2", "scipy"]


def test_the_seeds_declare_torch_only_where_it_is_imported() -> None:
    trainer = agent_requirements(resolve_seed("trainer"))
    assert pinned("torch") in trainer and all("+" not in r for r in trainer)  # no local label (+cpu)
    assert agent_requirements(resolve_seed("coding-agent")) == []  # standard library only


def test_export_refuses_a_used_folder_unless_forced_and_writes_requirements(tmp_path: Path) -> None:
    archive = GitArchive.create(tmp_path / "s", study="s", config_text="study: {name: s}\n")
    agent = archive.add_seed("trainer", resolve_seed("trainer"), job_id="seed-t")
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "stale.py").write_text("left from another agent\n")
    with pytest.raises(ConfigError, match=r"not empty.*--force"):
        export_agent(archive.root, agent.id, dest)
    assert sorted(p.name for p in dest.iterdir()) == ["stale.py"], "nothing merged"
    requirements = export_agent(archive.root, agent.id, dest, force=True)
    assert not (dest / "stale.py").exists() and (dest / "agent.toml").is_file()
    assert (dest / "requirements.txt").read_text().splitlines() == requirements
    assert pinned("torch") in requirements
    with pytest.raises(ConfigError, match="not a folder"):
        export_agent(archive.root, agent.id, dest / "agent.toml")
    # the CLI says so too, with a non-zero exit
    done = subprocess.run(
        [sys.executable, "-m", "metasearch.cli", "export", str(archive.root), agent.id, str(dest)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "--force" in done.stderr
    archive.close()


def test_task_prepare_writes_the_visible_files_and_the_model_input(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "metasearch.cli", "task", "prepare", "training", "moons", str(tmp_path / "t")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "mlflow models predict" in done.stdout and "/invocations" in done.stdout
    task = tmp_path / "t" / "task"
    assert {"TASK.md", "task.json", "train_x.npy", "train_y.npy", "test_x.npy"} <= {
        p.name for p in task.iterdir()
    }
    assert not (task / "test_y.npy").exists(), "hidden files stay hidden"
    body = json.loads((tmp_path / "t" / "input.json").read_text())
    assert body == {"dataframe_records": [{"task_dir": str(task)}]}
    with pytest.raises(ConfigError, match="training/moons"):  # names the suite's tasks
        prepare_task("training", "nope", tmp_path / "u")
    with pytest.raises(ConfigError, match="unknown suite"):
        prepare_task("no-such-suite", "x", tmp_path / "u")
    with pytest.raises(ConfigError, match="not empty"):
        prepare_task("training", "training/moons", tmp_path / "t")


def test_export_skips_a_python_file_it_cannot_parse(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    archive = GitArchive.create(tmp_path / "s", study="s", config_text="study: {name: s}\n")
    seed = archive.add_seed("coding-agent", resolve_seed("coding-agent"), job_id="seed")
    with archive.checkout(seed.id) as ws:
        (ws / "unused.py").write_text("x = " + "1+" * 3000 + "1\n")  # RecursionError in ast.parse
        (ws / "latin.py").write_bytes(b"import yaml  # caf\xe9\n")  # not UTF-8
        (ws / "real.py").write_text("import numpy\n")
        child = archive.add_child(seed.id, ws, job_id="c1")
    requirements = export_agent(archive.root, child.id, tmp_path / "out")
    assert requirements == [pinned("numpy")]
    assert "unused.py: not parsed for requirements: RecursionError" in caplog.text
    assert "latin.py: not parsed" in caplog.text
    (tmp_path / "out" / "requirements.txt").write_bytes(b"numpy # \xff\n")
    with pytest.raises(ConfigError, match=r"requirements\.txt.*not UTF-8"):
        agent_requirements(tmp_path / "out")
    archive.close()
