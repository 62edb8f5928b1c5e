"""Fit the simulator to a real study: ``metasearch sim calibrate <study_dir>``.

Reads the study's ``journal.jsonl`` (any suite; read-only, no lock taken) and measures:

* ``step``: child-minus-parent quality, paired on the tasks both were evaluated on (difference of own
  means when they share none); its spread with the measurement noise taken out (the variance of the
  per-task paired differences over their number; the binomial variance when they share under two tasks);
* ``expansion_failure_rate``: failed expansions over finished ones;
* ``durations``: seconds per job by kind and outcome (evaluations: solved, score >= 0.5, or not; expansions:
  admitted or failed), as log-normal mean and sigma;
* ``infra_failure_rate``: abandoned jobs over started ones; ``expansion_tokens``: tokens per expansion;
* ``task_solve_rates``: mean score per task over every evaluation, and the seed's own mean.

``calibrated_family(path)`` turns the fit into a landscape factory for ``bench schedulers --calibrated``:
each family member draws its step mean, failure rate and task set around the fit (its uncertainty from the
study's sample sizes), so a small study gives a wide family, not false precision. ``realism_from_fit``
gives the matching simulator realism, durations in units of the mean evaluation.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from metasearch.errors import MetasearchError
from metasearch.sim.realism import Realism, solve_probabilities


def read_journal(study_dir: Path) -> list[dict[str, Any]]:
    path = study_dir / "journal.jsonl"
    if not path.is_file():
        raise MetasearchError(f"{study_dir}: no journal.jsonl (is this a study directory?)")
    events = []
    lines = path.read_bytes().splitlines()
    for k, line in enumerate(lines):
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            if k == len(lines) - 1:  # a torn tail from a crash: ignore, as replay does
                break
            raise MetasearchError(f"{path}:{k + 1}: not JSON") from None
        if isinstance(event, dict) and "op" in event:
            events.append(event)
    return events


def _lognormal_fit(values: list[float]) -> dict[str, float] | None:
    v = np.asarray([x for x in values if x > 0], dtype=float)
    if len(v) == 0:
        return None
    logs = np.log(v)
    return {"mean": float(v.mean()), "sigma": float(logs.std(ddof=1)) if len(v) > 1 else 0.5, "n": len(v)}


def fit_study(study_dir: Path) -> dict[str, Any]:
    """The calibration record of one study (a JSON-ready dict; see the module docstring)."""
    events = read_journal(study_dir)
    parent: dict[str, str | None] = {}
    started: dict[str, tuple[float, dict[str, Any]]] = {}
    scores: dict[str, dict[str, float]] = defaultdict(dict)
    durations: dict[str, list[float]] = defaultdict(list)
    by_task: dict[str, list[float]] = defaultdict(list)
    failed = admitted = abandoned = 0
    tokens = 0.0
    for e in events:
        op, ts = e["op"], float(e.get("ts", 0.0))
        if op == "job_started":
            started[e["job_id"]] = (ts, e["job"])
        elif op == "agent_added":
            a = e["agent"]
            parent[a["id"]] = a["parent_id"]
            if a["parent_id"] is not None and e.get("job_id") in started:
                admitted += 1
                durations["expansion_admitted"].append(ts - started[e["job_id"]][0])
        elif op == "expansion_failed":
            failed += 1
            if e.get("job_id") in started:
                durations["expansion_failed"].append(ts - started[e["job_id"]][0])
        elif op == "evaluation_recorded":
            ev = e["evaluation"]
            score = 0.0 if ev.get("flags") else float(ev["score"])
            scores[ev["agent_id"]][ev["task_id"]] = score
            by_task[ev["task_id"]].append(score)
            key = "evaluation_solved" if score >= 0.5 else "evaluation_unsolved"
            durations[key].append(float(ev.get("duration_s") or 0.0))
        elif op == "job_abandoned":
            abandoned += 1
        elif op == "usage":
            tokens += float(e.get("tokens", 0))
    if not scores:
        raise MetasearchError(f"{study_dir}: the journal has no evaluations to calibrate on")
    steps, noise = [], []
    for child, p in parent.items():
        if p is None or not scores.get(child) or not scores.get(p):
            continue
        common = sorted(set(scores[child]) & set(scores[p]))
        c = [scores[child][t] for t in common] if common else list(scores[child].values())
        q = [scores[p][t] for t in common] if common else list(scores[p].values())
        steps.append(float(np.mean(c) - np.mean(q)))
        if len(common) > 1:  # the paired differences' own spread (fractional scores are not Bernoulli)
            noise.append(float(np.var(np.subtract(c, q), ddof=1)) / len(common))
        else:
            pooled = float(np.mean(c + q))
            noise.append(pooled * (1 - pooled) * (1 / len(c) + 1 / len(q)))
    seeds = [a for a, p in parent.items() if p is None and scores.get(a)]
    seed_mean = float(np.mean([np.mean(list(scores[a].values())) for a in seeds])) if seeds else None
    step_sd = float(np.std(steps, ddof=1)) if len(steps) > 1 else None
    finished = failed + admitted
    return {
        "study": study_dir.name,
        "agents": len(parent),
        "evaluations": sum(len(v) for v in scores.values()),
        "seed_mean": seed_mean,
        "step": {
            "mean": float(np.mean(steps)) if steps else None,
            "sd": step_sd,
            "sd_without_noise": (
                math.sqrt(max(step_sd**2 - float(np.mean(noise)), 0.0)) if step_sd is not None else None
            ),
            "n": len(steps),
            "values": steps,
        },
        "expansion_failure_rate": failed / finished if finished else None,
        "expansions": {"admitted": admitted, "failed": failed},
        "infra_failure_rate": abandoned / len(started) if started else 0.0,
        "expansion_tokens": tokens / max(1, len(durations["expansion_admitted"]) + failed),
        "durations": {k: _lognormal_fit(v) for k, v in sorted(durations.items())},
        "task_solve_rates": {t: float(np.mean(v)) for t, v in sorted(by_task.items())},
        "task_trials": {t: len(v) for t, v in sorted(by_task.items())},
    }


PRIOR_STEP_SD = 0.05  # a step's spread when the study admitted no child to measure it by


def summary_lines(fit: dict[str, Any]) -> list[str]:
    """What ``metasearch sim calibrate`` prints."""
    step, exp = fit["step"], fit["expansions"]

    def num(x: float | None, fmt: str = "{:.3f}") -> str:
        return "n/a" if x is None else fmt.format(x)

    lines = [
        f"study {fit['study']}: {fit['agents']} agents, {fit['evaluations']} evaluations, seed mean "
        f"{num(fit['seed_mean'])}",
        f"child - parent quality: mean {num(step['mean'], '{:+.3f}')}, sd {num(step['sd'])} "
        f"({num(step['sd_without_noise'])} without measurement noise) over {step['n']} children",
        f"expansions: {exp['admitted']} admitted, {exp['failed']} failed (failure rate "
        f"{num(fit['expansion_failure_rate'])}); {fit['expansion_tokens']:.0f} tokens each; infrastructure "
        f"failures {fit['infra_failure_rate']:.3f} of jobs",
    ]
    for key, d in fit["durations"].items():
        if d:
            lines.append(f"duration {key}: mean {d['mean']:.1f}s, log-sd {d['sigma']:.2f} (n={d['n']})")
    rates = fit["task_solve_rates"]
    lines.append(
        f"tasks: {len(rates)}; solve rate min {min(rates.values()):.2f}, median "
        f"{float(np.median(list(rates.values()))):.2f}, max {max(rates.values()):.2f}"
    )
    return lines + fit_warnings(fit)


def fit_warnings(fit: dict[str, Any]) -> list[str]:
    """What a fit cannot say (``sim calibrate`` prints it; ``bench schedulers`` and ``tune`` repeat it to
    stderr when they draw from the fit)."""
    warnings = []
    trials = fit.get("task_trials", {})
    if not fit["step"]["n"]:
        warnings.append(
            f"warning: no child was admitted, so the study says nothing about how children differ from "
            f"their parents; --calibrated draws that step from a prior (mean 0, sd {PRIOR_STEP_SD}), and "
            "tables on this fit compare schedulers on that prior, not on this study"
        )
    if trials and max(trials.values()) < 3:
        warnings.append(
            f"warning: each task was graded at most {max(trials.values())} time(s); --calibrated draws task "
            "difficulty from wide posteriors around these rates"
        )
    return warnings


def realism_from_fit(fit: dict[str, Any]) -> Realism:
    """Simulator realism with the study's durations (relative to its mean evaluation) and failure rates."""
    d = fit["durations"]
    evals = [x for x in (d.get("evaluation_solved"), d.get("evaluation_unsolved")) if x]
    unit = float(np.average([x["mean"] for x in evals], weights=[x["n"] for x in evals])) if evals else 1.0
    unit = unit or 1.0

    def rel(key: str, default: float) -> float:
        return d[key]["mean"] / unit if d.get(key) else default

    sigmas = [x["sigma"] for x in d.values() if x and x["n"] > 1]
    expansion = rel("expansion_admitted", 5.0)
    return Realism(
        task_spread=0.0,  # the landscape carries the study's own task difficulties
        easy_tasks=0.0,
        never_tasks=0.0,
        eval_time_success=rel("evaluation_solved", 1.0),
        eval_time_failure=rel("evaluation_unsolved", 1.0),
        duration_sigma=float(np.median(sigmas)) if sigmas else 0.5,
        expansion_time=expansion,
        failed_expansion_time=rel("expansion_failed", expansion) / expansion,
        infra_failure_rate=float(fit.get("infra_failure_rate") or 0.0),
        expansion_tokens=float(fit.get("expansion_tokens") or 0.0),
    )


@dataclass(frozen=True)
class CalibratedLandscape:
    """A lineage landscape whose steps, failures and tasks come from a real study (``calibrated_family``)."""

    root_quality: float
    step_mean: float
    step_sd: float
    rate_sd: float
    fail_rate: float
    task_easiness: np.ndarray = field(repr=False)

    def root(self, rng: np.random.Generator) -> tuple[float, float]:
        return (self.root_quality, self.step_mean)

    def child(self, state: tuple[float, float], rng: np.random.Generator) -> tuple[float, float] | None:
        if rng.random() < self.fail_rate:
            return None
        quality, rate = state
        rate = rate + rng.normal(0.0, self.rate_sd)
        return (float(np.clip(quality + rng.normal(rate, self.step_sd), 0.01, 0.99)), rate)

    def quality(self, state: tuple[float, float]) -> float:
        return state[0]


def _logit(p: np.ndarray) -> np.ndarray:
    return np.log(p / (1 - p))


def _latent_for(target: float, easiness: np.ndarray) -> float:
    """The latent quality q whose mean solve probability over these tasks is ``target`` (bisection)."""
    lo, hi = 1e-4, 1 - 1e-4
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if float(np.mean(solve_probabilities(mid, easiness))) < target:
            lo = mid
        else:
            hi = mid
    return float(np.clip(0.5 * (lo + hi), 0.01, 0.99))


class calibrated_family:
    """``factory(rng) -> CalibratedLandscape`` drawn around the fit stored at ``path``."""

    def __init__(self, path: Path | str, n_tasks: int = 60) -> None:
        try:
            self.fit = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise MetasearchError(f"--calibrated {path}: cannot read the calibration ({exc})") from None
        for key in ("step", "task_solve_rates", "seed_mean"):
            if key not in self.fit:
                raise MetasearchError(
                    f"--calibrated {path}: missing key {key!r} (written by `sim calibrate`?)"
                )
        self.n_tasks = n_tasks
        self.realism = realism_from_fit(self.fit)

    def __call__(self, rng: np.random.Generator) -> CalibratedLandscape:
        fit = self.fit
        step = fit["step"]
        n = max(1, int(step["n"]))
        mean = step["mean"] if step["mean"] is not None else 0.0
        sd = step["sd_without_noise"] if step["sd_without_noise"] is not None else PRIOR_STEP_SD
        sd = max(sd, 0.01)
        exp = fit["expansions"]
        rates = np.array(list(fit["task_solve_rates"].values()))
        trials = np.array(list(fit["task_trials"].values()))
        picked = rng.integers(len(rates), size=self.n_tasks)
        # a task's solve rate with its sampling noise: Beta posterior of the observed rate
        r = rng.beta(0.5 + rates[picked] * trials[picked], 0.5 + (1 - rates[picked]) * trials[picked])
        overall = float(np.clip(np.mean(rates), 0.02, 0.98))
        easiness = _logit(np.clip(r, 1e-4, 1 - 1e-4)) - _logit(np.array(overall))
        seed = float(np.clip(fit["seed_mean"] if fit["seed_mean"] is not None else overall, 0.02, 0.98))
        return CalibratedLandscape(
            root_quality=_latent_for(seed, easiness),
            step_mean=float(rng.normal(mean, sd / math.sqrt(n))),
            step_sd=sd,
            rate_sd=0.3 * sd,
            fail_rate=float(rng.beta(1 + exp["failed"], 1 + exp["admitted"])),
            task_easiness=easiness,
        )
