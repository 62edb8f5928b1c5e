"""The gateway's reservation covers every completion a request can produce (``n``, ``best_of``, a list of
prompts), the model is the configured one, and an upstream that spends past the reservation is charged and
counted. Over the gateway's real socket, against the scripted server answering like vLLM does."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from gateway_client import UnixHTTP, call, chat_body

from metasearch.llm.gateway import Gateway
from metasearch.llm.scripted import ScriptedLLM
from metasearch.llm.usage import TokenMeter, prompt_bound


def honours_copies(body: dict[str, Any]) -> dict[str, Any]:
    """A reply with one choice per completion asked for, each using its whole max_tokens (as a model that
    never stops early would), and the usage a vLLM server reports for them."""
    prompt = body.get("prompt")
    token_ids = isinstance(prompt, list) and all(isinstance(x, int) for x in prompt)
    prompts = len(prompt) if isinstance(prompt, list) and not token_ids else 1
    copies = max(body.get("n") or 1, body.get("best_of") or 1) * prompts
    choices = [{"index": i, "message": {"role": "assistant", "content": "x"}} for i in range(copies)]
    usage = {"prompt_tokens": 10, "completion_tokens": copies * body["max_tokens"]}
    return {"raw": json.dumps({"choices": choices, "usage": usage}).encode()}


@pytest.mark.parametrize(
    ("route", "body", "completions"),
    [
        ("/v1/chat/completions", {**chat_body("hi"), "max_tokens": 1000, "n": 50}, 50),
        ("/v1/completions", {"prompt": ["hi"] * 50, "max_tokens": 1000}, 50),
        ("/v1/completions", {"prompt": ["hi"] * 5, "max_tokens": 1000, "n": 2, "best_of": 4}, 20),
    ],
    ids=["chat-n", "prompt-list", "best-of-times-prompts"],
)
def test_many_completions_share_the_room_and_never_pass_the_caps(
    route: str, body: dict[str, Any], completions: int
) -> None:
    with ScriptedLLM(honours_copies) as llm:
        meter = TokenMeter(study_limit=10_000, job_limit=2_000)
        with Gateway(llm.base_url, job_id="j", meter=meter) as gw:
            status, reply = call(str(gw.socket_path), body, path=route)
        assert status == 200 and len(reply["choices"]) == completions
        bound = prompt_bound(body)
        each = (2_000 - bound) // completions  # one completion's share of the room after the prompt's bound
        assert llm.requests[0]["max_tokens"] in (each, each + 1)
        # charged what the upstream reported, within the cap, nothing left held
        assert meter.job("j").tokens == 10 + completions * llm.requests[0]["max_tokens"] <= 2_000
        assert meter.study.tokens <= 10_000 and meter.held == 0 and gw.overruns == 0


def test_a_call_without_a_token_for_each_completion_is_refused_naming_the_count() -> None:
    with ScriptedLLM(honours_copies) as llm:
        meter = TokenMeter(job_limit=prompt_bound(chat_body("hi")) + 49)
        with Gateway(llm.base_url, job_id="j", meter=meter) as gw:
            status, err = call(str(gw.socket_path), {**chat_body("hi"), "max_tokens": 1, "n": 50})
            assert status == 403 and err["error"]["type"] == "token_budget_exhausted"
            assert "50 completions (n, best_of, prompts)" in err["error"]["message"]
            assert gw.budget_refusals == 1 and meter.held == 0 and not llm.requests
            assert call(str(gw.socket_path), {**chat_body("hi"), "n": 49})[0] == 200  # one token each fits
        assert llm.requests[0]["max_tokens"] == 1 and meter.job("j").tokens == 10 + 49


@pytest.mark.parametrize(
    ("field", "value"),
    [("n", "50"), ("n", 0), ("n", True), ("n", 2.0), ("best_of", -1), ("max_tokens", 0)],
)
def test_a_count_or_cap_that_is_not_a_positive_integer_is_a_400_naming_it(field: str, value: Any) -> None:
    """A server would coerce "50" or 2.0 to a count: only plain integers are read, and nothing else passes."""
    with (
        ScriptedLLM(["ok"]) as llm,
        Gateway(llm.base_url, job_id="j", meter=TokenMeter(job_limit=1_000)) as gw,
    ):
        status, err = call(str(gw.socket_path), {**chat_body(), field: value})
        assert status == 400 and err["error"]["type"] == "invalid_request_error"
        assert err["error"]["message"] == f"{field} must be a positive integer, not {value!r}"
        assert not llm.requests and gw.meter.held == 0


def test_every_completion_cap_the_request_names_is_clipped() -> None:
    """vLLM reads ``max_completion_tokens or max_tokens``: each that is present gets the granted cap."""
    with ScriptedLLM(["ok"]) as llm:
        with Gateway(llm.base_url, job_id="j", meter=TokenMeter(job_limit=100)) as gw:
            body = {**chat_body("hi"), "max_completion_tokens": 5, "max_tokens": 100_000}
            assert call(str(gw.socket_path), body)[0] == 200
            assert call(str(gw.socket_path), {**chat_body("hi"), "max_completion_tokens": 5})[0] == 200
    first, second = llm.requests
    assert first["max_completion_tokens"] == first["max_tokens"] == 100 - prompt_bound(chat_body("hi"))
    assert second["max_completion_tokens"] == 5 and "max_tokens" not in second


def test_a_list_of_token_ids_is_one_prompt() -> None:
    with ScriptedLLM(honours_copies) as llm:
        with Gateway(llm.base_url, job_id="j", meter=TokenMeter(job_limit=1_000)) as gw:
            body = {"prompt": [101, 102, 103], "max_tokens": 50}
            status, reply = call(str(gw.socket_path), body, path="/v1/completions")
    assert status == 200 and len(reply["choices"]) == 1 and llm.requests[0]["max_tokens"] == 50


def test_the_model_is_always_the_configured_one() -> None:
    with ScriptedLLM(["ok"]) as llm:
        with Gateway(llm.base_url, job_id="j", model="small-model") as gw:
            for name in ("gpt-4-32k", "", None, "default"):
                assert call(str(gw.socket_path), {**chat_body(), "model": name})[0] == 200
            prompt = {"prompt": "hi", "model": "big-model"}
            assert call(str(gw.socket_path), prompt, path="/v1/completions")[0] == 200
    assert [r["model"] for r in llm.requests] == ["small-model"] * 5


def test_a_stream_with_n_gets_each_completion_its_share() -> None:
    with ScriptedLLM(["one two three"]) as llm:
        meter = TokenMeter(job_limit=prompt_bound(chat_body("hi")) + 40)
        with Gateway(llm.base_url, job_id="j", meter=meter) as gw:
            body = {**chat_body("hi"), "n": 4, "max_tokens": 1_000, "stream": True}
            status, events = _stream(str(gw.socket_path), body)
        assert (
            status == 200
            and events.endswith(b"data: [DONE]\n\n")
            and llm.requests[0]["max_tokens"] == 10
            and llm.requests[0]["n"] == 4
        )
        assert meter.held == 0 and meter.job("j").tokens == 1 + 3


def test_an_upstream_that_spends_past_the_reservation_is_charged_counted_and_stops_the_job(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An upstream that ignores max_tokens (or n): the real usage is charged, not the reservation, so the
    job is over its cap, which refuses its next call; the overrun is logged and counted."""
    ignores_caps = {
        "raw": json.dumps(
            {"choices": [{"text": "x"}], "usage": {"prompt_tokens": 5, "completion_tokens": 500}}
        )
    }
    with ScriptedLLM([ignores_caps]) as llm:
        meter = TokenMeter(job_limit=100)
        with Gateway(llm.base_url, job_id="j", meter=meter) as gw, caplog.at_level(logging.WARNING):
            assert (
                call(str(gw.socket_path), {"prompt": "hi", "max_tokens": 10}, path="/v1/completions")[0]
                == 200
            )
            status, err = call(str(gw.socket_path), {"prompt": "hi"}, path="/v1/completions")
        assert meter.job("j").tokens == 505 and gw.overruns == 1 and meter.held == 0
        assert status == 403 and "505 of 100 tokens" in err["error"]["message"] and len(llm.requests) == 1
        assert "upstream charged 505 tokens, 20 reserved" in caplog.text


def _stream(socket_path: str, body: dict[str, Any]) -> tuple[int, bytes]:
    conn = UnixHTTP(socket_path)
    try:
        conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()
