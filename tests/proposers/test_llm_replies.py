"""The one-shot meta-agent against what real small models do, over real HTTP (the scripted server, with a
vLLM-like context limit and ``/tokenize``): the retry that shows the model its error, a reply cut off by
``max_tokens``, a reply stuck repeating itself, a chat template that refuses a system message, and a prompt
fitted to a context smaller than the parent's code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from metasearch.llm.client import LLMClient
from metasearch.llm.scripted import ScriptedLLM
from metasearch.proposers.base import ProposalContext, ProposalFailed
from metasearch.proposers.llm import LLMProposer
from metasearch.sandboxes.local import LocalSandbox
from metasearch.types import Agent

PARENT = Agent("a00000", None, "0" * 40, "agents/a00000", 0.0)
GOOD = 'Lower the learning rate.\n\nknobs.json\n```json\n{"lr": 0.01}\n```\n'


def workspace(root: Path, filler: int = 0) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "knobs.json").write_text('{"lr": 0.05}\n')
    (root / "solve.py").write_text("import json\n" + "".join(f"# note {i}\n" for i in range(filler)))
    (root / "tests" / "test_solve.py").write_text("def test_x():\n    pass\n")
    return root


def propose(tmp_path: Path, llm: ScriptedLLM, filler: int = 0, **options: Any) -> tuple[Path, Any]:
    ws = workspace(tmp_path / "ws", filler)
    logs = tmp_path / "logs"
    logs.mkdir()
    context = ProposalContext(
        job_id="job-1",
        study_dir=tmp_path,
        log_dir=logs,
        sandbox=LocalSandbox(),
        suite_description="training tasks",
        protected=("tests/**",),
    )
    config = LLMProposer.Config(edit_format="whole", **options)
    client = LLMClient(llm.base_url, max_retries=0)
    try:
        result: Any = LLMProposer(config, study_dir=tmp_path, model=client).propose(PARENT, ws, context)
    except ProposalFailed as exc:
        result = exc
    finally:
        client.close()
    return ws, result


def transcript(tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / "logs" / "transcript.jsonl").read_text().splitlines()]


def test_a_reply_that_does_not_apply_is_retried_with_its_error(tmp_path: Path) -> None:
    with ScriptedLLM(["I think the learning rate should be lower.", GOOD]) as llm:
        ws, proposal = propose(tmp_path, llm)
        retry = llm.requests[1]["messages"][-1]["content"]
    assert not isinstance(proposal, ProposalFailed), proposal
    assert json.loads((ws / "knobs.json").read_text()) == {"lr": 0.01}
    assert "could not be used: no edit found" in retry
    assert proposal.tokens > 0 and proposal.summary == "Lower the learning rate."
    kinds = [e.get("failure") for e in transcript(tmp_path) if "attempt" in e]
    assert kinds == ["no_edit", None]


def test_retries_run_out_with_the_last_failure_class(tmp_path: Path) -> None:
    with ScriptedLLM(['config.json\n```json\n{"lr": 1}\n```']) as llm:
        _, failed = propose(tmp_path, llm, retries=2)
        assert len(llm.requests) == 3
    assert isinstance(failed, ProposalFailed) and failed.kind == "unknown_file"
    assert "(3 answers)" in str(failed) and failed.tokens > 0


def test_a_reply_cut_off_by_max_tokens_mid_edit_is_truncated_not_a_child(tmp_path: Path) -> None:
    cut = 'knobs.json\n```json\n{"lr": 0.01, ' + " ".join(f'"k{i}": {i},' for i in range(200))
    with ScriptedLLM([cut]) as llm:
        ws, failed = propose(tmp_path, llm, retries=0, reply_tokens=64)
        assert llm.requests[0]["max_tokens"] == 64
    assert isinstance(failed, ProposalFailed) and failed.kind == "truncated", failed
    assert json.loads((ws / "knobs.json").read_text()) == {"lr": 0.05}


def test_a_reply_stuck_repeating_itself_is_named(tmp_path: Path) -> None:
    loop = "To improve the model we should change the learning rate.\n" * 40
    with ScriptedLLM([loop]) as llm:
        _, failed = propose(tmp_path, llm, retries=0, reply_tokens=100)
    assert isinstance(failed, ProposalFailed) and failed.kind == "repetition", failed


def test_a_template_that_refuses_a_system_message_gets_it_folded_in(tmp_path: Path) -> None:
    def script(body: dict[str, Any]) -> Any:
        if body["messages"][0]["role"] == "system":
            return {"status": 400, "content": "System role not supported by this chat template"}
        return GOOD

    with ScriptedLLM(script) as llm:
        _, proposal = propose(tmp_path, llm)
        last = llm.requests[-1]["messages"]
    assert not isinstance(proposal, ProposalFailed), proposal
    assert [m["role"] for m in last] == ["user"] and last[0]["content"].startswith("You improve")


def test_the_prompt_is_fitted_to_the_served_context_and_names_what_it_left_out(tmp_path: Path) -> None:
    with ScriptedLLM([GOOD], context_tokens=900) as llm:
        _, proposal = propose(tmp_path, llm, filler=1500, reply_tokens=200)
        sent = llm.requests[0]
    assert not isinstance(proposal, ProposalFailed), proposal  # no 400: it fit
    [fit] = [e["fit"] for e in transcript(tmp_path) if "fit" in e]
    assert fit["context_tokens"] == 900 and fit["counted_by_server"]
    assert fit["prompt_tokens"] <= 900 - 200 and fit["chars"] < 60_000
    assert "file solve.py" in fit["left_out"]
    prompt = sent["messages"][-1]["content"]
    assert "knobs.json" in prompt and "tests/test_solve.py (protected: not shown" in prompt


def test_a_reply_budget_that_leaves_no_room_for_the_prompt_is_a_config_error(tmp_path: Path) -> None:
    from metasearch.errors import ConfigError

    with ScriptedLLM([GOOD], context_tokens=600) as llm, pytest.raises(ConfigError, match="reply_tokens"):
        propose(tmp_path, llm, reply_tokens=512)
