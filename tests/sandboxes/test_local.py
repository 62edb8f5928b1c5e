from __future__ import annotations

import os
import resource
import time
from pathlib import Path

from metasearch.sandboxes.local import LocalSandbox, PathMap, memory_limit
from metasearch.sandboxes.protocol import DEFAULT_LIMITS, Limits, Mount, RunSpec


def test_mount_targets_are_rewritten(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "x.txt").write_text("hello")
    spec = RunSpec(
        command=["python3", "-c", "import os,sys; print(open('/data/x.txt').read(), os.environ['WHERE'])"],
        mounts=(Mount(tmp_path / "in", "/data"),),
        workdir="/data",
        env={"WHERE": "/data/x.txt"},
    )
    result = LocalSandbox().run(spec)
    assert result.ok, result.stderr
    assert result.stdout.startswith("hello ") and result.stdout.strip().endswith("/data/x.txt")


def test_path_map_leaves_lookalikes_alone(tmp_path: Path) -> None:
    paths = PathMap(tmp_path / "root", [Mount(tmp_path, "/task")])
    assert paths("/taskforce") == "/taskforce"
    assert paths("/task/a").endswith("root/task/a")
    assert paths("--out=/task").endswith("root/task")


def test_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    marker = tmp_path / "alive"
    code = (
        f"import subprocess,time; subprocess.Popen(['bash','-c','sleep 3; touch {marker}']); time.sleep(60)"
    )
    started = time.monotonic()
    result = LocalSandbox().run(RunSpec(command=["python3", "-c", code], limits=Limits(timeout_s=1)))
    assert result.timed_out and result.reason == "timeout after 1s"
    assert time.monotonic() - started < 10
    time.sleep(3.5)
    assert not marker.exists(), "a background child survived the timeout"


def test_memory_is_bounded_in_a_way_cuda_can_start_under() -> None:
    """A run cannot map more than its generous limit. With an NVIDIA driver the limit is on the data
    segment, not the address space: CUDA reserves room for the host's and the GPUs' memory when it starts."""
    limits = Limits(memory_mb=512).resolve(DEFAULT_LIMITS)
    assert memory_limit(limits, nvidia=False) == (resource.RLIMIT_AS, 8192 << 20)
    assert memory_limit(Limits(memory_mb=4096).resolve(DEFAULT_LIMITS), nvidia=False)[1] == 16384 << 20
    assert memory_limit(limits, nvidia=True) == (resource.RLIMIT_DATA, 8192 << 20)
    code = "b = bytearray(9 << 30)"  # 9 GiB, never touched
    result = LocalSandbox().run(RunSpec(command=["python3", "-c", code], limits=Limits(memory_mb=512)))
    assert result.exit_code != 0 and "MemoryError" in result.stderr, result
    code = "import resource; resource.setrlimit(resource.RLIMIT_DATA, (8 << 30, 8 << 30)); " + code
    result = LocalSandbox().run(RunSpec(command=["python3", "-c", code], limits=Limits(memory_mb=512)))
    assert result.exit_code != 0 and "MemoryError" in result.stderr, result  # the data limit bounds it too


def test_output_is_capped() -> None:
    spec = RunSpec(command=["python3", "-c", "print('x' * 5_000_000)"], limits=Limits(output_bytes=10_000))
    result = LocalSandbox().run(spec)
    assert result.truncated and len(result.stdout) < 12_000 and "bytes of output dropped" in result.stdout


def test_host_secrets_do_not_leak(monkeypatch) -> None:
    monkeypatch.setenv("METASEARCH_TEST_SECRET", "hunter2")
    result = LocalSandbox().run(RunSpec(command=["python3", "-c", "import os; print(sorted(os.environ))"]))
    assert "METASEARCH_TEST_SECRET" not in result.stdout and result.ok


def test_session_runs_several_commands(tmp_path: Path) -> None:
    with LocalSandbox().session(
        RunSpec(command=["true"], mounts=(Mount(tmp_path, "/w", read_only=False),), workdir="/w")
    ) as s:
        assert s.exec(["bash", "-c", "echo 1 > f"]).ok
        assert s.exec(["cat", "f"]).stdout == "1\n"
        assert s.exec(["sleep", "5"], timeout_s=0.5).timed_out
    assert (tmp_path / "f").exists() and os.stat(tmp_path / "f").st_size == 2
