"""Tracking callbacks: the MLflow mirror of the archive (see ``mlflow_callback`` and ``mirror``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from metasearch.study import Callback

if TYPE_CHECKING:
    from metasearch.launch import Launched


def tracking_callbacks(launched: Launched) -> list[Callback]:
    """Started callbacks that mirror the study to the tracking backends enabled in its config.

    Each closes itself on ``StudyFinished`` (after a bounded final flush); callers that stop a study any
    other way close them (``close()``). Nothing is lost either way: the journal is the source of truth and
    the mirror catches up on the next run, ``metasearch ui`` or ``metasearch sync``.
    """
    settings = launched.resolved.config.tracking.mlflow
    if not settings.enabled:
        return []
    from metasearch.tracking.mlflow_callback import MlflowMirror

    return [MlflowMirror(launched.archive.root, settings.tracking_uri).start()]
