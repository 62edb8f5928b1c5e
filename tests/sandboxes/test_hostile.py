"""Hostile candidates against the real Docker sandbox: each is contained and fails with a clear reason,
a neighbour job is unaffected, and no container is left behind."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from metasearch.sandboxes.protocol import ExecResult, Limits, Mount, RunSpec

pytestmark = pytest.mark.docker
STUDY = "pytest-hostile"
TIGHT = Limits(cpus=0.5, memory_mb=256, pids=64, timeout_s=8, output_bytes=100_000)


def run(sandbox, script: str, *, mounts=(), limits: Limits = TIGHT, env=None) -> ExecResult:
    spec = RunSpec(
        command=["bash", "-c", script],
        mounts=mounts,
        limits=limits,
        env=env or {},
        labels={"metasearch.job": "hostile"},
    )
    return sandbox.run(spec)


@pytest.fixture(scope="module")
def sandbox(docker_sandbox_factory):
    sb = docker_sandbox_factory(STUDY)
    yield sb
    assert sb.sweep(STUDY) == 0, "a hostile job left a container behind"


def test_fork_bomb_is_contained_while_a_neighbour_runs(sandbox) -> None:
    results: dict[str, ExecResult] = {}

    def bomb() -> None:
        results["bomb"] = run(sandbox, ":(){ :|:& };:; sleep 30")

    thread = threading.Thread(target=bomb)
    thread.start()
    neighbour = run(sandbox, "python3 -c 'print(sum(range(10**6)))'", limits=Limits(timeout_s=60))
    thread.join()
    assert neighbour.ok and neighbour.stdout.strip() == str(sum(range(10**6)))
    assert not results["bomb"].ok and results["bomb"].reason


def test_memory_bomb_is_killed_as_out_of_memory(sandbox) -> None:
    result = run(sandbox, "python3 -c 'x = bytearray(1 << 30); print(len(x))'")
    assert result.oom_killed and result.reason == "out of memory (limit 256 MB)"


def test_infinite_loop_times_out(sandbox) -> None:
    result = run(sandbox, "python3 -c 'while True: pass'", limits=Limits(timeout_s=3))
    assert result.timed_out and result.reason == "timeout after 3s"


def test_a_gigabyte_of_output_is_capped(sandbox) -> None:
    result = run(
        sandbox, "head -c 1G /dev/zero | tr '\\0' x; echo", limits=Limits(timeout_s=180, output_bytes=50_000)
    )
    assert result.truncated and len(result.stdout) < 60_000
    assert "bytes of output dropped" in result.stdout


def test_network_egress_fails(sandbox) -> None:
    code = (
        "import socket\n"
        "s = socket.socket()\ns.settimeout(3)\n"
        "try:\n    s.connect(('1.1.1.1', 53)); print('CONNECTED')\n"
        "except OSError as e:\n    print('blocked', e.errno)\n"
    )
    result = run(sandbox, f'python3 -c "{code}"')
    assert result.ok and "blocked" in result.stdout and "CONNECTED" not in result.stdout


def test_writes_outside_the_workspace_fail(sandbox, tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "grader").mkdir()
    (tmp_path / "grader" / "tests.py").write_text("assert True\n")
    mounts = (Mount(tmp_path / "ws", "/work", read_only=False), Mount(tmp_path / "grader", "/grader"))
    script = (
        "echo ok > /work/inside; "
        "for p in /etc/passwd /usr/bin/evil /grader/tests.py /grader/new; do (echo x >> $p) 2>/dev/null && echo WROTE $p; done; "
        "rm -f /grader/tests.py 2>/dev/null && echo DELETED; true"
    )
    result = run(sandbox, script, mounts=mounts)
    assert result.ok and "WROTE" not in result.stdout and "DELETED" not in result.stdout
    assert (tmp_path / "ws" / "inside").read_text() == "ok\n"
    assert (tmp_path / "grader" / "tests.py").read_text() == "assert True\n"


def test_host_files_and_secrets_are_invisible(sandbox, monkeypatch) -> None:
    monkeypatch.setenv("METASEARCH_HOST_SECRET", "s3cr3t")
    result = run(
        sandbox, "env; ls /root 2>&1; cat /proc/1/environ 2>&1 | tr '\\0' '\\n'; ls /work/main 2>&1 || true"
    )
    assert "s3cr3t" not in result.stdout and "METASEARCH_HOST_SECRET" not in result.stdout
    assert "pyproject.toml" not in result.stdout


def test_background_processes_die_with_the_job(sandbox) -> None:
    result = run(sandbox, "nohup sleep 1000 >/dev/null 2>&1 & echo started")
    assert result.ok and result.stdout.strip() == "started"
    assert not sandbox.client.containers.list(all=True, filters={"label": f"metasearch.study={STUDY}"})
