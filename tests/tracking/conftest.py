"""Fixtures for the tracking tests; the helpers live in tracking_helpers.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tracking_helpers import MlflowServer


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The 5,000-agent measurement runs only when asked for (`-m slow`), not in the default run.
    if "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow")
    for item in items:
        if "tracking" in str(item.fspath) and item.get_closest_marker("slow"):
            item.add_marker(skip)


@pytest.fixture
def mlflow_server(tmp_path: Path) -> Iterator[MlflowServer]:
    server = MlflowServer(tmp_path / "server")
    server.start()
    yield server
    server.stop()
