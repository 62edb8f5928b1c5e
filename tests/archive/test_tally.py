"""The model ledger folds the journal: which model each expansion called, what it spent, what its child
gained over its parent on the same tasks; a study reopened from its journal has the same ledger."""

from __future__ import annotations

import shutil
from pathlib import Path

from metasearch.archive import GitArchive, read_index
from metasearch.archive.tally import ModelLedger
from metasearch.types import Evaluation, Expand, Pull

ROOT = Path(__file__).resolve().parents[2]


def ev(job: str, agent: str, task: str, score: float, flags: tuple[str, ...] = ()) -> dict:
    evaluation = {"job_id": job, "agent_id": agent, "task_id": task, "score": score, "flags": list(flags)}
    return {"op": "evaluation_recorded", "job_id": job, "evaluation": evaluation}


def added(job: str, agent: str, parent: str) -> dict:
    return {"op": "agent_added", "job_id": job, "agent": {"id": agent, "parent_id": parent}}


def test_gain_is_child_minus_parent_on_shared_tasks() -> None:
    ledger = ModelLedger()
    events = [
        ev("e1", "a0", "t1", 0.5),
        ev("e2", "a0", "t2", 1.0),
        {"op": "model_chosen", "job_id": "x1", "model": "small"},
        {"op": "usage", "job_id": "x1", "tokens": 300, "cost_usd": 0.0},
        added("x1", "a1", "a0"),
        ev("e3", "a1", "t1", 1.0),  # +0.5 on t1
        ev("e4", "a1", "t3", 0.0),  # t3: the parent has no score there
        {"op": "model_chosen", "job_id": "x2", "model": "large"},
        {"op": "usage", "job_id": "x2", "tokens": 1000, "cost_usd": 0.01},
        {"op": "expansion_failed", "job_id": "x2", "parent_id": "a0", "reason": "no edit", "kind": "no_edit"},
        {"op": "model_chosen", "job_id": "x3", "model": "large"},
        {"op": "usage", "job_id": "x3", "tokens": 500, "cost_usd": 0.005},
        {"op": "job_abandoned", "job_id": "x3", "reason": "daemon down"},
        {"op": "model_chosen", "job_id": "x4", "model": "small"},
        {"op": "usage", "job_id": "x4", "tokens": 200, "cost_usd": 0.0},
        added("x4", "a2", "a1"),
        ev("e5", "a2", "t4", 1.0, flags=("stale_output",)),  # flagged: counts 0; a1 has no t4 yet
        {"op": "model_chosen", "job_id": "x5", "model": "small"},  # running
    ]
    for event in events:
        ledger.apply(event)
    assert ledger.pulls() == [
        Pull("small", 300.0, 0.5),
        Pull("large", 1000.0, 0.0),
        Pull("small", 200.0, None),  # a2 shares no task with a1 yet
        Pull("small", 0.0, None),
    ]
    assert ledger.pulls("usd")[1] == Pull("large", 0.01, 0.0)
    ledger.apply(ev("e6", "a1", "t4", 0.5))
    assert ledger.pulls()[2] == Pull("small", 200.0, -0.5)  # the flagged 1.0 counts 0
    tallies = ledger.tallies(["large", "small"])
    assert list(tallies) == ["large", "small"]
    assert tallies["small"] == {
        "expansions": 2,
        "children": 2,
        "better": 1,
        "mean_gain": 0.0,
        "gain_per_mtok": round(0.5 * 1e6 / 500, 6),
        "tokens": 500,
        "cost_usd": 0.0,
        "running": 1,
    }
    assert tallies["large"]["expansions"] == 1 and tallies["large"]["tokens"] == 1500  # abandoned spent too
    assert tallies["large"]["mean_gain"] is None and tallies["large"]["children"] == 0


def test_a_reopened_archive_has_the_same_ledger(tmp_path: Path) -> None:
    archive = GitArchive.create(tmp_path / "s", study="s", config_text="study: {name: s}\n")
    seed = archive.add_seed("trainer", ROOT / "seeds" / "trainer", job_id="seed")
    archive.record(Evaluation(job_id="e0", agent_id=seed.id, task_id="t", score=0.25))
    for i, model in enumerate(["small", "large", "small"]):
        job = Expand(parent_id=seed.id, job_id=f"x{i}")
        archive.start_job(job)
        chosen = archive.choose_model(job.job_id, lambda ledger, m=model: m)
        assert chosen == model
        archive.add_usage(job.job_id, 100 * (i + 1), 0.0)
        if i == 1:
            archive.fail_expansion(job, "no edit", kind="no_edit")
            continue
        workspace = tmp_path / f"w{i}"
        shutil.copytree(ROOT / "seeds" / "trainer", workspace)
        (workspace / "note.txt").write_text(f"child {i}\n")
        child = archive.add_child(seed.id, workspace, job_id=job.job_id, meta={"model": model})
        archive.record(Evaluation(job_id=f"e{i + 1}", agent_id=child.id, task_id="t", score=0.75))
    live = archive.index
    archive.close()
    reopened = read_index(tmp_path / "s")
    assert reopened.models.pulls() == live.models.pulls()
    assert reopened.models.pulls() == [
        Pull("small", 100.0, 0.5),
        Pull("large", 200.0, 0.0),
        Pull("small", 300.0, 0.5),
    ]
    assert reopened.failed_expansions[0]["model"] == "large"
    assert reopened.models.tallies()["small"]["children"] == 2
