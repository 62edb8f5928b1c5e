"""Fixtures for the tracking tests; the helpers live in tracking_helpers.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tracking_helpers import MlflowServer


@pytest.fixture
def mlflow_server(tmp_path: Path) -> Iterator[MlflowServer]:
    server = MlflowServer(tmp_path / "server")
    server.start()
    yield server
    server.stop()
