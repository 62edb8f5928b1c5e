"""``metasearch status``: aligned tables for a person, ``--json`` unchanged (docs/commands.md documents it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from studies import make_study

from metasearch.status_view import duration, print_status
from metasearch.types import Expand

ROOT = Path(__file__).resolve().parents[2]
JSON_KEYS = [
    "study",
    "agents",
    "evaluations",
    "expansions",
    "expansions_failed",
    "running",
    "budget",
    "best",
    "finished",
    "provenance",  # added later: keys are only ever added, never changed
    "retired_tasks",
    "expansions_failed_by_kind",
    "models",
]


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.split("│")]


def row(lines: list[str], first: str) -> list[str]:
    return next(cells(line) for line in lines if cells(line)[0] == first)


def status_json(study: Path) -> dict:
    """``metasearch status STUDY --json`` as a user runs it, parsed."""
    result = subprocess.run(
        [sys.executable, "-m", "metasearch.cli", "status", str(study), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return dict(json.loads(result.stdout))


def render(study: Path, now: float) -> str:
    console = Console(record=True, width=140, file=open(os.devnull, "w"))  # noqa: SIM115
    print_status(study, console, now=now)
    return console.export_text()


def test_human_status_is_tables(tmp_path: Path) -> None:
    study, archive = make_study(tmp_path)
    try:
        started = archive.index.job_started_at["job-eval"]
        archive.retire_task("kernelbench/L1/59", "kernels grader on L1/59: needs 30000 MB\nover the cap")
        text = render(study, started + 125)
    finally:
        archive.close()
    lines = text.splitlines()
    assert lines[0].startswith("study s: running (process "), lines[0]
    assert "{'" not in text and "[0, 8]" not in text, "no Python reprs"
    assert row(lines, "evaluations") == ["evaluations", "0", "8", "0.0%"]  # the seed's first ones are free
    assert row(lines, "tokens") == ["tokens", "250", "1000", "25.0%"]
    assert row(lines, "expansions") == ["expansions", "0", "unlimited", "-"]
    assert row(lines, "wall_time_s") == ["wall_time_s", "-", "540", "per run"]
    budget_rows = [
        line for line in lines if cells(line)[0] in ("budget", "evaluations", "tokens", "cost_usd")
    ]
    bars = {tuple(i for i, ch in enumerate(line) if ch == "│") for line in budget_rows}
    assert len(bars) == 1, budget_rows  # aligned: every row's columns start at the same places
    states = {
        line.split("│")[0].strip(): line.split("│")[1].strip() for line in lines if line.count("│") == 1
    }
    assert states["being evaluated"] == "1" and states["not yet evaluated"] == "0", states
    assert "best-belief: a00000 (agents/a00000 @" in text and "mean 0.625 over 2 tasks" in text
    job = next(line for line in lines if "job-eval" in line)
    assert "a00000 on training/regression" in job and job.rstrip().endswith("2m 05s"), job
    assert "child of a00000" in next(line for line in lines if "job-expand" in line)
    retired = next(line for line in lines if "retired task" in line)
    assert cells(retired) == ["retired task kernelbench/L1/59", "kernels grader on L1/59: needs 30000 MB"]


def test_a_crashed_run_shows_its_open_jobs(tmp_path: Path) -> None:
    study, archive = make_study(tmp_path)
    archive.release()
    archive.close()
    text = render(study, 0.0)
    assert "stopped with jobs open (crash or kill); `metasearch resume" in text.splitlines()[0]


def test_json_is_unchanged(tmp_path: Path) -> None:
    study, archive = make_study(tmp_path)
    archive.close()
    data = status_json(study)
    assert list(data) == JSON_KEYS
    assert data["budget"] == {
        "evaluations": [0, 8],
        "expansions": [0, None],
        "tokens": [250, 1000],
        "cost_usd": [0.0, None],
        "wall_time_s": [None, 540.0],
    }
    assert data["running"] == 2 and data["best"] == "a00000" and data["finished"] is None
    assert data["retired_tasks"] == {} and data["models"] == {}  # no LLM, no model chosen
    human = subprocess.run(
        [sys.executable, "-m", "metasearch.cli", "status", str(study)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert human.returncode == 0 and "running jobs" in human.stdout and "{'" not in human.stdout


def test_duration() -> None:
    assert [duration(s) for s in (0, 59, 60, 3599, 3600, 86400 + 7200)] == [
        "0s",
        "59s",
        "1m 00s",
        "59m 59s",
        "1h 00m",
        "1d 02h",
    ]


def test_failed_expansions_are_counted_by_class(tmp_path: Path) -> None:
    study, archive = make_study(tmp_path, open_jobs=False)
    try:
        for i, kind in enumerate(["no_edit", "truncated", "no_edit"]):
            archive.fail_expansion(
                Expand(parent_id="a00000", job_id=f"fail-{i}"), f"proposer failed: {kind}", kind=kind
            )
    finally:
        archive.close()
    text = render(study, 0.0)
    states = {
        line.split("│")[0].strip(): line.split("│")[1].strip()
        for line in text.splitlines()
        if line.count("│") == 1
    }
    assert states["failed expansions"] == "3" and states["no_edit"] == "2" and states["truncated"] == "1", (
        states
    )
    data = status_json(study)
    assert data["expansions_failed"] == 3
    assert data["expansions_failed_by_kind"] == {"no_edit": 2, "truncated": 1}
    assert list(data["expansions_failed_by_kind"]) == ["no_edit", "truncated"]  # most frequent first


def test_models_are_tallied(tmp_path: Path) -> None:
    """Per meta-agent model: expansions, children, children better than the parent on the same tasks,
    mean gain, gain per million tokens, tokens and cost, in the table and in ``--json``."""
    study, archive = make_study(tmp_path, open_jobs=False)
    try:
        for i, (model, tokens) in enumerate([("smol", 400), ("gemma", 1000), ("smol", 600)]):
            job = Expand(parent_id="a00000", job_id=f"x{i}")
            archive.start_job(job)
            archive.choose_model(job.job_id, lambda ledger, m=model: m)
            archive.add_usage(job.job_id, tokens, 0.002 if model == "gemma" else 0.0)
            if i < 2:
                archive.fail_expansion(job, "proposer failed: no edit", kind="no_edit")
        # x2 is still running; the child a00001 from make_study was written without a model
    finally:
        archive.close()
    data = status_json(study)
    assert list(data)[-1] == "models"
    assert data["models"]["smol"] == {
        "expansions": 1,
        "children": 0,
        "better": 0,
        "mean_gain": None,
        "gain_per_mtok": 0.0,
        "tokens": 1000,
        "cost_usd": 0.0,
        "running": 1,
    }
    assert data["models"]["gemma"]["cost_usd"] == 0.002
    lines = render(study, 0.0).splitlines()
    header = next(line for line in lines if "gain / Mtok" in line)
    assert cells(header.replace("┃", "│")) == [
        "model", "expansions", "children", "better", "mean gain", "gain / Mtok", "tokens", "cost"
    ]  # fmt: skip
    assert row(lines, "smol") == ["smol", "1 (+1 running)", "0", "0", "-", "0.000", "1000", "$0.00"]
    assert row(lines, "gemma") == ["gemma", "1", "0", "0", "-", "0.000", "1000", "$0.00"]
