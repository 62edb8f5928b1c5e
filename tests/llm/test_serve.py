"""VLLMServer's process management (start, readiness, log, failure with the log's tail, stop) with a
stand-in ``vllm`` package on the interpreter's path: it serves the scripted OpenAI-compatible server under
vLLM's module name and arguments. The real vLLM runs in ``test_real_model_study.py`` (slow)."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from metasearch.errors import InfrastructureError
from metasearch.llm.config import LLMSection, ServeSection
from metasearch.llm.serve import VLLMServer, vllm_command
from metasearch.llm.service import LLMService

STAND_IN = """
import argparse, os, sys, threading
from metasearch.llm.scripted import ScriptedLLM

p = argparse.ArgumentParser()
p.add_argument("--model"); p.add_argument("--host"); p.add_argument("--port", type=int)
p.add_argument("--tensor-parallel-size"); p.add_argument("--gpu-memory-utilization")
p.add_argument("--max-model-len"); p.add_argument("--served-model-name")
p.add_argument("--fail", action="store_true")
args = p.parse_args()
print("stand-in vllm: model", args.model, "gpus", os.environ.get("CUDA_VISIBLE_DEVICES"), flush=True)
if args.fail:
    print("RuntimeError: CUDA out of memory (stand-in)", flush=True)
    sys.exit(3)
ScriptedLLM(["served text"], model=args.served_model_name or args.model).start(args.port)
threading.Event().wait()
"""


@pytest.fixture
def stand_in(tmp_path: Path) -> dict[str, str]:
    pkg = tmp_path / "site" / "vllm" / "entrypoints" / "openai"
    pkg.mkdir(parents=True)
    for d in (pkg, pkg.parent, pkg.parent.parent):
        (d / "__init__.py").write_text("")
    (pkg / "api_server.py").write_text(textwrap.dedent(STAND_IN))
    return {"PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), *sys.path])}


def test_the_command_carries_the_section() -> None:
    section = ServeSection(model="/models/m", tensor_parallel_size=2, max_model_len=4096, extra_args=["--x"])
    command = vllm_command(section, 8123)
    assert command[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert command[command.index("--port") + 1] == "8123"
    assert command[command.index("--tensor-parallel-size") + 1] == "2"
    assert command[command.index("--max-model-len") + 1] == "4096"
    assert command[-1] == "--x" and "--gpu-memory-utilization" in command


def test_start_wait_serve_and_stop(tmp_path: Path, stand_in: dict[str, str]) -> None:
    section = ServeSection(model="tiny", gpus=["1", "2"], env=stand_in, startup_timeout_s=60)
    server = VLLMServer(section, tmp_path / "logs" / "vllm.log").start()
    try:
        assert server.process is not None
        pid = server.process.pid
        models = httpx.get(f"{server.base_url}/models", timeout=5).json()
        assert models["data"][0]["id"] == "tiny"
    finally:
        server.stop()
    log = (tmp_path / "logs" / "vllm.log").read_text()
    assert "stand-in vllm: model tiny gpus 1,2" in log  # the GPUs given to it, and only those
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{server.base_url}/models", timeout=2)


def test_a_server_that_dies_reports_its_log_tail(tmp_path: Path, stand_in: dict[str, str]) -> None:
    section = ServeSection(model="tiny", env=stand_in, extra_args=["--fail"], startup_timeout_s=60)
    with pytest.raises(InfrastructureError, match="exited with code 3") as err:
        VLLMServer(section, tmp_path / "vllm.log").start()
    assert "CUDA out of memory (stand-in)" in str(err.value)


def test_a_server_that_never_gets_ready_is_stopped(tmp_path: Path) -> None:
    section = ServeSection(model="tiny", python=sys.executable, startup_timeout_s=3,
                           extra_args=[])  # fmt: skip
    site = tmp_path / "site" / "vllm" / "entrypoints" / "openai"
    site.mkdir(parents=True)
    for d in (site, site.parent, site.parent.parent):
        (d / "__init__.py").write_text("")
    (site / "api_server.py").write_text(
        "import time\nprint('loading weights', flush=True)\ntime.sleep(600)\n"
    )
    section = section.model_copy(update={"env": {"PYTHONPATH": str(tmp_path / "site")}})
    server = VLLMServer(section, tmp_path / "vllm.log")
    with pytest.raises(InfrastructureError, match="not ready after 3 s") as err:
        server.start()
    assert "loading weights" in str(err.value) and server.process is None


def test_the_service_serves_the_study_and_stops_the_server_on_close(
    tmp_path: Path, stand_in: dict[str, str]
) -> None:
    section = LLMSection(
        serve=ServeSection(model="tiny", served_model_name="m1", env=stand_in), api_key_env=None
    )
    service = LLMService(section, study_dir=tmp_path).start()
    try:
        assert service.server is not None
        result = service.client.chat([{"role": "user", "content": "hi"}], job_id="j")
        assert result.text == "served text" and result.model == "m1"
        assert service.meter.job("j").calls == 1
        process = service.server.process
        assert process is not None
    finally:
        service.close()
    assert process.poll() is not None and process.returncode in (-signal.SIGTERM, 0, 143)
    assert (tmp_path / "logs" / "vllm.log").is_file()
