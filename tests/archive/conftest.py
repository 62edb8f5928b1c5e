"""Fixtures for the Archive contract: every test taking ``impl`` runs against each implementation."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from metasearch.archive import GitArchive


@dataclass(frozen=True)
class Impl:
    """How to make and reopen one Archive implementation (add another to IMPLEMENTATIONS)."""

    name: str
    create: Callable[..., GitArchive]
    open: Callable[..., GitArchive]


IMPLEMENTATIONS = [Impl("git", GitArchive.create, GitArchive.open)]


@pytest.fixture(params=IMPLEMENTATIONS, ids=lambda impl: impl.name)
def impl(request: pytest.FixtureRequest) -> Impl:
    return request.param


@pytest.fixture
def make(impl: Impl, tmp_path: Path) -> Callable[..., GitArchive]:
    """A fresh study under tmp_path (``make("name")`` for a second one)."""

    def build(name: str = "s") -> GitArchive:
        return impl.create(tmp_path / name, study=name, config_text="study: {}\n")

    return build


@pytest.fixture
def seed_dir(tmp_path: Path) -> Path:
    """A small seed, with a cache folder that must never reach the archive."""
    d = tmp_path / "seed-src"
    (d / "pkg").mkdir(parents=True)
    (d / "agent.toml").write_text('name = "s"\n[entry]\nsolve = ["true"]\n')
    (d / "pkg" / "core.py").write_text("VALUE = 1\n")
    (d / "pkg" / "__pycache__").mkdir()
    (d / "pkg" / "__pycache__" / "core.cpython-311.pyc").write_bytes(b"\0junk")
    return d


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def git() -> Callable[..., str]:
    """Plain git, as a user would run it: ``git(repo, "log", ...)``."""
    return _git


@pytest.fixture
def branches() -> Callable[[Path], list[str]]:
    """The agent ids that have a branch agents/<id> in a repo."""

    def list_branches(repo: Path) -> list[str]:
        return sorted(_git(repo, "for-each-ref", "--format=%(refname:strip=3)", "refs/heads/agents/").split())

    return list_branches
