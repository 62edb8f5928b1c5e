"""LLMClient against the scripted server over real HTTP: replies, accounting, retries, errors, concurrency."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from metasearch.errors import InfrastructureError
from metasearch.llm.client import LLMClient, LLMError
from metasearch.llm.scripted import ScriptedLLM
from metasearch.llm.usage import BudgetExhausted, Prices, TokenMeter

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "two plus two"}]


def test_a_reply_with_tokens_and_cost() -> None:
    charged: list[tuple[str, int, float]] = []
    meter = TokenMeter(prices=Prices(1.0, 2.0), on_charge=lambda j, t, c: charged.append((j, t, c)))
    with ScriptedLLM(["four it is"]) as llm:
        client = LLMClient(llm.base_url, meter=meter)
        result = client.chat(MESSAGES, job_id="j1", temperature=0.1)
        assert result.text == "four it is"
        assert (result.prompt_tokens, result.completion_tokens) == (5, 3)  # whitespace words
        assert result.cost_usd == pytest.approx((5 * 1.0 + 3 * 2.0) / 1e6)
        assert result.model == "scripted"  # the endpoint's first model when none is configured
        assert llm.requests[0]["temperature"] == 0.1 and llm.requests[0]["max_tokens"] == 4096
    assert meter.job("j1").tokens == 8 and meter.study.calls == 1
    assert charged == [("j1", 8, pytest.approx(11e-6))]


def test_transient_failures_are_retried() -> None:
    with ScriptedLLM([{"status": 503}, {"status": 429}, "fine"]) as llm:
        result = LLMClient(llm.base_url, max_retries=3).chat(MESSAGES)
    assert result.text == "fine" and len(llm.requests) == 3


def test_an_endpoint_that_stays_down_is_an_infrastructure_error() -> None:
    with ScriptedLLM([{"status": 503}]) as llm:
        with pytest.raises(InfrastructureError, match="HTTP 503"):
            LLMClient(llm.base_url, max_retries=2, model="m").chat(MESSAGES)
        assert len(llm.requests) == 3
    port = llm.port  # stopped: nothing listens there any more
    with pytest.raises(InfrastructureError, match="unreachable"):
        LLMClient(f"http://127.0.0.1:{port}/v1", max_retries=1, model="m", timeout_s=2).chat(MESSAGES)


def test_refusals_and_garbage_are_llm_errors_not_crashes() -> None:
    with ScriptedLLM([{"status": 400, "content": "bad request"}]) as llm:
        with pytest.raises(LLMError, match="HTTP 400"):
            LLMClient(llm.base_url, model="m").chat(MESSAGES)
    with ScriptedLLM([{"raw": b"<html>not json</html>"}]) as llm, pytest.raises(LLMError):
        LLMClient(llm.base_url, model="m", max_retries=0).chat(MESSAGES)
    with (
        ScriptedLLM(
            [{"raw": b'{"id": "x", "choices": [], "model": "m", "object": "chat.completion", "created": 0}'}]
        ) as llm,
        pytest.raises(LLMError, match="without choices"),
    ):
        LLMClient(llm.base_url, model="m").chat(MESSAGES)


def test_huge_replies_are_bounded() -> None:
    with ScriptedLLM(["word " * 50_000]) as llm:
        result = LLMClient(llm.base_url, model="m", max_reply_chars=1000).chat(MESSAGES)
    assert len(result.text) < 1100 and result.text.endswith("truncated by metasearch ...]")


def test_budgets_are_enforced_before_the_call() -> None:
    """A call reserves its prompt's bound (20 bytes + 8 per message + 8 = 44) plus its completion cap,
    clipped to the room left, so the job never spends past its cap."""
    meter = TokenMeter(job_limit=60)
    with ScriptedLLM(["one two three four five six seven eight"]) as llm:
        client = LLMClient(llm.base_url, model="m", meter=meter)
        assert client.chat(MESSAGES, job_id="j").completion_tokens == 8  # max_tokens 16: 5 + 8 = 13
        short = client.chat(MESSAGES, job_id="j")  # room 47: max_tokens 3
        assert llm.requests[-1]["max_tokens"] == 3 and short.finish_reason == "length"
        with pytest.raises(BudgetExhausted, match="job: 21 of 60"):
            client.chat(MESSAGES, job_id="j")
        client.chat(MESSAGES, job_id="other")  # another job has its own budget
        assert len(llm.requests) == 3 and meter.held == 0


def test_calls_from_many_threads_reach_the_server_at_once() -> None:
    barrier = threading.Barrier(8, timeout=20)

    def script(body: dict[str, object]) -> str:
        barrier.wait()  # only returns when 8 requests are inside the server together
        return "done"

    with ScriptedLLM(script) as llm:
        client = LLMClient(llm.base_url, model="m", max_retries=0)
        with ThreadPoolExecutor(8) as pool:
            texts = list(pool.map(lambda _: client.chat(MESSAGES).text, range(8)))
    assert texts == ["done"] * 8 and llm.max_in_flight == 8


def test_calls_are_traced_in_the_study_experiment_when_asked(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import mlflow

    from metasearch.llm.config import LLMSection
    from metasearch.llm.service import LLMService
    from metasearch.tracking import store

    with ScriptedLLM(["traced reply"]) as llm:
        section = LLMSection(base_url=llm.base_url, api_key_env=None, trace=True)
        service = LLMService(section, study_dir=tmp_path / "study").start()
        store.trace_to(tmp_path / "study")  # what launch does when llm.trace is set
        try:
            service.client.chat(MESSAGES, job_id="job-7")
        finally:
            service.close()
    uri = store.default_tracking_uri(tmp_path / "study")
    client = store.make_client(uri)
    experiment = store.find_experiment(client, tmp_path / "study", "study")
    assert experiment is not None
    mlflow.set_tracking_uri(uri)
    [trace] = mlflow.search_traces(locations=[experiment], return_type="list", flush=True)
    [span] = trace.data.spans
    assert span.name == "chat" and span.outputs["text"] == "traced reply"
    assert span.attributes["metasearch.job_id"] == "job-7" and span.attributes["prompt_tokens"] == 5
