from __future__ import annotations

from collections.abc import Iterator

import pytest

from metasearch.llm.scripted import ScriptedLLM


@pytest.fixture
def scripted() -> Iterator[ScriptedLLM]:
    with ScriptedLLM(["hello from the model"]) as llm:
        yield llm
