"""The gateway over its real unix socket, against the scripted server: forwarding, metering, budgets,
transcripts, outages, bounds, concurrency, and the TCP forwarder third-party agents use."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai
import pytest
from gateway_client import call, chat_body

from metasearch.llm.gateway import Gateway
from metasearch.llm.scripted import ScriptedLLM
from metasearch.llm.serve import free_port
from metasearch.llm.usage import TokenMeter


def test_forwards_fills_the_model_adds_the_key_and_meters(tmp_path: Path) -> None:
    seen: list[dict[str, object]] = []
    with ScriptedLLM(lambda body: seen.append(body) or "a b c") as llm:
        meter = TokenMeter()
        with Gateway(llm.base_url, job_id="j1", meter=meter, model="big-model", api_key="sk-secret",
                     transcript_path=tmp_path / "llm.jsonl") as gw:  # fmt: skip
            status, reply = call(str(gw.socket_path), chat_body("hello there"))
            assert status == 200 and reply["choices"][0]["message"]["content"] == "a b c"
            status, models = call(str(gw.socket_path), path="/v1/models")
            assert status == 200 and models["data"][0]["id"] == "scripted"
            status, err = call(str(gw.socket_path), {"x": 1}, path="/v1/embeddings")
            assert status == 404 and "/chat/completions" in err["error"]["message"]
            mount = gw.mount_dir
            assert mount is not None and (mount / "forwarder.py").is_file()
        assert not mount.exists()  # stop() removes the socket directory
    assert seen[0]["model"] == "big-model"
    assert meter.job("j1").tokens == 2 + 3 and meter.job("j1").calls == 1
    [line] = [json.loads(x) for x in (tmp_path / "llm.jsonl").read_text().splitlines() if '"/chat' in x]
    assert line["status"] == 200 and line["prompt_tokens"] == 2 and "hello there" in line["request"]
    assert "sk-secret" not in (tmp_path / "llm.jsonl").read_text()


def test_the_upstream_key_is_sent_upstream_only() -> None:
    headers: list[str] = []
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        data = conn.recv(65536).decode()
        headers.extend(data.split("\r\n"))
        body = b'{"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}'
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nContent-Type: application/json\r\n\r\n" % len(body)
            + body
        )
        conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    with Gateway(f"http://127.0.0.1:{port}/v1", job_id="j", api_key="sk-secret") as gw:
        status, _ = call(str(gw.socket_path), chat_body())
    thread.join(5)
    listener.close()
    assert status == 200 and "Authorization: Bearer sk-secret" in headers
    assert headers[0] == "POST /v1/chat/completions HTTP/1.1"


def test_job_and_study_budgets_refuse_with_a_clear_error() -> None:
    """Each call reserves its worst case: the prompt's bound (2 bytes of "hi" + 8 per message + 8 = 18)
    plus the completion tokens left, which become its max_tokens; a call that does not fit is refused."""
    with ScriptedLLM(["one two three four five"]) as llm:
        meter = TokenMeter(job_limit=30, study_limit=40)
        with Gateway(llm.base_url, job_id="a", meter=meter) as gw:
            assert call(str(gw.socket_path), chat_body("hi"))[0] == 200  # 1 + 5 = 6
            assert llm.requests[-1]["max_tokens"] == 30 - 18
            assert call(str(gw.socket_path), chat_body("hi"))[0] == 200  # 12
            status, err = call(str(gw.socket_path), chat_body("hi"))  # room 18 < 18 + 1
            assert status == 403 and err["error"]["type"] == "token_budget_exhausted"
            assert "job: 12 of 30 tokens" in err["error"]["message"] and gw.budget_refusals == 1
        with Gateway(llm.base_url, job_id="b", meter=meter) as gw:
            assert call(str(gw.socket_path), chat_body("hi"))[0] == 200  # study at 18
            assert call(str(gw.socket_path), chat_body("hi"))[0] == 200  # room 22: max_tokens 4, at 23
            assert llm.requests[-1]["max_tokens"] == 4
            status, err = call(str(gw.socket_path), chat_body("hi"))  # room 17
            assert status == 403 and "study: 23 of 40" in err["error"]["message"] and gw.study_refusals == 1
        assert len(llm.requests) == 4 and meter.study.tokens == 23 and meter.held == 0


def test_the_completion_is_capped_to_the_room_left() -> None:
    with ScriptedLLM(["one two three four five"]) as llm:
        meter = TokenMeter(job_limit=22)
        with Gateway(llm.base_url, job_id="a", meter=meter) as gw:
            status, reply = call(str(gw.socket_path), {**chat_body("hi"), "max_tokens": 100})
        assert status == 200 and llm.requests[-1]["max_tokens"] == 4
        assert reply["choices"][0]["finish_reason"] == "length" and meter.job("a").tokens == 1 + 4


def test_an_upstream_outage_is_retried_then_reported() -> None:
    with ScriptedLLM([{"status": 503}, {"status": 502}, "recovered"]) as llm:
        with Gateway(llm.base_url, job_id="j", retries=3, backoff_s=0.01) as gw:
            status, reply = call(str(gw.socket_path), chat_body())
            assert status == 200 and reply["choices"][0]["message"]["content"] == "recovered"
            assert gw.upstream_failures == 0
    port = free_port()  # nothing listens there
    with Gateway(f"http://127.0.0.1:{port}/v1", job_id="j", retries=2, backoff_s=0.01) as gw:
        status, err = call(str(gw.socket_path), chat_body())
        assert status == 502 and err["error"]["type"] == "upstream_unavailable"
        assert "after 3 attempts" in err["error"]["message"]
        assert gw.upstream_failures == 1 and "ConnectError" in (gw.last_upstream_error or "")


def test_huge_and_malformed_replies_are_bounded() -> None:
    with ScriptedLLM([{"raw": b"x" * 200_000}, {"raw": b"{not json"}, {"raw": b'{"usage": {}}'}]) as llm:
        with Gateway(llm.base_url, job_id="j", max_response_bytes=100_000) as gw:
            status, err = call(str(gw.socket_path), chat_body())
            assert status == 502 and "over 100000 bytes" in err["error"]["message"]
            status, err = call(str(gw.socket_path), chat_body())
            assert status == 502 and "malformed upstream reply" in err["error"]["message"]
            status, err = call(str(gw.socket_path), chat_body())
            assert status == 502 and "no choices" in err["error"]["message"]
        assert gw.upstream_failures == 0  # the upstream answered: the agent sees the error and goes on


def test_parallel_calls_are_not_serialised() -> None:
    barrier = threading.Barrier(6, timeout=20)
    with ScriptedLLM(lambda body: (barrier.wait(), "ok")[1]) as llm:
        with Gateway(llm.base_url, job_id="j") as gw, ThreadPoolExecutor(6) as pool:
            statuses = list(pool.map(lambda _: call(str(gw.socket_path), chat_body())[0], range(6)))
    assert statuses == [200] * 6 and llm.max_in_flight == 6


def test_the_forwarder_gives_an_openai_client_a_tcp_base_url() -> None:
    with ScriptedLLM(["via tcp"]) as llm, Gateway(llm.base_url, job_id="j") as gw:
        assert gw.mount_dir is not None
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, str(gw.mount_dir / "forwarder.py"), "--port", str(port), "--socket", str(gw.socket_path)],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
            reply = client.chat.completions.create(
                model="default", messages=[{"role": "user", "content": "x"}]
            )
            assert reply.choices[0].message.content == "via tcp"
            assert [m.id for m in client.models.list().data] == ["scripted"]
        finally:
            proc.kill()
            proc.wait()


def test_streams_are_relayed_event_by_event_and_metered(tmp_path: Path) -> None:
    """An `openai` client with stream=True through the forwarder: text arrives in pieces, usage is charged."""
    meter = TokenMeter(job_limit=40)
    with ScriptedLLM(["one two three four five"]) as llm:
        with Gateway(llm.base_url, job_id="j", meter=meter, transcript_path=tmp_path / "llm.jsonl") as gw:
            assert gw.mount_dir is not None
            port = free_port()
            proc = subprocess.Popen(
                [sys.executable, str(gw.mount_dir / "forwarder.py"), "--port", str(port), "--socket", str(gw.socket_path)],
                stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
            try:
                assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
                client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
                pieces = [
                    chunk.choices[0].delta.content
                    for chunk in client.chat.completions.create(
                        model="m", messages=[{"role": "user", "content": "count"}], stream=True
                    )
                    if chunk.choices and chunk.choices[0].delta.content
                ]
                assert pieces == ["one ", "two ", "three ", "four ", "five"]
                assert meter.job("j").tokens == 1 + 5  # the usage event the gateway asked for
                assert llm.requests[0]["stream_options"] == {"include_usage": True}
                client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "again"}], stream=True
                ).close()
                with pytest.raises(
                    openai.PermissionDeniedError, match="token budget"
                ):  # 12 + 6 + 6: room 16 < 17 + 1
                    for _ in range(3):
                        list(
                            client.chat.completions.create(
                                model="m", messages=[{"role": "user", "content": "x"}], stream=True
                            )
                        )
            finally:
                proc.kill()
                proc.wait()
    [first, *_] = [json.loads(x) for x in (tmp_path / "llm.jsonl").read_text().splitlines()]
    assert first["stream"] is True and first["response"] == "one two three four five"


FLAGSHIP = Path(__file__).parents[2] / "configs" / "hgm-kernels-vllm.yaml"


def test_the_flagship_configs_job_cap_stops_a_job_at_the_gateway(tmp_path: Path) -> None:
    from metasearch.config import load_config
    from metasearch.llm.service import LLMService
    from metasearch.llm.usage import prompt_bound

    assert load_config(FLAGSHIP, []).config.llm.max_tokens_per_job == 2_000_000
    bound = prompt_bound(chat_body("hi"))  # what a call reserves for its prompt before it is sent
    with ScriptedLLM(["one two three four five"]) as llm:  # each call: 1 prompt + 5 completion tokens
        overrides = ["llm.serve=null", f"llm.base_url={llm.base_url}", "llm.api_key_env=null"]
        cap = bound + 10
        section = load_config(FLAGSHIP, [*overrides, f"llm.max_tokens_per_job={cap}"]).config.llm
        service = LLMService(section, study_dir=tmp_path)
        try:
            with service.gateway("job-1", tmp_path) as gw:
                replies = [call(str(gw.socket_path), chat_body("hi")) for _ in range(4)]
            assert [status for status, _ in replies] == [200, 200, 403, 403]
            assert replies[2][1]["error"]["type"] == "token_budget_exhausted"
            # each completion may use what the job has left after its prompt's bound: a real model stops
            # at the cap (the scripted one ignores max_tokens and spends 6 per call, 12 in all)
            assert [r["max_tokens"] for r in llm.requests] == [10, 4]
            assert len(llm.requests) == 2 and gw.budget_refusals == 2
            # a proposer's own cap (proposer.max_tokens_per_job) narrows the study's for its job
            with service.gateway("job-2", tmp_path, job_limit=bound + 3) as gw:
                replies = [call(str(gw.socket_path), chat_body("hi")) for _ in range(2)]
            assert [status for status, _ in replies] == [200, 403]
            assert [r["max_tokens"] for r in llm.requests[2:]] == [3]
        finally:
            service.close()


def test_a_call_without_a_cap_is_never_sent_more_than_the_served_context() -> None:
    """A job's budget is far larger than the model's context: a call that names no ``max_tokens`` is sent
    without one (the server bounds it by its context) while the room left covers a full context, and with
    the room left as its cap once less remains. It was sent the whole budget (400,000) and vLLM refused it."""
    with ScriptedLLM(["one two three four five"] * 2) as llm:
        meter = TokenMeter(job_limit=400_000)
        with Gateway(llm.base_url, job_id="j", meter=meter, context_tokens=4096) as gw:
            assert call(str(gw.socket_path), chat_body("hi"))[0] == 200
            assert "max_tokens" not in llm.requests[-1]
        meter = TokenMeter(job_limit=1_000)
        with Gateway(llm.base_url, job_id="k", meter=meter, context_tokens=4096) as gw:
            assert call(str(gw.socket_path), chat_body("hi"))[0] == 200
            assert 0 < llm.requests[-1]["max_tokens"] < 1_000
