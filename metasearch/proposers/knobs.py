"""``knobs``: an Optuna-driven proposer that needs no LLM.

An agent declares tunable knobs in its ``agent.toml`` (float / int / categorical with ranges). For every
expansion the proposer asks an Optuna study (TPE by default) for new values and writes them into the
child's knobs file. In ``mutate`` mode (the default) a child keeps its parent's values except for one to
``mutate_k`` knobs, which Optuna samples (the parent's values are enqueued as fixed parameters, so TPE
fills in only the mutated ones, guided by every trial so far): children stay close to their parents, so
lineages mean something to the tree search. ``global`` mode samples every knob afresh. When a child has at least ``min_evaluations`` evaluations its mean score is told
to Optuna. The Optuna study lives in the study directory as a journal file, so it survives restarts and
opens in ``optuna-dashboard <study_dir>/optuna.journal``.
"""

from __future__ import annotations

import json
import logging
import random
import threading
from pathlib import Path
from typing import Any, Literal

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState
from pydantic import BaseModel, ConfigDict, Field

from metasearch.errors import ConfigError
from metasearch.manifest import CategoricalKnob, FloatKnob, Knob, load_manifest
from metasearch.proposers.base import ProposalContext, ProposalFailed
from metasearch.types import Agent, Proposal

log = logging.getLogger(__name__)

OPTUNA_STUDY = "knobs"
TRIAL_META = "knobs_trial"


def knob_distribution(knob: Knob) -> BaseDistribution:
    if isinstance(knob, FloatKnob):
        return FloatDistribution(knob.low, knob.high, log=knob.log)
    if isinstance(knob, CategoricalKnob):
        return CategoricalDistribution(knob.choices)
    return IntDistribution(knob.low, knob.high, log=knob.log)


class KnobsProposer:
    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid")
        sampler: Literal["tpe", "random"] = "tpe"
        mode: Literal["mutate", "global"] = "mutate"
        mutate_k: int = Field(2, ge=1)
        n_startup_trials: int = Field(6, ge=0)
        min_evaluations: int = Field(2, ge=1)
        seed: int | None = 0

    def __init__(self, config: Config, *, study_dir: Path, **_: Any) -> None:
        self.config = config
        self.storage_path = Path(study_dir) / "optuna.journal"
        self._lock = threading.Lock()
        self._study: optuna.Study | None = None

    def _optuna(self) -> optuna.Study:
        if self._study is None:
            optuna.logging.set_verbosity(optuna.logging.WARNING)
            storage = JournalStorage(JournalFileBackend(str(self.storage_path)))
            sampler: optuna.samplers.BaseSampler
            if self.config.sampler == "tpe":
                sampler = optuna.samplers.TPESampler(
                    n_startup_trials=self.config.n_startup_trials, seed=self.config.seed
                )
            else:
                sampler = optuna.samplers.RandomSampler(seed=self.config.seed)
            self._study = optuna.create_study(
                study_name=OPTUNA_STUDY,
                storage=storage,
                direction="maximize",
                sampler=sampler,
                load_if_exists=True,
            )
        return self._study

    def propose(self, parent: Agent, workspace: Path, context: ProposalContext) -> Proposal:
        manifest = load_manifest(workspace)
        if not manifest.knobs.params:
            raise ProposalFailed(
                f"agent {manifest.name!r} declares no knobs in agent.toml; the knobs proposer has nothing to tune"
            )
        knobs_path = workspace / manifest.knobs.file
        current = _read_knobs(knobs_path)
        distributions = {name: knob_distribution(k) for name, k in manifest.knobs.params.items()}
        with self._lock:
            study = self._optuna()
            self._sync(study, context)
            if self.config.mode == "mutate":
                kept = self._kept_values(current, distributions, context.job_id)
                study.enqueue_trial(kept, skip_if_exists=False)
            trial = study.ask(distributions)
            trial.set_user_attr("job_id", context.job_id)
            trial.set_user_attr("parent_id", parent.id)
        values = {**current, **trial.params}
        changed = {k: v for k, v in trial.params.items() if current.get(k) != v}
        knobs_path.write_text(json.dumps(values, indent=2, sort_keys=True) + "\n")
        summary = "knobs: " + ", ".join(f"{k}={_fmt(v)}" for k, v in sorted(changed.items()))
        return Proposal(
            diff="",  # the runner computes the workspace diff
            summary=summary if changed else "knobs: unchanged",
            rationale=f"Optuna {self.config.sampler} trial {trial.number}",
            meta={TRIAL_META: trial.number},
        )

    def _kept_values(
        self, current: dict[str, Any], distributions: dict[str, BaseDistribution], job_id: str
    ) -> dict[str, Any]:
        """The parent's in-range values for all but 1..mutate_k knobs (chosen by a job-seeded RNG)."""
        valid = {k: current[k] for k, d in distributions.items() if k in current and _contains(d, current[k])}
        rng = random.Random(f"{self.config.seed}/{job_id}")
        names = sorted(distributions)
        mutated = set(rng.sample(names, rng.randint(1, min(self.config.mutate_k, len(names)))))
        return {k: v for k, v in valid.items() if k not in mutated}

    def _sync(self, study: optuna.Study, context: ProposalContext) -> None:
        """Tell Optuna the scores of children that now have enough evaluations; fail rejected ones."""
        running = {
            t.user_attrs.get("job_id"): t
            for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        }
        if not running:
            return
        by_job = {
            a.meta.get("job_id"): a for a in context.agents.values() if a.meta.get(TRIAL_META) is not None
        }
        scores: dict[str, list[float]] = {}
        for ev in context.evaluations:
            scores.setdefault(ev.agent_id, []).append(ev.score)
        failed = set(context.extra.get("failed_job_ids", ()))
        for job_id, trial in running.items():
            if job_id in failed:
                study.tell(trial.number, state=TrialState.FAIL, skip_if_finished=True)
                continue
            agent = by_job.get(job_id)
            if agent is None:
                continue
            got = scores.get(agent.id, [])
            if len(got) >= self.config.min_evaluations:
                study.tell(trial.number, sum(got) / len(got), skip_if_finished=True)


def _contains(distribution: BaseDistribution, value: Any) -> bool:
    try:
        return bool(distribution._contains(distribution.to_internal_repr(value)))
    except (ValueError, TypeError):
        return False


def _read_knobs(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path.name}: not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path.name}: must hold a JSON object of knob values")
    return data


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
