"""Calibration reads a real journal (written by a real Study over a real git archive) and its fit drives
the benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from metasearch.errors import MetasearchError
from metasearch.sim.bench import run
from metasearch.sim.calibrate import calibrated_family, fit_study, realism_from_fit, summary_lines


def write_journal(path: Path, events: list[dict]) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "journal.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))


def agent(aid: str, parent: str | None) -> dict:
    return {"id": aid, "parent_id": parent, "commit": "c", "branch": f"agents/{aid}", "created_at": 0.0}


def evaluation(job: str, aid: str, task: str, score: float, ts: float, duration: float) -> list[dict]:
    start = {
        "op": "job_started",
        "ts": ts - duration,
        "job_id": job,
        "job": {"kind": "evaluate", "job_id": job, "agent_id": aid, "task_id": task},
    }
    ev = {"job_id": job, "agent_id": aid, "task_id": task, "score": score, "duration_s": duration}
    return [start, {"op": "evaluation_recorded", "ts": ts, "job_id": job, "evaluation": ev}]


@pytest.fixture
def study(tmp_path: Path) -> Path:
    events: list[dict] = [{"op": "agent_added", "ts": 0.0, "job_id": "seed", "agent": agent("s", None)}]
    for k, t in enumerate(("t0", "t1", "t2", "t3")):
        events += evaluation(f"e{k}", "s", t, float(k == 0), 10.0 + k, 2.0 if k == 0 else 1.0)
    for k, child in enumerate(("c1", "c2")):
        events.append(
            {
                "op": "job_started",
                "ts": 20.0,
                "job_id": f"x{k}",
                "job": {"kind": "expand", "job_id": f"x{k}", "parent_id": "s"},
            }
        )
        events.append({"op": "agent_added", "ts": 30.0, "job_id": f"x{k}", "agent": agent(child, "s")})
    events.append(
        {
            "op": "job_started",
            "ts": 20.0,
            "job_id": "x9",
            "job": {"kind": "expand", "job_id": "x9", "parent_id": "s"},
        }
    )
    events.append({"op": "expansion_failed", "ts": 22.0, "job_id": "x9", "parent_id": "s", "reason": "r"})
    for k, t in enumerate(("t0", "t1", "t2", "t3")):
        events += evaluation(f"c1e{k}", "c1", t, float(k < 3), 40.0 + k, 2.0 if k < 3 else 1.0)
        events += evaluation(f"c2e{k}", "c2", t, 0.0, 40.0 + k, 1.0)
    events.append({"op": "job_abandoned", "ts": 50.0, "job_id": "c2e9", "reason": "daemon"})
    write_journal(tmp_path / "st", events)
    return tmp_path / "st"


def test_fit_measures_steps_failures_durations_and_tasks(study: Path) -> None:
    fit = fit_study(study)
    assert fit["seed_mean"] == pytest.approx(0.25)
    assert sorted(fit["step"]["values"]) == pytest.approx([-0.25, 0.5])
    assert fit["expansion_failure_rate"] == pytest.approx(1 / 3)
    assert fit["durations"]["evaluation_solved"]["mean"] == pytest.approx(2.0)
    assert fit["durations"]["evaluation_unsolved"]["mean"] == pytest.approx(1.0)
    assert fit["durations"]["expansion_admitted"]["mean"] == pytest.approx(10.0)
    assert fit["durations"]["expansion_failed"]["mean"] == pytest.approx(2.0)
    assert fit["task_solve_rates"] == pytest.approx({"t0": 2 / 3, "t1": 1 / 3, "t2": 1 / 3, "t3": 0.0})
    realism = realism_from_fit(fit)
    assert realism.eval_time_success > realism.eval_time_failure
    assert realism.failed_expansion_time == pytest.approx(0.2)


def test_calibrated_family_follows_the_fit(study: Path, tmp_path: Path) -> None:
    path = tmp_path / "fit.json"
    path.write_text(json.dumps(fit_study(study)))
    family = calibrated_family(path, n_tasks=40)
    members = [family(np.random.default_rng(k)) for k in range(200)]
    assert len(members[0].task_easiness) == 40
    assert 0.2 < np.mean([m.fail_rate for m in members]) < 0.5  # around 1 failure in 3
    assert np.mean([m.step_mean for m in members]) > 0  # the children improved on average (+0.125)


def test_bench_runs_a_calibrated_family(
    study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "fit.json"
    path.write_text(json.dumps(fit_study(study)))
    argv = ["--seeds", "3", "--budget", "40", "--workers", "2", "--tasks", "8", "--families", "default"]
    assert run([*argv, "--schedulers", "hgm-paper,hgm", "--calibrated", str(path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["family"] for r in rows] == ["default", "default", "calibrated", "calibrated"]


def test_calibrate_errors_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(MetasearchError, match="no journal"):
        fit_study(tmp_path)
    bad = tmp_path / "fit.json"
    bad.write_text("{}")
    with pytest.raises(MetasearchError, match="missing key 'step'"):
        calibrated_family(bad)


def test_cli_sim_calibrate_writes_the_fit(study: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from metasearch.cli import app

    out = tmp_path / "cal.json"
    result = CliRunner().invoke(app, ["sim", "calibrate", str(study), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "failure rate 0.333" in result.output
    assert json.loads(out.read_text())["expansions"] == {"admitted": 2, "failed": 1}


def test_a_fit_without_children_says_its_step_is_the_prior(study: Path) -> None:
    """A study whose expansions all failed (a 135M model on kernels) measures no step: the summary says that
    tables on it show the simulator's prior, and that few gradings per task make wide task posteriors."""
    fit = fit_study(study)
    assert not any(line.startswith("warning") for line in summary_lines(fit))  # 2 children, 3 gradings a task
    fit["step"] = {"mean": None, "sd": None, "sd_without_noise": None, "n": 0, "values": []}
    fit["task_trials"] = dict.fromkeys(fit["task_trials"], 1)
    warnings = [line for line in summary_lines(fit) if line.startswith("warning")]
    assert (
        len(warnings) == 2 and "no child was admitted" in warnings[0] and "at most 1 time(s)" in warnings[1]
    )


def test_bench_and_tune_repeat_a_fits_warnings_when_they_draw_from_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A table on the kernels study's fit (no child admitted) shows the prior: `bench schedulers` says so
    on stderr before the table, as `sim calibrate` did."""

    fit = Path(__file__).resolve().parents[2] / "bench" / "fits" / "kernels-cpu-smollm2.json"
    args = ["--families", f"calibrated:{fit}", "--schedulers", "hgm-paper", "--seeds", "2", "--budget", "6"]
    assert run([*args, "--workers", "2", "--tasks", "3", "--heldout-tasks", "0", "--json"]) == 0
    assert "no child was admitted" in capsys.readouterr().err
