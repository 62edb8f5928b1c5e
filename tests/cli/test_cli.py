from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "metasearch.cli"]


def _run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_BASE_URL"}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=env)


def test_help_lists_every_subcommand() -> None:
    result = _run("--help")
    assert result.returncode == 0, result.stderr
    for name in (
        "run",
        "resume",
        "status",
        "tree",
        "best",
        "promote",
        "ui",
        "bench",
        "images",
        "export",
        "doctor",
    ):
        assert f" {name} " in result.stdout, name


def test_misspelled_key_fails_naming_it(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("study:\n  name: x\n  wrokers: 2\n")
    result = _run("run", str(config), "--archive-dir", str(tmp_path / "archive"))
    assert result.returncode == 2
    assert "study.wrokers" in result.stderr
    assert not (tmp_path / "archive").exists(), "nothing may start before the config is valid"


def test_bad_override_fails_naming_it(tmp_path: Path) -> None:
    config = tmp_path / "ok.yaml"
    config.write_text("study:\n  name: x\n")
    result = _run("run", str(config), "-o", "scheduler.name=hgmm", "--archive-dir", str(tmp_path / "a"))
    assert result.returncode == 2
    assert "scheduler.name" in result.stderr and "allowed:" in result.stderr


@pytest.mark.parametrize("command", ["status", "best", "tree"])
def test_read_commands_reject_a_non_study(tmp_path: Path, command: str) -> None:
    result = _run(command, str(tmp_path))
    assert result.returncode == 2
    assert "not a study directory" in result.stderr


def test_llm_proposers_without_an_endpoint_fail_before_anything_is_created(tmp_path: Path) -> None:
    config = tmp_path / "ok.yaml"
    config.write_text("study:\n  name: x\n")
    for override, needle in (("proposer.name=self", "llm.base_url"), ("proposer.name=llm", "llm.base_url")):
        result = _run("run", str(config), "-o", override, "--archive-dir", str(tmp_path / "a"))
        assert result.returncode == 2 and needle in result.stderr, result.stderr
    assert not (tmp_path / "a").exists()
