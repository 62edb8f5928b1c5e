"""Tracking callbacks: the MLflow mirror of the archive (see ``mlflow_callback`` and ``mirror``)."""

from __future__ import annotations

from pathlib import Path

from metasearch.config import TrackingSection
from metasearch.study import Callback
from metasearch.tracking.mlflow_callback import MlflowMirror


def tracking_callbacks(study_dir: Path, settings: TrackingSection) -> list[Callback]:
    """Started callbacks that mirror the study in ``study_dir`` to the tracking backends ``settings`` (its
    config's ``tracking`` section) enable.

    Each closes itself on ``StudyFinished`` (after a bounded final flush); callers that stop a study any
    other way close them (``close()``). Nothing is lost either way: the journal is the source of truth and
    the mirror catches up on the next run, ``metasearch ui`` or ``metasearch sync``.
    """
    if not settings.mlflow.enabled:
        return []
    return [MlflowMirror(study_dir, settings.mlflow.tracking_uri).start()]
