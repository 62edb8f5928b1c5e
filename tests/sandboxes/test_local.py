from __future__ import annotations

import os
import time
from pathlib import Path

from metasearch.sandboxes.local import LocalSandbox, PathMap
from metasearch.sandboxes.protocol import Limits, Mount, RunSpec


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
