"""The MLflow mirror against a real study (GitArchive + Study), a real SQLite store and a real server."""

from __future__ import annotations

import json
import statistics
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient
from tracking_helpers import (
    FakeSearch,
    MlflowServer,
    TimedCallback,
    drive,
    make_archive,
    make_study,
    run_study,
)

from metasearch.archive import GitArchive
from metasearch.proposers.base import FAILURE_KINDS
from metasearch.tracking import store
from metasearch.tracking.mlflow_callback import MirrorBusy, MlflowMirror, sync


def expected_stats(archive: GitArchive) -> tuple[dict[str, list[float]], dict[str, tuple[float, int]]]:
    """Own scores per agent and clade (mean, trials) per agent, computed from the archive alone (a flagged
    evaluation counts as a failure)."""
    own: dict[str, list[float]] = defaultdict(list)
    for ev in archive.index.evaluations.values():
        own[ev.agent_id].append(0.0 if ev.flags else ev.score)
    children: dict[str, list[str]] = defaultdict(list)
    for agent in archive.index.agents.values():
        if agent.parent_id is not None:
            children[agent.parent_id].append(agent.id)
    clade: dict[str, tuple[float, int]] = {}
    for agent_id in archive.index.agents:
        scores: list[float] = []
        stack = [agent_id]
        while stack:
            node = stack.pop()
            scores += own.get(node, [])
            stack += children.get(node, [])
        if scores:
            clade[agent_id] = (sum(scores) / len(scores), len(scores))
    return own, clade


def runs_of(client: MlflowClient, exp: str, kind: str) -> list[Any]:
    return store.runs_by_kind(client, exp, kind)


def artifact_paths(client: MlflowClient, run_id: str, path: str | None = None) -> set[str]:
    found: set[str] = set()
    for info in client.list_artifacts(run_id, path):
        if info.is_dir:
            found |= artifact_paths(client, run_id, info.path)
        else:
            found.add(info.path)
    return found


def test_a_study_is_mirrored_run_by_run(tmp_path: Path) -> None:
    archive = make_archive(tmp_path)
    mirror = MlflowMirror(archive.root, poll_s=0.2, batch_delay_s=0.05, final_flush_s=120)
    timed = TimedCallback(mirror.start())
    assert mirror.flush(120), mirror.last_error  # the store exists and the seed is mirrored before the search
    study = run_study(archive, budget=15, callbacks=[timed], fail_every=3)
    assert mirror.closed is True, f"final flush failed: {mirror.last_error}"
    # the callback costs the study thread about a queue put (the final flush on StudyFinished aside)
    assert statistics.median(timed.seconds[:-1]) < 1e-4, timed.seconds[:20]

    client = MlflowClient(store.default_tracking_uri(archive.root))
    exp = store.find_experiment(client, archive.root, "s")
    assert exp is not None
    [study_run] = runs_of(client, exp, "study")
    index = archive.index
    assert study_run.info.status == "FINISHED"
    events = [json.loads(line) for line in (archive.root / "journal.jsonl").read_text().splitlines()]
    finished_ts = [e["ts"] for e in events if e["op"] == "study_finished"]
    assert study_run.info.end_time == int(finished_ts[-1] * 1000)
    assert study_run.data.tags["metasearch.finished"].startswith("budget exhausted")
    params = study_run.data.params
    assert params["budget.evaluations"] == "20" and params["scheduler.name"] == "hgm"
    assert params["llm.model"] == "scripted-model"
    metrics = study_run.data.metrics
    assert metrics["tree_size"] == len(index.agents)
    assert metrics["evaluations"] == len(index.evaluations)
    assert metrics["expansions_failed"] == len(index.failed_expansions) > 0
    kinds = Counter(f["kind"] for f in index.failed_expansions)
    assert {k: metrics[f"expansions_failed.{k}"] for k in kinds} == kinds
    assert metrics["tokens"] == index.tokens > 0
    history = client.get_metric_history(study_run.info.run_id, "evaluations")
    assert [m.value for m in history] == sorted(m.value for m in history) and len(history) > 1
    assert study_run.data.tags["metasearch.best_agent"] == study.best()
    assert {"lineage/lineage.html", "lineage/lineage.svg"} <= artifact_paths(client, study_run.info.run_id)
    html = Path(
        client.download_artifacts(study_run.info.run_id, "lineage/lineage.html", str(tmp_path))
    ).read_text()
    assert all(f'data-id="{agent_id}"' in html for agent_id in index.agents)

    own, clade = expected_stats(archive)
    eval_events = [e for e in events if e["op"] == "evaluation_recorded"]
    agent_runs = {r.data.tags[store.AGENT_ID]: r for r in runs_of(client, exp, "agent")}
    assert set(agent_runs) == set(index.agents), "exactly one run per agent"
    failed_parents = {f["parent_id"]: [] for f in index.failed_expansions}
    for f in index.failed_expansions:
        failed_parents[f["parent_id"]].append(f["job_id"])
    for agent_id, run in agent_runs.items():
        agent = index.agents[agent_id]
        data, run_id = run.data, run.info.run_id
        assert data.tags["mlflow.parentRunId"] == study_run.info.run_id
        assert data.params["commit"] == agent.commit and data.params["branch"] == agent.branch
        assert data.params["parent_id"] == (agent.parent_id or "none")
        assert data.params["model"] == "scripted-model"
        files = artifact_paths(client, run_id)
        if agent.parent_id is None:
            assert data.params["proposer"] == "seed"
        else:
            assert data.params["proposer"] == "fake" and "meta.knobs.lr" in data.params
            assert {"proposal.diff.txt", "transcript/transcript.json"} <= files
            diff = Path(
                client.download_artifacts(run_id, "proposal.diff.txt", str(tmp_path / agent_id))
            ).read_text()
            assert "quality.txt" in diff
        evs = [ev for ev in index.evaluations.values() if ev.agent_id == agent_id]
        # start: the agent's creation; end and a terminal status: its latest evaluation (none in flight)
        assert run.info.start_time == int(agent.created_at * 1000)
        if evs:
            last = max(e["ts"] for e in eval_events if e["evaluation"]["agent_id"] == agent_id)
            flagged = any(ev.flags for ev in evs)
            assert (run.info.status, run.info.end_time) == (
                "FAILED" if flagged else "FINISHED",
                int(last * 1000),
            )
        else:
            assert run.info.status == "SCHEDULED" and run.info.end_time is None
        if evs:
            assert data.tags["metasearch.state"] == "evaluated"
            assert data.metrics["own_mean"] == pytest.approx(sum(own[agent_id]) / len(own[agent_id]))
            assert data.metrics["trials"] == len(evs)
            scores = client.get_metric_history(run_id, "score")
            assert sorted(m.step for m in scores) == list(range(1, len(evs) + 1))
            assert "suite.accuracy" in data.metrics and "suite.loss_val" in data.metrics
            assert {f"evaluations/{ev.task_id}/agent.log" for ev in evs} <= files
            flags = {f for ev in evs for f in ev.flags}
            assert set(filter(None, data.tags.get("metasearch.flags", "").split(","))) == flags
            errors = sum(1 for ev in evs if ev.error)
            assert data.metrics.get("errors", 0) == errors
        if agent_id in clade:
            assert data.metrics["cmp"] == pytest.approx(clade[agent_id][0])
            assert data.metrics["clade_trials"] == clade[agent_id][1]
        if agent_id in failed_parents:
            assert data.metrics["failed_expansions"] == len(failed_parents[agent_id])
            assert {f"failed_expansions/{j}/rejected.diff" for j in failed_parents[agent_id]} <= files
            assert data.tags["metasearch.last_failure_kind"] in FAILURE_KINDS
    assert any(r.data.tags.get("metasearch.flags") for r in agent_runs.values()), (
        "the fake flags ~30% of runs"
    )
    for run in agent_runs.values():  # the lineage picture links each node to its run
        assert f'data-run="{run.info.run_id}"' in html
        assert f'href="./#/experiments/{exp}/runs/{run.info.run_id}"' in html
    view = client.get_experiment(exp).tags  # the agents view the UI lists and `metasearch ui` opens
    state = json.loads(json.loads(view[f"mlflow.sharedViewState.{store.AGENTS_VIEW}"])["state"])
    assert {"metrics.`own_mean`", "metrics.`trials`", "metrics.`cmp`", "tags.`metasearch.state`"} <= set(
        state["selectedColumns"]
    )
    assert state["searchFilter"] == store.AGENT_FILTER and state["orderByKey"] == "metrics.`own_mean`"
    best = [a for a, r in agent_runs.items() if r.data.tags.get("metasearch.best_belief") == "true"]
    assert best == [study.best()]
    archive.close()


def test_sync_is_idempotent_and_survives_a_lost_state_file(tmp_path: Path) -> None:
    archive = make_archive(tmp_path)
    run_study(archive, budget=10, callbacks=())  # no mirror at all while the study ran
    first = sync(archive.root)
    assert first["agent_runs"] == len(archive.index.agents) and first["lines"] > 0
    client = MlflowClient(first["tracking_uri"])

    def snapshot() -> dict[str, Any]:
        runs = runs_of(client, first["experiment_id"], "agent")
        return {
            r.data.tags[store.AGENT_ID]: (
                r.info.run_id,
                dict(r.data.params),
                [(m.step, m.value) for m in client.get_metric_history(r.info.run_id, "score")],
            )
            for r in runs
        }

    before = snapshot()
    assert sync(archive.root)["lines"] == 0, "nothing new: nothing to do"
    (archive.root / store.STATE_FILE).unlink()
    again = sync(archive.root)  # replays the whole journal into the same store
    assert again["lines"] == first["lines"]
    assert snapshot() == before, "a replay creates no run twice and adds no metric point twice"
    assert len(runs_of(client, first["experiment_id"], "study")) == 1
    archive.close()


def test_a_retired_task_is_tagged_on_the_study_run(tmp_path: Path) -> None:
    """A task no candidate can be graded on here (the study journals ``task_retired``) shows on the study's
    run, with why."""
    archive = make_archive(tmp_path)
    run_study(archive, budget=4, callbacks=())
    archive.retire_task("t3", "kernels grader on t3: needs 30000 MB\nover the cap of 21694 MB")
    done = sync(archive.root)
    client = MlflowClient(done["tracking_uri"])
    [study_run] = runs_of(client, done["experiment_id"], "study")
    assert study_run.data.tags["metasearch.retired_tasks"] == "t3: kernels grader on t3: needs 30000 MB"
    archive.close()


def test_tracking_server_outage_loses_nothing(
    tmp_path: Path, mlflow_server: MlflowServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # fail fast instead of minutes of retries
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
    archive = make_archive(tmp_path)
    search = FakeSearch(archive, fail_every=4)
    mirror = MlflowMirror(
        archive.root, mlflow_server.url, poll_s=0.2, batch_delay_s=0.05, retry_max_s=1.0
    ).start()
    timed = TimedCallback(mirror)
    study = make_study(archive, budget=1000, callbacks=[timed])
    drive(study, search, 12)
    assert mirror.flush(120), mirror.last_error
    client = MlflowClient(mlflow_server.url)
    exp = store.find_experiment(client, archive.root, "s")
    assert exp is not None and len(runs_of(client, exp, "agent")) == len(archive.index.agents)

    mlflow_server.stop()  # the tracking server dies mid-study
    timed.seconds.clear()
    assert drive(study, search, 12) == 12, "the search goes on"
    assert statistics.median(timed.seconds) < 1e-4, "and the callback stays a queue put"
    assert not mirror.flush(3) and mirror.errors > 0

    mlflow_server.start()  # back on the same port: the live mirror catches up by itself
    assert mirror.flush(120), mirror.last_error
    assert len(runs_of(client, exp, "agent")) == len(archive.index.agents)
    mirror.close(30)

    drive(study, search, 10)  # a study process without a mirror (it crashed, or tracking was off)
    result = sync(archive.root, mlflow_server.url)  # the journal replays what MLflow missed
    assert result["lines"] > 0
    runs = runs_of(client, exp, "agent")
    assert sorted(r.data.tags[store.AGENT_ID] for r in runs) == sorted(archive.index.agents), "no duplicates"
    graded: dict[str, list[float]] = defaultdict(
        list
    )  # the score metric is what the grader said, flags or not
    for ev in archive.index.evaluations.values():
        graded[ev.agent_id].append(ev.score)
    for run in runs:
        agent_id = run.data.tags[store.AGENT_ID]
        history = client.get_metric_history(run.info.run_id, "score")
        assert sorted(m.value for m in history) == sorted(graded.get(agent_id, [])), agent_id
    [study_run] = runs_of(client, exp, "study")
    assert study_run.data.metrics["evaluations"] == len(archive.index.evaluations)
    assert study_run.data.metrics["tree_size"] == len(archive.index.agents)
    archive.close()


def test_one_process_mirrors_a_study_at_a_time(tmp_path: Path) -> None:
    archive = make_archive(tmp_path)
    with MlflowMirror(archive.root, poll_s=0.2) as mirror:
        assert mirror.flush(120), mirror.last_error
        with pytest.raises(MirrorBusy):  # e.g. `metasearch ui` while the study runs: the study's mirror works
            sync(archive.root, lock_timeout_s=0.5)
    assert mirror.closed is True
    assert sync(archive.root)["agent_runs"] == 1  # the lock is released with the mirror
    archive.close()
