"""Choosing the sandbox without Docker: trusted studies fall back to local processes, model-written code
fails closed unless the user chose local."""

from __future__ import annotations

from pathlib import Path

import pytest

from metasearch.errors import ConfigError
from metasearch.sandboxes.auto import make_sandbox
from metasearch.sandboxes.config import SandboxSection
from metasearch.sandboxes.local import LocalSandbox


@pytest.fixture
def no_docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")


def test_auto_falls_back_for_trusted_code_only(no_docker: None) -> None:
    section = SandboxSection(name="auto", disk_mb=64)
    trusted = make_sandbox(section, study="s")
    assert isinstance(trusted, LocalSandbox) and trusted.limits.disk_mb == 64
    with pytest.raises(ConfigError, match=r"^sandbox.name: 'auto' found no usable Docker, and the proposer"):
        make_sandbox(section, study="s", untrusted="proposer 'llm' runs code a model wrote")
    chosen = make_sandbox(
        SandboxSection(name="local"), study="s", untrusted="proposer 'llm' runs code a model wrote"
    )
    assert isinstance(chosen, LocalSandbox)
