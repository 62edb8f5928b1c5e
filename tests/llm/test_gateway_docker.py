"""From inside a real Docker sandbox (no network, unprivileged user) through the gateway to the scripted
server: the raw socket, and the TCP forwarder with the ``openai``-style base URL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metasearch.llm.gateway import SOCKET_DIR, SOCKET_PATH, Gateway
from metasearch.llm.scripted import ScriptedLLM
from metasearch.llm.usage import TokenMeter
from metasearch.sandboxes.protocol import Limits, Mount, RunSpec

pytestmark = pytest.mark.docker

AGENT = r"""
import http.client, json, socket, subprocess, sys, time, urllib.request

class Unix(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect("/run/metasearch/llm.sock")

conn = Unix("localhost", timeout=30)
conn.request("POST", "/v1/chat/completions", json.dumps({"messages": [{"role": "user", "content": "hi there"}]}),
             {"Content-Type": "application/json"})
first = json.loads(conn.getresponse().read())["choices"][0]["message"]["content"]

fwd = subprocess.Popen([sys.executable, "/run/metasearch/forwarder.py", "--port", "8088"], stdout=subprocess.PIPE, text=True)
assert fwd.stdout.readline().strip() == "ready"
request = urllib.request.Request("http://127.0.0.1:8088/v1/chat/completions",
    data=json.dumps({"messages": [{"role": "user", "content": "again"}]}).encode(),
    headers={"Content-Type": "application/json"})
second = json.loads(urllib.request.urlopen(request, timeout=30).read())["choices"][0]["message"]["content"]
try:
    urllib.request.urlopen("http://10.0.0.1/", timeout=3)
    network = "reachable"
except Exception:
    network = "none"
print(json.dumps({"first": first, "second": second, "network": network}))
fwd.kill()
"""


def test_an_agent_in_docker_reaches_the_model_only_through_the_gateway(
    docker_sandbox_factory, tmp_path: Path
) -> None:
    sandbox = docker_sandbox_factory()
    (tmp_path / "agent.py").write_text(AGENT)
    tmp_path.chmod(0o755)  # the sandbox's unprivileged user reads it
    meter = TokenMeter()
    with ScriptedLLM(["first reply", "second reply words"]) as llm:
        with Gateway(llm.base_url, job_id="job-docker", meter=meter, api_key="sk-never-inside",
                     transcript_path=tmp_path / "llm.jsonl") as gw:  # fmt: skip
            assert gw.mount_dir is not None
            result = sandbox.run(
                RunSpec(
                    command=["python3", "/agent/agent.py"],
                    mounts=(Mount(tmp_path, "/agent"), Mount(gw.mount_dir, SOCKET_DIR)),
                    workdir="/agent",
                    env={"METASEARCH_LLM_SOCKET": SOCKET_PATH},
                    limits=Limits(timeout_s=120),
                )
            )
    assert result.ok, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out == {"first": "first reply", "second": "second reply words", "network": "none"}
    assert meter.job("job-docker").calls == 2
    assert meter.job("job-docker").tokens == (2 + 2) + (1 + 3)
    assert len((tmp_path / "llm.jsonl").read_text().splitlines()) == 2
