"""``LLMService`` with several models: each model's gateway, and a Ray worker's description of it, is sized
to that model's own served context, not the first model's."""

from __future__ import annotations

from pathlib import Path

from gateway_client import call, chat_body

from metasearch.llm.config import LLMSection, ModelEntry
from metasearch.llm.scripted import ScriptedLLM
from metasearch.llm.service import LLMService


def test_each_models_gateway_uses_its_own_served_context(tmp_path: Path) -> None:
    with (
        ScriptedLLM(["one two three"] * 2, model="small-m", context_tokens=2048) as small,
        ScriptedLLM(["one two three"] * 2, model="large-m", context_tokens=8192) as large,
    ):
        section = LLMSection(
            api_key_env=None,
            max_tokens_per_job=6000,
            models=[
                ModelEntry(name="small", base_url=small.base_url),
                ModelEntry(name="large", base_url=large.base_url),
            ],
        )
        service = LLMService(section, study_dir=tmp_path).start()
        try:
            assert (service.context_of("small"), service.context_of("large")) == (2048, 8192)
            assert service.context_tokens == 2048  # the first model's
            assert service.remote(model="large").context_tokens == 8192
            assert service.remote().context_tokens == 2048
            # The job's room (6000) covers the small model's whole context: sent without a cap, the server
            # bounds it. It does not cover the large model's: capped to the room left.
            with service.gateway("j1", tmp_path, model="small") as gw:
                assert gw.context_tokens == 2048
                assert call(str(gw.socket_path), chat_body("hi"))[0] == 200
            assert "max_tokens" not in small.requests[-1]
            with service.gateway("j2", tmp_path, model="large") as gw:
                assert gw.context_tokens == 8192
                assert call(str(gw.socket_path), chat_body("hi"))[0] == 200
            assert 0 < large.requests[-1]["max_tokens"] < 6000
        finally:
            service.close()
