"""A batch of MLflow writes derived from a stretch of the journal, and how it is sent.

Every value in a batch is a pure function of the journal prefix it was computed from (metric timestamps are
journal timestamps, steps are counts), so sending a batch twice writes nothing new: MLflow drops a metric
point identical to one it has, a param re-logged with the same value is accepted, tags and artifacts
overwrite. Sending removes each part once MLflow has accepted it, so a retry after a failure resumes where
the failure happened instead of starting over. Every key and value is made valid UTF-8 on the way in
(``utf8_text``): MLflow refuses a lone surrogate, and one refused write would hold the mirror forever.
"""

from __future__ import annotations

import logging
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from metasearch.archive.journal import utf8_text
from metasearch.types import Agent

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param

log = logging.getLogger(__name__)

STUDY = ""  # owner key of the study run; agents are keyed by their id
MAX_METRICS = 1000  # MLflow's limits per log_batch call
MAX_PARAMS = 100
MAX_VALUE = 6000
T = TypeVar("T")


@dataclass
class NewRun:
    agent: Agent
    tags: dict[str, str]
    params: dict[str, str]


@dataclass
class Batch:
    """What to write for journal bytes ``[start, end)``; ``lines`` events were read."""

    start: int
    end: int = 0
    lines: int = 0
    new_runs: list[NewRun] = field(default_factory=list)
    metrics: dict[str, list[Metric]] = field(default_factory=dict)
    tags: dict[str, dict[str, str]] = field(default_factory=dict)
    artifacts: list[tuple[str, str, str | None, str | None]] = field(default_factory=list)
    """owner, local path, artifact dir, name in MLflow (None: the file's own)"""
    study_status: str | None = None
    study_end_ms: int | None = None
    statuses: dict[str, tuple[str, int | None]] = field(default_factory=dict)  # agent -> status, end ms

    def metric(self, owner: str, key: str, value: float, ts_ms: int, step: int) -> None:
        from mlflow.entities import Metric

        self.metrics.setdefault(owner, []).append(Metric(metric_key(key), float(value), ts_ms, step))

    def tag(self, owner: str, key: str, value: str) -> None:
        self.tags.setdefault(owner, {})[utf8_text(key)] = utf8_text(value)[:MAX_VALUE]

    def artifact(
        self, owner: str, local_path: str, artifact_dir: str | None = None, name: str | None = None
    ) -> None:
        self.artifacts.append((owner, local_path, artifact_dir, name))

    def send(
        self,
        client: MlflowClient,
        run_id: Callable[[str], str],
        create: Callable[[NewRun, Callable[[str], None]], str],
        set_status: Callable[[str, str, int | None], None] | None = None,
    ) -> None:
        """Write everything; raises on the first failure, leaving what is left for a retry.

        ``create(new_run, log_first)`` makes (or finds) an agent's run; it calls ``log_first(run_id)`` to
        write the run's params together with the batch's metrics and tags for it, so a new agent costs
        two calls (create, one log_batch) however much the batch holds for it. Run statuses go last
        (``set_status(run_id, status, end_ms)``), so a terminal status means the run's data is in.
        """
        while self.new_runs:
            new = self.new_runs[0]

            def log_first(rid: str, new: NewRun = new) -> None:
                self.log_owner(client, rid, new.agent.id, new.params)

            create(new, log_first)
            self.new_runs.pop(0)
        for owner in list(self.metrics.keys() | self.tags.keys()):
            rid = _known(run_id, owner)
            if rid is None:
                self.metrics.pop(owner, None)
                self.tags.pop(owner, None)
                continue
            self.log_owner(client, rid, owner, {})
        while self.artifacts:
            owner, path, artifact_dir, name = self.artifacts[0]
            rid = _known(run_id, owner)
            if rid is not None and name is not None and name != Path(path).name:
                with tempfile.TemporaryDirectory(prefix="ms-artifact-") as tmp:
                    shutil.copyfile(path, Path(tmp) / name)
                    client.log_artifact(rid, str(Path(tmp) / name), artifact_dir)
            elif rid is not None:
                client.log_artifact(rid, path, artifact_dir)
            self.artifacts.pop(0)
        while self.statuses:
            owner, (status, end_ms) = next(iter(self.statuses.items()))
            rid = _known(run_id, owner)
            if rid is not None and set_status is not None:
                set_status(rid, status, end_ms)
            del self.statuses[owner]
        if self.study_status is not None:
            if self.study_status == "RUNNING":
                client.update_run(run_id(STUDY), status=self.study_status)
            else:
                client.set_terminated(run_id(STUDY), self.study_status, self.study_end_ms)
            self.study_status = None

    def log_owner(self, client: MlflowClient, run_id: str, owner: str, params: dict[str, str]) -> None:
        """One owner's params, metrics and tags in as few ``log_batch`` calls as MLflow's limits allow."""
        from mlflow.entities import Param, RunTag

        metrics = self.metrics.get(owner, [])
        tags = list(self.tags.get(owner, {}).items())
        todo = [Param(utf8_text(k)[:250], utf8_text(v)[:MAX_VALUE]) for k, v in params.items()]
        while metrics or tags or todo:
            p, t = todo[:MAX_PARAMS], tags[:MAX_PARAMS]
            m = metrics[: MAX_METRICS - len(p) - len(t)]
            client.log_batch(run_id, metrics=m, params=p, tags=[RunTag(k, v) for k, v in t], synchronous=True)
            del todo[: len(p)], tags[: len(t)], metrics[: len(m)]
            if owner in self.tags:
                self.tags[owner] = dict(tags)
        self.metrics.pop(owner, None)
        self.tags.pop(owner, None)


def _known(run_id: Callable[[str], str], owner: str) -> str | None:
    """The owner's run id; None (and a warning) when someone deleted that run in MLflow: its writes are
    dropped rather than blocking the mirror forever."""
    try:
        return run_id(owner)
    except KeyError:
        log.warning("MLflow has no run for %s (deleted?); skipping its updates", owner or "the study")
        return None


def log_params(client: MlflowClient, run_id: str, params: dict[str, str]) -> None:
    from mlflow.entities import Param

    items: list[Param] = [Param(utf8_text(k)[:250], utf8_text(str(v))[:MAX_VALUE]) for k, v in params.items()]
    for chunk in chunks(items, MAX_PARAMS):
        client.log_batch(run_id, params=chunk, synchronous=True)


def chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


_BAD_KEY = re.compile(r"[^A-Za-z0-9_\-./ :]")


def metric_key(name: str) -> str:
    """MLflow accepts letters, digits, ``_ - . / : `` and space in keys; anything else (a surrogate too)
    becomes ``_``."""
    return _BAD_KEY.sub("_", name)[:250] or "_"


def flatten(data: Any, prefix: str = "") -> dict[str, str]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": "1"}``; lists are kept as JSON-ish text."""
    if isinstance(data, dict):
        out: dict[str, str] = {}
        for key, value in data.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): "null" if data is None else str(data)}


def scalar_items(meta: dict[str, Any], skip: Iterable[str]) -> dict[str, str]:
    """Scalar meta entries worth a param (an Optuna trial number, a knob value); big values are dropped."""
    skipped = set(skip)
    out = {}
    for key, value in meta.items():
        if key in skipped:
            continue
        if isinstance(value, dict):
            out.update({f"meta.{k}": v for k, v in flatten(value, f"{key}.").items() if len(v) <= 500})
        elif isinstance(value, str | int | float | bool) and len(str(value)) <= 500:
            out[f"meta.{key}"] = str(value)
    return dict(list(out.items())[:50])
