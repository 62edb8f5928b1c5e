"""Tracking callbacks (MLflow mirror of the archive)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from metasearch.events import Callback

if TYPE_CHECKING:
    from metasearch.launch import Launched


def tracking_callbacks(launched: Launched) -> list[Callback]:
    """Callbacks that mirror the study to tracking backends enabled in the config."""
    return []
