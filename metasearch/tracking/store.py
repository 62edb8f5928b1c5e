"""Where a study's MLflow mirror lives, and the lookups every tracking module shares.

Layout next to the archive (the archive stays the source of truth; all of this can be deleted and rebuilt
with ``sync``)::

    <study>/mlflow.db            default tracking + registry store (SQLite)
    <study>/mlartifacts/         artifact root of the study's experiment when the store is local
    <study>/mlflow-mirror.json   how far the journal has been mirrored, per tracking URI
    <study>/mlflow-mirror.lock   held by the one process mirroring the study

Runs are found by tags, never by name: ``metasearch.kind`` is ``study`` or ``agent``, and agent runs carry
``metasearch.agent_id``.

The experiment also carries the agents view (``view_tags``): a saved view of the MLflow UI (an experiment
tag ``mlflow.sharedViewState.<id>`` that MLflow 3's runs page lists under its saved views and opens from
``?viewStateShareKey=<id>``) with agent runs only, best own mean first, and own mean, trials, clade score
and state as columns; and ``own_mean`` as the experiment's primary metric, which the charts default to.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from metasearch.errors import ConfigError

if TYPE_CHECKING:
    from mlflow import MlflowClient

log = logging.getLogger(__name__)

STATE_FILE = "mlflow-mirror.json"
LOCK_FILE = "mlflow-mirror.lock"
ARTIFACT_DIR = "mlartifacts"
KIND = "metasearch.kind"
AGENT_ID = "metasearch.agent_id"
STUDY_DIR_TAG = "metasearch.study_dir"
AGENTS_VIEW = "metasearch-agents"
AGENT_FILTER = f"tags.`{KIND}` = 'agent'"
AGENT_COLUMNS = (
    "metrics.`own_mean`",
    "metrics.`trials`",
    "metrics.`cmp`",
    "metrics.`clade_trials`",
    "tags.`metasearch.state`",
    "tags.`metasearch.best_belief`",
    "tags.`metasearch.flags`",
    "params.`parent_id`",
)


def default_tracking_uri(study_dir: Path) -> str:
    return f"sqlite:///{Path(study_dir).resolve() / 'mlflow.db'}"


def read_tracking_config(study_dir: Path) -> dict[str, Any]:
    """The ``tracking.mlflow`` section of the study's frozen config.yaml (empty when absent)."""
    path = Path(study_dir) / "config.yaml"
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    section = ((data.get("tracking") or {}).get("mlflow")) or {}
    return dict(section) if isinstance(section, dict) else {}


def study_tracking_uri(study_dir: Path, override: str | None = None) -> str:
    """``override``, else ``tracking.mlflow.tracking_uri`` of the study config, else the study's SQLite file."""
    return override or read_tracking_config(study_dir).get("tracking_uri") or default_tracking_uri(study_dir)


def is_local_store(tracking_uri: str) -> bool:
    return tracking_uri.startswith("sqlite:") or "://" not in tracking_uri


def trace_to(study_dir: Path, tracking_uri: str | None = None) -> None:
    """Point MLflow tracing (process-wide) at the study's store and experiment: where the LLM client's
    spans go when ``llm.trace`` is set. ``tracking_uri``: ``tracking.mlflow.tracking_uri``."""
    import mlflow

    uri = study_tracking_uri(study_dir, tracking_uri)
    experiment = experiment_for(make_client(uri), Path(study_dir), Path(study_dir).name, uri)
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment(experiment_id=experiment)


def make_client(tracking_uri: str) -> MlflowClient:
    from mlflow import MlflowClient

    prepare_sqlite(tracking_uri)
    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    if tracking_uri.startswith("sqlite:"):
        _sync_normal(client)
    return client


def prepare_sqlite(tracking_uri: str) -> None:
    """Create a new SQLite store in WAL mode: a commit then costs one fsync instead of several (the mirror
    is 2-3x faster on a slow disk) and the UI's reads never block the mirror's writes. An existing file is
    left as it is. (WAL needs a local filesystem; put studies on network storage behind a server.)"""
    if not tracking_uri.startswith("sqlite:///"):
        return
    path = Path(tracking_uri.removeprefix("sqlite:///"))
    if path.exists() or not path.parent.is_dir():
        return
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA journal_mode=WAL")


def experiment_for(client: MlflowClient, study_dir: Path, study: str, tracking_uri: str) -> str:
    """The experiment id of this study, created on first use (one experiment per study).

    Named after the study; when a shared server already has an experiment of that name for another study
    directory, a short hash of this directory is appended.
    """
    study_dir = Path(study_dir).resolve()
    names = [study, f"{study}-{hashlib.sha1(str(study_dir).encode()).hexdigest()[:8]}"]
    for name in names:
        exp = client.get_experiment_by_name(name)
        if exp is None:
            location = (study_dir / ARTIFACT_DIR).as_uri() if is_local_store(tracking_uri) else None
            return client.create_experiment(
                name,
                artifact_location=location,
                # "custom_model_development": the MLflow 3 UI opens on training runs, not GenAI traces
                tags={
                    STUDY_DIR_TAG: str(study_dir),
                    "metasearch.study": study,
                    "mlflow.experimentKind": "custom_model_development",
                },
            )
        if exp.tags.get(STUDY_DIR_TAG) == str(study_dir):
            if exp.lifecycle_stage == "deleted":
                client.restore_experiment(exp.experiment_id)
            return str(exp.experiment_id)
    raise ConfigError(f"MLflow experiments {names} belong to other study directories; rename the study")


def view_tags(created_ms: int) -> dict[str, str]:
    """The experiment tags of the agents view (see the module docstring); ``created_ms`` dates it."""
    state = {
        # search facets
        "searchFilter": AGENT_FILTER,
        "orderByKey": "metrics.`own_mean`",
        "orderByAsc": False,
        "startTime": "ALL",
        "lifecycleFilter": "Active",
        "modelVersionFilter": "All Runs",
        "datasetsFilter": [],
        # UI state: MLflow replaces its own with this one, so every field is given
        "selectedColumns": list(AGENT_COLUMNS),
        "columnOrder": [],
        "columnWidths": {},
        "runsExpanded": {},
        "runsPinned": [],
        "runsHidden": [],
        "runsVisibilityMap": {},
        "runsHiddenMode": "FIRST_10_RUNS",
        "viewMaximized": False,
        "runListHidden": False,
        "isAccordionReordered": False,
        "groupBy": None,
        "groupsExpanded": {},
        "autoRefreshEnabled": True,
        "useGroupedValuesInCharts": True,
        "hideEmptyCharts": True,
        "globalLineChartConfig": {"xAxisKey": "step", "lineSmoothness": 0, "selectedXAxisMetricKey": ""},
        "chartsSearchFilter": "",
    }
    envelope = {"name": "metasearch: agents by own mean", "createdAt": created_ms, "state": json.dumps(state)}
    return {
        f"mlflow.sharedViewState.{AGENTS_VIEW}": json.dumps(envelope),
        "mlflow.experiment.primaryMetric.name": "own_mean",
        "mlflow.experiment.primaryMetric.greaterIsBetter": "true",
    }


def set_view_tags(client: MlflowClient, experiment_id: str) -> None:
    """Write the agents view onto the experiment, unless it already holds these exact tags."""
    exp = client.get_experiment(experiment_id)
    for key, value in view_tags(int(exp.creation_time or 0)).items():
        if exp.tags.get(key) != value:
            client.set_experiment_tag(experiment_id, key, value)


def _sync_normal(client: MlflowClient) -> None:
    """``PRAGMA synchronous=NORMAL`` on the client's SQLite connections: in WAL mode a commit then needs no
    fsync at all (another 2x for the mirror); a crash of the process loses nothing, a power cut may lose
    the last commits, which the journal replays. Reaches into MLflow's store (no public hook): if that
    changes, the mirror just runs at the slower default."""
    try:
        from sqlalchemy import event

        engine = client._tracking_client.store.engine
        if getattr(engine, "_metasearch_sync_normal", False):
            return

        def on_connect(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.execute("PRAGMA synchronous=NORMAL")

        event.listen(engine, "connect", on_connect)
        engine._metasearch_sync_normal = True
        engine.dispose()  # pooled connections predate the listener
    except Exception as exc:  # an MLflow without these internals: keep its defaults
        log.debug("cannot relax SQLite sync for the MLflow store: %s", exc)


def find_experiment(client: MlflowClient, study_dir: Path, study: str) -> str | None:
    """The study's experiment id if it exists (read-only lookup)."""
    study_dir = Path(study_dir).resolve()
    for name in (study, f"{study}-{hashlib.sha1(str(study_dir).encode()).hexdigest()[:8]}"):
        exp = client.get_experiment_by_name(name)
        if exp is not None and exp.tags.get(STUDY_DIR_TAG) == str(study_dir):
            return str(exp.experiment_id)
    return None


def runs_by_kind(client: MlflowClient, experiment_id: str, kind: str) -> list[Any]:
    """All active runs of one kind in the experiment (paged)."""
    runs: list[Any] = []
    token: str | None = None
    while True:
        page = client.search_runs(
            [experiment_id], f"tags.`{KIND}` = '{kind}'", max_results=1000, page_token=token
        )
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def agent_run_ids(client: MlflowClient, experiment_id: str) -> dict[str, str]:
    """agent id -> run id; the oldest run wins if a crash ever left two."""
    found: dict[str, str] = {}
    runs = sorted(runs_by_kind(client, experiment_id, "agent"), key=lambda r: r.info.start_time or 0)
    for run in runs:
        found.setdefault(run.data.tags.get(AGENT_ID, ""), run.info.run_id)
    found.pop("", None)
    return found


def load_state(study_dir: Path, tracking_uri: str) -> dict[str, Any]:
    path = Path(study_dir) / STATE_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    entry = data.get(tracking_uri) if isinstance(data, dict) else None
    return dict(entry) if isinstance(entry, dict) else {}


def save_state(study_dir: Path, tracking_uri: str, state: dict[str, Any]) -> None:
    """Atomically replace this URI's entry (other URIs' entries are kept)."""
    path = Path(study_dir) / STATE_FILE
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    data[tracking_uri] = state
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)
