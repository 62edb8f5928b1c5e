"""DockerSandbox against a real engine (marker: docker)."""

from __future__ import annotations

import time
from pathlib import Path

import docker
import pytest

from metasearch.errors import InfrastructureError
from metasearch.sandboxes.container import HOLDER_USER
from metasearch.sandboxes.docker import DockerSandbox
from metasearch.sandboxes.gpus import GPUPool
from metasearch.sandboxes.protocol import Limits, Mount, RunSpec

pytestmark = pytest.mark.docker


def test_runs_with_the_locked_down_defaults(docker_sandbox_factory, tmp_path: Path) -> None:
    sandbox = docker_sandbox_factory()
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "m.py").write_text("print('ok')\n")
    spec = RunSpec(
        command=[
            "bash",
            "-c",
            "id -u; python3 /code/m.py; touch /code/x 2>&1 | head -1; touch /usr/x 2>&1 | head -1; "
            "python3 -c 'import torch, numpy; print(torch.__version__)'; ls /sys/class/net",
        ],
        mounts=(Mount(tmp_path / "code", "/code"),),
        labels={"metasearch.job": "job-defaults"},
    )
    result = sandbox.run(spec)
    assert result.ok, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "65534" and lines[1] == "ok"
    assert "Read-only file system" in lines[2] and "Read-only file system" in lines[3]
    assert lines[4].startswith("2.13")
    assert lines[5:] == ["lo"], "only the loopback interface: no network"


def test_settings_reach_the_engine(docker_sandbox_factory) -> None:
    sandbox = docker_sandbox_factory()
    spec = RunSpec(
        command=["true"],
        limits=Limits(cpus=0.5, memory_mb=256, pids=64),
        labels={"metasearch.job": "j-settings"},
    )
    container = sandbox.client.containers.create(**sandbox.create_kwargs(spec, ["true"], []))
    try:
        host = container.attrs["HostConfig"]
        assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] is True
        assert host["CapDrop"] == ["ALL"] and host["SecurityOpt"] == ["no-new-privileges"]
        assert (
            host["NanoCpus"] == 500_000_000
            and host["Memory"] == 256 << 20
            and host["MemorySwap"] == 256 << 20
        )
        assert host["PidsLimit"] == 64
        assert container.attrs["Config"]["User"] == HOLDER_USER, "the command itself runs as 65534 beside it"
        config = container.attrs["Config"]
        assert config["OpenStdin"] is True and config["StdinOnce"] is True, "the holder's lifeline"
        assert host["AutoRemove"] is True
        assert (
            container.labels["metasearch.study"] == "pytest"
            and container.labels["metasearch.study_id"] == sandbox.study_id
            and container.labels["metasearch.job"] == "j-settings"
        )
    finally:
        container.remove(force=True)


def test_gpu_requests_name_the_devices(docker_sandbox_factory) -> None:
    sandbox = docker_sandbox_factory()
    kwargs = sandbox.create_kwargs(RunSpec(command=["true"]), ["true"], ["1", "3"])
    (request,) = kwargs["device_requests"]
    assert request["DeviceIDs"] == ["1", "3"] and request["Capabilities"] == [["gpu"]]
    assert sandbox.create_kwargs(RunSpec(command=["true"]), ["true"], [])["device_requests"] == []


def test_gpu_pool_is_exclusive_and_skips_reserved() -> None:
    pool = GPUPool(["0", "1", "2"], reserved=["0"])
    with pool.acquire(2) as a:
        assert sorted(a) == ["1", "2"]
        with pytest.raises(InfrastructureError, match="no 1 GPU"), pool.acquire(1, timeout_s=0.2):
            pass
    shared = GPUPool(["0"], per_gpu=2)
    with shared.acquire(1) as a, shared.acquire(1) as b:
        assert a == b == ["0"]
    with pytest.raises(InfrastructureError, match="pool has 2"), GPUPool(["5", "6"]).acquire(3):
        pass


def test_timeout_really_kills_the_container(docker_sandbox_factory) -> None:
    sandbox = docker_sandbox_factory("pytest-timeout")
    started = time.monotonic()
    result = sandbox.run(
        RunSpec(command=["sleep", "600"], limits=Limits(timeout_s=2), labels={"metasearch.job": "j-to"})
    )
    assert result.timed_out and result.reason == "timeout after 2s"
    assert time.monotonic() - started < 30
    assert not sandbox.client.containers.list(all=True, filters={"label": "metasearch.study=pytest-timeout"})


def test_session_keeps_state_between_commands(docker_sandbox_factory, tmp_path: Path) -> None:
    sandbox = docker_sandbox_factory()
    spec = RunSpec(command=["true"], mounts=(Mount(tmp_path, "/w", read_only=False),), workdir="/w")
    with sandbox.session(spec) as session:
        assert session.exec(["bash", "-c", "echo hi > note.txt"]).ok
        assert session.exec(["cat", "note.txt"]).stdout == "hi\n"
        slow = session.exec(["sleep", "30"], timeout_s=1)
        assert slow.timed_out
    assert (tmp_path / "note.txt").read_text() == "hi\n"


def test_missing_image_is_an_infrastructure_error(docker_sandbox_factory) -> None:
    sandbox = docker_sandbox_factory()
    broken = DockerSandbox(
        DockerSandbox.Config(image="metasearch-sandbox:does-not-exist"), study="pytest", client=sandbox.client
    )
    with pytest.raises(InfrastructureError, match="never pulled"):
        broken.run(RunSpec(command=["true"]))


def test_unreachable_daemon_is_an_infrastructure_error() -> None:
    client = docker.DockerClient(base_url="unix:///nonexistent/docker.sock", version="1.41", timeout=2)
    with pytest.raises(InfrastructureError, match="unreachable"):
        DockerSandbox(DockerSandbox.Config(), study="x", client=client)
