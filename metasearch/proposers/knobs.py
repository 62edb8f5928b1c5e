"""``knobs``: an Optuna-driven proposer that needs no LLM.

An agent declares tunable knobs in its ``agent.toml`` (float / int / categorical with ranges). For every
expansion the proposer asks an Optuna study (TPE by default) for new values and writes them into the
child's knobs file. In ``mutate`` mode (the default) a child keeps its parent's values except for one to
``mutate_k`` knobs, which always change: a categorical knob takes another choice, a numeric one either
moves locally (a log-normal or normal step around the parent's value) or jumps anywhere in its range. Which
knobs change is learned: knobs never tried yet come first (so every knob is tried early), then a knob is
drawn by Thompson sampling on how often changing it made a child better than its parent (Beta(1 +
improved, 1 + not improved), children still being evaluated count as tried). The
full set is enqueued into the Optuna study, so every child is an Optuna trial with its outcome. Children
stay close to their parents, so lineages mean something to the tree search. (Letting TPE fill in the
mutated knobs does not work here: every trial so far carries the parent's values, so TPE keeps proposing
them again.) So in ``mutate`` mode Optuna *records* the children (trials, scores, the dashboard) but does
not choose their values: ``sampler`` and ``n_startup_trials`` act only in ``global`` mode, which samples
every knob afresh from the sampler, and setting them with ``mode: mutate`` is a configuration error. When a child has at least ``min_evaluations`` evaluations its mean score is told
to Optuna. The Optuna study lives in the study directory as a journal file, so it survives restarts and
opens in ``optuna-dashboard <study_dir>/optuna.journal``.

The knobs file is the candidate's: ``knobs.file`` is checked to be a relative path inside the agent's tree
when the manifest loads, and it is opened here without following any link on the way, only as a regular
file of at most ``MAX_KNOBS_BYTES``. A knobs file that breaks these rules, or is not a JSON object, fails
the expansion (``ProposalFailed`` with the reason), never the study.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import stat
import threading
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState
from pydantic import BaseModel, ConfigDict, Field, model_validator

from metasearch.manifest import CategoricalKnob, FloatKnob, IntKnob, Knob, load_manifest, read_at_most
from metasearch.proposers.base import ProposalContext, ProposalFailed
from metasearch.types import Agent, Proposal

log = logging.getLogger(__name__)

OPTUNA_STUDY = "knobs"
TRIAL_META = "knobs_trial"
CHANGED_META = "knobs_changed"
MAX_KNOBS_BYTES = 1 << 20


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

        @model_validator(mode="after")
        def _sampler_needs_global(self) -> KnobsProposer.Config:
            idle = sorted({"sampler", "n_startup_trials"} & self.model_fields_set)
            if self.mode == "mutate" and idle:
                raise ValueError(
                    f"{', '.join(idle)}: only used with mode: global (in mutate mode the mutation chooses the "
                    "values and Optuna only records the trials); remove it or set mode: global"
                )
            return self

    def __init__(self, config: Config, *, study_dir: Path, llm: Any = None, knobs_host: Any = None) -> None:
        # llm: every proposer is built with the study's LLM (see proposers.base); knobs asks no model.
        self.config = config
        self.storage_path = Path(study_dir) / "optuna.journal"
        self._lock = threading.Lock()
        self._study: optuna.Study | None = None
        # On a Ray worker: the study's host actor, which keeps the one Optuna study (see ray_host).
        self.knobs_host = knobs_host

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
        current = read_knobs(workspace, manifest.knobs.file)
        if self.knobs_host is None:
            params, number = self.suggest(parent, manifest.knobs.params, current, context)
        else:
            import ray

            shipped = replace(  # no sandbox or callables: they stay on this node
                context,
                sandbox=None,  # type: ignore[arg-type]
                extra={"failed_job_ids": context.extra.get("failed_job_ids", ())},
            )
            ref = self.knobs_host.suggest_knobs.remote(parent, manifest.knobs.params, current, shipped)
            params, number = ray.get(ref, timeout=300)
        values = {**current, **params}
        changed = {k: v for k, v in params.items() if current.get(k) != v}
        write_knobs(workspace, manifest.knobs.file, values)
        summary = "knobs: " + ", ".join(f"{k}={_fmt(v)}" for k, v in sorted(changed.items()))
        return Proposal(
            diff="",  # the runner computes the workspace diff
            summary=summary if changed else "knobs: unchanged",
            rationale=f"Optuna {self.config.sampler} trial {number}",
            meta={TRIAL_META: number, CHANGED_META: sorted(changed)},
        )

    def suggest(
        self, parent: Agent, params: dict[str, Knob], current: dict[str, Any], context: ProposalContext
    ) -> tuple[dict[str, Any], int]:
        """The next trial's knob values and number (the Optuna study is read and written here only)."""
        distributions = {name: knob_distribution(k) for name, k in params.items()}
        with self._lock:
            study = self._optuna()
            self._sync(study, context)
            if self.config.mode == "mutate":
                mutated = self._mutated_values(
                    current, params, distributions, context.job_id, _knob_credit(context)
                )
                study.enqueue_trial(mutated, skip_if_exists=False)
            trial = study.ask(distributions)
            trial.set_user_attr("job_id", context.job_id)
            trial.set_user_attr("parent_id", parent.id)
        return dict(trial.params), trial.number

    def _mutated_values(
        self,
        current: dict[str, Any],
        knobs: dict[str, Knob],
        distributions: dict[str, BaseDistribution],
        job_id: str,
        credit: dict[str, tuple[int, int]] | None = None,
    ) -> dict[str, Any]:
        """The parent's values with 1..mutate_k knobs changed (a job-seeded RNG, so resumes repeat it)."""
        rng = random.Random(f"{self.config.seed}/{job_id}")
        values = {
            k: current[k] for k, d in distributions.items() if k in current and _contains(d, current[k])
        }
        names = choose_knobs(
            sorted(distributions),
            credit or {},
            rng.randint(1, min(self.config.mutate_k, len(distributions))),
            rng,
        )
        for name in names:
            values[name] = mutate(knobs[name], values.get(name), rng)
        return values

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


def choose_knobs(
    names: list[str], credit: dict[str, tuple[int, int]], k: int, rng: random.Random
) -> list[str]:
    """``k`` knobs to change: untried ones first, then by Thompson sampling on (tried, improved)."""
    untried = [n for n in names if credit.get(n, (0, 0))[0] == 0]
    rng.shuffle(untried)
    draws = {}
    for name in names:
        tried, improved = credit.get(name, (0, 0))
        draws[name] = rng.betavariate(1 + improved, 1 + max(0, tried - improved))
    ranked = untried + sorted((n for n in names if n not in untried), key=lambda n: -draws[n])
    return ranked[:k]


def _knob_credit(context: ProposalContext) -> dict[str, tuple[int, int]]:
    """Per knob: (children that changed it, those that scored above their parent). Children without
    evaluations yet count as tried, so concurrent expansions spread over different knobs."""
    means = context.lineage_scores
    credit: dict[str, list[int]] = {}
    for agent in context.agents.values():
        changed = agent.meta.get(CHANGED_META)
        if not changed or agent.parent_id is None:
            continue
        improved = agent.id in means and agent.parent_id in means and means[agent.id] > means[agent.parent_id]
        for name in changed:
            tally = credit.setdefault(str(name), [0, 0])
            tally[0] += 1
            tally[1] += int(improved)
    return {k: (v[0], v[1]) for k, v in credit.items()}


def mutate(knob: Knob, value: Any, rng: random.Random) -> Any:
    """A different value for one knob: another choice, a local step, or a jump anywhere in range."""
    if isinstance(knob, CategoricalKnob):
        others = [c for c in knob.choices if c != value] or list(knob.choices)
        return rng.choice(others)
    low, high = float(knob.low), float(knob.high)
    for _ in range(20):
        if value is None or rng.random() < 0.5:
            new = math.exp(rng.uniform(math.log(low), math.log(high))) if knob.log else rng.uniform(low, high)
        elif knob.log:
            new = float(value) * math.exp(rng.gauss(0.0, 0.7))
        else:
            new = float(value) + rng.gauss(0.0, 0.2 * (high - low))
        new = min(high, max(low, new))
        new = round(new) if isinstance(knob, IntKnob) else new
        if new != value:
            return new
    return new


def _contains(distribution: BaseDistribution, value: Any) -> bool:
    try:
        return bool(distribution._contains(distribution.to_internal_repr(value)))
    except (ValueError, TypeError):
        return False


def read_knobs(root: Path, name: str) -> dict[str, Any]:
    """The JSON object in the knobs file ``name`` (relative to the agent root ``root``); ``{}`` when there is
    none. ProposalFailed naming ``knobs.file`` when the path, or a folder on it, is a link or leaves the
    tree, or the file is not a regular file, is over ``MAX_KNOBS_BYTES``, or is not a JSON object."""
    try:
        fd = _open_in_tree(root, name, os.O_RDONLY)
    except FileNotFoundError:
        return {}
    try:
        _require_regular(fd, name)
        raw = read_at_most(fd, MAX_KNOBS_BYTES + 1)
    finally:
        os.close(fd)
    if len(raw) > MAX_KNOBS_BYTES:
        raise ProposalFailed(f"knobs.file {name!r}: larger than {MAX_KNOBS_BYTES} bytes")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:200]
        raise ProposalFailed(f"knobs.file {name!r}: not valid UTF-8 JSON: {reason}") from exc
    if not isinstance(data, dict):
        raise ProposalFailed(f"knobs.file {name!r}: must hold a JSON object of knob values")
    return data


def write_knobs(root: Path, name: str, values: dict[str, Any]) -> None:
    """Replace the knobs file ``name`` under ``root`` with ``values`` (created when missing, in a folder that
    exists). The same path rules as ``read_knobs``, with ProposalFailed; a failing write (disk full) raises
    OSError: that is the host's fault."""
    text = json.dumps(values, indent=2, sort_keys=True) + "\n"
    try:
        fd = _open_in_tree(root, name, os.O_WRONLY | os.O_CREAT)
    except FileNotFoundError as exc:
        raise ProposalFailed(f"knobs.file {name!r}: its folder does not exist") from exc
    try:
        _require_regular(fd, name)
        os.ftruncate(fd, 0)
        data = memoryview(text.encode())
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)


def _open_in_tree(root: Path, name: str, flags: int) -> int:
    """A descriptor for ``root/name`` opened one component at a time without following links (so it cannot
    leave ``root``) and without blocking on a FIFO. FileNotFoundError when a component is missing;
    ProposalFailed for any other refusal."""
    parts = PurePosixPath(name).parts
    if not parts or PurePosixPath(name).is_absolute() or ".." in parts:
        raise ProposalFailed(f"knobs.file {name!r}: must be a relative path inside the agent's tree")
    nofollow = os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            folder = os.open(part, os.O_RDONLY | os.O_DIRECTORY | nofollow, dir_fd=fd)
            os.close(fd)
            fd = folder
        return os.open(parts[-1], flags | nofollow | os.O_NONBLOCK, 0o644, dir_fd=fd)
    except FileNotFoundError:
        raise
    except OSError as exc:  # ELOOP: a link; ENOTDIR: a file where a folder should be; ENXIO: a FIFO
        raise ProposalFailed(
            f"knobs.file {name!r}: cannot be opened inside the agent's tree ({exc.strerror}); it and the "
            "folders on its path must be plain files and folders, not links"
        ) from exc
    finally:
        os.close(fd)


def _require_regular(fd: int, name: str) -> None:
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise ProposalFailed(f"knobs.file {name!r}: not a regular file")


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
