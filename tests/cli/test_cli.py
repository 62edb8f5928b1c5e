from __future__ import annotations

import os
import shutil
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


def test_bench_names_the_benchmarks_it_has(tmp_path: Path) -> None:
    result = _run("bench", "nosuch", cwd=tmp_path)
    assert result.returncode == 2
    assert "unknown benchmark 'nosuch'" in result.stderr and "schedulers" in result.stderr
    assert "archive" in result.stderr  # a script of this checkout's bench/


def test_an_installed_package_runs_the_scheduler_bench_and_names_the_checkout_for_the_others(
    tmp_path: Path,
) -> None:
    """The package alone, as a wheel installs it (no bench/ folder, no pyproject.toml beside it)."""
    site = tmp_path / "site"
    shutil.copytree(
        Path(__file__).resolve().parents[2] / "metasearch",
        site / "metasearch",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(site)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [*CLI, "bench", *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)

    found = run("schedulers", "--seeds", "2", "--budget", "10", "--schedulers", "random", "--json")
    assert found.returncode == 0, found.stderr
    assert '"scheduler": "random"' in found.stdout
    missing = run("archive")
    assert missing.returncode == 2
    assert "only schedulers" in missing.stderr and "source checkout" in missing.stderr
