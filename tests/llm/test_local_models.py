"""Local models from the package registry: what a config naming one gets when it is not prepared, and how
the served context length is read. The real preparation and a study driven by the real model are in
``test_real_model_study.py`` (slow)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from metasearch.errors import ConfigError
from metasearch.llm import local_models
from metasearch.llm.serve import context_length, served_name, vllm_command

ROOT = Path(__file__).resolve().parents[2]


def test_an_unprepared_model_names_the_command_that_prepares_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="run `metasearch models prepare smollm2-135m`"):
        local_models.resolve("local:smollm2-135m", tmp_path)
    with pytest.raises(ConfigError, match="choose from gemma3-270m, smollm2-135m"):
        local_models.resolve("local:llama-70b", tmp_path)
    assert local_models.resolve("/models/mine", tmp_path) == ("/models/mine", None)


def test_a_half_prepared_model_counts_as_not_prepared(tmp_path: Path) -> None:
    home = tmp_path / "smollm2-135m"
    home.mkdir()
    (home / "model.json").write_text('{"hf_dir": "%s"}' % (home / "hf"))  # conversion never finished
    assert local_models.record("smollm2-135m", tmp_path) is None
    (home / "hf").mkdir()
    (home / "hf" / "config.json").write_text("{}")
    assert local_models.record("smollm2-135m", tmp_path) is not None


def test_the_server_is_started_on_the_prepared_folder_under_the_models_name(tmp_path: Path) -> None:
    from metasearch.llm.config import ServeSection

    home = tmp_path / ".cache" / "metasearch" / "models" / "smollm2-135m"
    (home / "hf").mkdir(parents=True)
    (home / "hf" / "config.json").write_text("{}")
    (home / "model.json").write_text('{"hf_dir": "%s", "gguf_sha256": "ab"}' % (home / "hf"))
    section = ServeSection(model="local:smollm2-135m", gpus=[])
    old = os.environ.get("HOME")
    os.environ["HOME"] = str(tmp_path)
    try:
        command = vllm_command(section, 8000)
    finally:
        os.environ["HOME"] = old or ""
    assert command[command.index("--model") + 1] == str(home / "hf")
    assert command[command.index("--served-model-name") + 1] == "smollm2-135m" == served_name(section)


def test_the_context_length_is_what_the_server_reports() -> None:
    body = {"data": [{"id": "other", "max_model_len": 99}, {"id": "m", "max_model_len": 4096}]}
    assert context_length(body, "m") == 4096
    assert context_length({"data": [{"id": "m"}]}, "m") is None  # not vLLM: unknown, never assumed
    assert context_length("nonsense", "m") is None


def test_dry_run_reports_a_missing_model_with_its_fix(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path)}  # an empty models folder
    done = subprocess.run(
        [sys.executable, "-m", "metasearch.cli", "run", "configs/quickstart-llm.yaml", "--dry-run"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    out = " ".join(done.stdout.split())
    assert "local model" in out and "metasearch models prepare smollm2-135m" in out
