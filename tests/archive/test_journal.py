"""The journal on its own: ordering, idempotency, torn tails at every byte, corruption, process safety."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metasearch.archive import Journal
from metasearch.errors import ArchiveError
from metasearch.types import Evaluate, Evaluation, Expand, job_to_dict


def _evaluation(job_id: str, agent_id: str = "a00000") -> dict:
    ev = Evaluation(job_id, agent_id, "t", 1.0)
    return {"op": "evaluation_recorded", "job_id": job_id, "evaluation": ev.__dict__ | {"flags": []}}


def _agent(i: int, job_id: str) -> dict:
    agent = {"id": f"a{i:05d}", "parent_id": None, "commit": "0" * 40, "branch": f"agents/a{i:05d}"}
    return {"op": "agent_added", "job_id": job_id, "agent": agent | {"created_at": 0.0, "meta": {}}}


def test_events_replay_in_order_with_timestamps(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.jsonl")
    assert journal.append({"op": "study_created", "study": "s"})
    assert journal.append(_agent(0, "seed"))
    assert journal.append(
        {
            "op": "job_started",
            "job_id": "e1",
            "job": job_to_dict(Evaluate("a00000", "t", "e1")),
            "owner": "h:1:x",
        }
    )
    assert journal.append(
        {"op": "job_started", "job_id": "x1", "job": job_to_dict(Expand("a00000", "x1")), "owner": "h:1:x"}
    )
    assert journal.append({"op": "job_abandoned", "job_id": "x1", "reason": "infra"})
    assert journal.append(_evaluation("e1"))
    events = [json.loads(line) for line in journal.path.read_text().splitlines()]
    assert [e["op"] for e in events] == [
        "study_created", "agent_added", "job_started", "job_started", "job_abandoned", "evaluation_recorded",
    ]  # fmt: skip
    assert all(isinstance(e["ts"], float) for e in events) and events == sorted(events, key=lambda e: e["ts"])
    index = Journal(journal.path).replay()
    assert (
        index.study == "s" and list(index.agents) == ["a00000"] and index.agent_by_job == {"seed": "a00000"}
    )
    assert index.events == 6 and not index.open_jobs and index.closed == {"seed", "e1"}
    assert index.expansions_started == 1 and index.evaluations_started == 1


def test_closing_a_job_twice_is_refused_across_instances(tmp_path: Path) -> None:
    a, b = Journal(tmp_path / "j.jsonl"), Journal(tmp_path / "j.jsonl")
    assert b.replay().events == 0  # b reads before a writes, and must catch up
    assert a.append(_evaluation("e1"))
    assert not b.append(_evaluation("e1"))
    assert not b.append({"op": "expansion_failed", "job_id": "e1", "parent_id": "a00000", "reason": "r"})
    assert b.append({"op": "usage", "job_id": "e1", "tokens": 3, "cost_usd": 0.0})  # not closing: repeatable
    assert b.append({"op": "usage", "job_id": "e1", "tokens": 3, "cost_usd": 0.0})
    assert a.catch_up().tokens == 6
    assert len(a.path.read_text().splitlines()) == 3


def test_a_bad_middle_line_names_its_line_number(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.jsonl")
    for i in range(4):
        journal.append(_evaluation(f"e{i}"))
    lines = journal.path.read_text().splitlines()
    lines[2] = '{"no_op": 1}'
    journal.path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ArchiveError, match="line 3 is not a valid journal event"):
        Journal(journal.path).replay()


@pytest.mark.parametrize("bad", ['{"op":"usage"},{"op":"usage"}', '"op"', "[]", '{"op":"usage"'])
def test_a_line_that_is_not_exactly_one_event_is_corruption(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "j.jsonl"
    path.write_text('{"op":"study_created","study":"s"}\n' + bad + '\n{"op":"study_finished","reason":"r"}\n')
    with pytest.raises(ArchiveError, match="line 2"):
        Journal(path).replay()


def test_garbage_after_the_last_newline_is_a_torn_tail(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.jsonl")
    journal.append(_evaluation("e0"))
    with open(journal.path, "ab") as f:
        f.write(b"\0" * 37 + b"\n")  # what a crash can leave: zeroed blocks after the last write
    reader = Journal(journal.path)
    index = reader.replay()
    assert index.torn_tail and list(index.evaluations) == ["e0"]
    assert reader.append(_evaluation("e1"))
    assert [json.loads(x)["job_id"] for x in journal.path.read_text().splitlines()] == ["e0", "e1"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=0, max_value=10_000))
def test_a_crash_at_any_byte_loses_at_most_the_last_event(tmp_path_factory, cut: int) -> None:
    path = tmp_path_factory.mktemp("j") / "j.jsonl"
    journal = Journal(path)
    for i in range(6):
        journal.append(_evaluation(f"e{i}"))
    data = path.read_bytes()
    cut %= len(data) + 1
    path.write_bytes(data[:cut])  # the file as a crash at byte `cut` of the last writes leaves it
    complete = data[:cut].count(b"\n")
    survivor = Journal(path)
    index = survivor.replay()
    assert list(index.evaluations) == [f"e{i}" for i in range(complete)]
    assert index.torn_tail == (cut not in (0, len(data)) and not data[:cut].endswith(b"\n"))
    assert survivor.append(_evaluation("after"))
    assert list(Journal(path).replay().evaluations) == [f"e{i}" for i in range(complete)] + ["after"]


def _hammer(path: str, worker: int, n: int) -> None:
    journal = Journal(Path(path))
    for i in range(n):
        journal.append(_evaluation(f"shared-{i}"))  # every worker tries to close the same jobs
        journal.append({"op": "usage", "job_id": f"w{worker}-{i}", "tokens": 1, "cost_usd": 0.0})


def test_processes_appending_at_once_lose_nothing_and_close_each_job_once(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_hammer, args=(str(path), w, 60)) for w in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    events = [json.loads(line) for line in path.read_text().splitlines()]  # every line whole
    closed = [e["job_id"] for e in events if e["op"] == "evaluation_recorded"]
    assert sorted(closed) == sorted(f"shared-{i}" for i in range(60))
    index = Journal(path).replay()
    assert index.tokens == 180 and len(index.evaluations) == 60


def test_strings_a_non_utf8_name_decodes_to_are_stored_as_valid_utf8(tmp_path: Path) -> None:
    """A lone surrogate (``os.fsdecode(b"\\xff")``) anywhere in an event, keys and nested values too, is
    stored as its escape, so every reader of the journal gets text any UTF-8 writer accepts."""
    journal = Journal(tmp_path / "j.jsonl")
    name = os.fsdecode(b"/task/\xff")
    event = _evaluation("e1") | {"why": [name, {name: (name, "été")}]}
    event["evaluation"] = event["evaluation"] | {"error": f"link out of the tree: {name} -> /etc"}
    assert journal.append(event)
    (tmp_path / "j.jsonl").read_bytes().decode("utf-8")
    [line] = (tmp_path / "j.jsonl").read_text().splitlines()
    stored = json.loads(line)
    assert stored["evaluation"]["error"] == "link out of the tree: /task/\\udcff -> /etc"
    assert stored["why"] == ["/task/\\udcff", {"/task/\\udcff": ["/task/\\udcff", "été"]}]
    json.dumps(stored, ensure_ascii=False).encode("utf-8")  # no surrogate left anywhere
    again = Journal(tmp_path / "j.jsonl").replay()
    assert (
        again.evaluations["e1"].error
        == journal.index.evaluations["e1"].error
        == stored["evaluation"]["error"]
    )
