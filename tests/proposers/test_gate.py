from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from metasearch.archive import GitArchive
from metasearch.events import Expanded, ExpansionRejected, Outcome
from metasearch.manifest import parse_manifest
from metasearch.proposers.base import ProposalContext
from metasearch.proposers.gate import GateConfig, changed_paths, check
from metasearch.runner import Runner
from metasearch.sandboxes.local import LocalSandbox
from metasearch.sandboxes.protocol import Sandbox
from metasearch.suites.protocol import Suite, Task, TaskResult
from metasearch.types import Agent, Expand, Proposal

MANIFEST = """
name = "demo"
protected = ["tests/**"]
[entry]
solve = ["python3", "solve.py"]
"""


def _diff(*paths: str) -> str:
    return "".join(f"diff --git a/{p} b/{p}\n--- a/{p}\n+++ b/{p}\n@@ -1 +1 @@\n-x\n+y\n" for p in paths)


def _workspace(tmp_path: Path, manifest: str = MANIFEST) -> Path:
    (tmp_path / "agent.toml").write_text(manifest)
    return tmp_path


def test_changed_paths_reads_git_headers() -> None:
    assert changed_paths(_diff("a.py", "pkg/b.py")) == ["a.py", "pkg/b.py"]


def test_admits_a_plain_edit(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    verdict = check(_diff("solve.py"), ws, parse_manifest(MANIFEST), None, GateConfig())
    assert verdict.admitted, verdict.reason


def test_rejects_empty_diff(tmp_path: Path) -> None:
    verdict = check("  \n", _workspace(tmp_path), parse_manifest(MANIFEST), None, GateConfig())
    assert not verdict.admitted and "empty diff" in verdict.reason


def test_rejects_oversized_diff(tmp_path: Path) -> None:
    diff = _diff("solve.py") + "+" + "x" * 5000 + "\n"
    verdict = check(
        diff, _workspace(tmp_path), parse_manifest(MANIFEST), None, GateConfig(max_diff_bytes=1000)
    )
    assert not verdict.admitted and "too large" in verdict.reason


def test_rejects_protected_and_grader_paths(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    for path in ("tests/test_x.py", "grader/score.py"):
        verdict = check(_diff(path), ws, parse_manifest(MANIFEST), None, GateConfig())
        assert not verdict.admitted and "protected" in verdict.reason and path in verdict.reason


def test_rejects_broken_or_renamed_manifest(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, "name = [")
    verdict = check(_diff("agent.toml"), ws, parse_manifest(MANIFEST), None, GateConfig())
    assert not verdict.admitted and "manifest no longer valid" in verdict.reason
    ws = _workspace(tmp_path, MANIFEST.replace('"demo"', '"other"'))
    verdict = check(_diff("agent.toml"), ws, parse_manifest(MANIFEST), None, GateConfig())
    assert not verdict.admitted and "name changed" in verdict.reason


def test_an_unreadable_or_escaping_child_manifest_is_a_rejection_not_an_error(tmp_path: Path) -> None:
    (tmp_path / "agent.toml").write_bytes(MANIFEST.encode() + b"# \x00\xff\n")  # git calls it binary
    verdict = check(_diff("agent.toml"), tmp_path, parse_manifest(MANIFEST), None, GateConfig())
    assert (
        not verdict.admitted
        and "manifest no longer valid" in verdict.reason
        and "not UTF-8" in verdict.reason
    )
    (tmp_path / "agent.toml").write_text(MANIFEST + '[knobs]\nfile = "/home/victim/.docker/config.json"\n')
    verdict = check(_diff("agent.toml"), tmp_path, parse_manifest(MANIFEST), None, GateConfig())
    assert not verdict.admitted and "knobs.file" in verdict.reason and "absolute" in verdict.reason


# -- through the runner, with real git: the gate judges the child's commit, not the diff's text or the
# workspace

SMOKED = """
name = "demo"
protected = ["tests/**"]
[entry]
solve = ["python3", "solve.py"]
smoke = ["python3", "-m", "unittest", "discover", "-s", "tests", "-q"]
"""
TEST_CORE = (
    "import unittest, solve\n"
    "class T(unittest.TestCase):\n"
    "    def test_answer(self):\n"
    "        self.assertEqual(solve.answer(), 42)\n"
)


class _Edit:
    """A proposer that applies ``edit`` to the workspace."""

    def __init__(self, edit: Callable[[Path], None]) -> None:
        self.edit = edit

    def propose(self, parent: Agent, workspace: Path, context: ProposalContext) -> Proposal:
        self.edit(workspace)
        return Proposal(diff="", summary="edit")


def _break(ws: Path) -> None:
    (ws / "solve.py").write_text("def answer():\n    return 0\n")


def _shadow_runner(ws: Path) -> None:
    """Break the child, and hide a ``unittest.py`` (which ``python3 -m unittest`` would import from /agent,
    the working folder) from its commit with its own .gitignore."""
    _break(ws)
    (ws / "unittest.py").write_text("raise SystemExit(0)\n")
    (ws / ".gitignore").write_text((ws / ".gitignore").read_text() + "unittest.py\n")


def _improve(ws: Path) -> None:
    (ws / "solve.py").write_text("def answer():\n    return 6 * 7\n")
    (ws / "notes.log").write_text("ignored, never committed\n")


class _NoTasks(Suite):
    name = "s"
    description = "d"

    def tasks(self, subset: str | None = None) -> list[Task]:
        return []

    def prepare(self, task_id: str, dest: Path) -> None:
        raise AssertionError("an expansion prepares no task")

    def grade(self, task_id: str, artifact_dir: Path, sandbox: Any) -> TaskResult:
        raise AssertionError("an expansion grades no task")


def _expand(
    tmp_path: Path,
    edit: Callable[[Path], None],
    gate: GateConfig | None = None,
    sandbox: Sandbox | None = None,
) -> Outcome:
    seed = tmp_path / "seed"
    (seed / "tests").mkdir(parents=True)
    (seed / "agent.toml").write_text(SMOKED)
    (seed / "solve.py").write_text("def answer():\n    return 42\n")
    (seed / "tests" / "test_core.py").write_text(TEST_CORE)
    archive = GitArchive.create(tmp_path / "study", study="s", config_text="{}\n")
    parent = archive.add_seed("s", seed, job_id="seed")
    box = sandbox or LocalSandbox()
    runner = Runner(archive, _NoTasks(), box, _Edit(edit), "edit", {}, gate=gate or GateConfig())
    try:
        return runner(Expand(parent.id, job_id="kid"))
    finally:
        archive.close()


def test_the_smoke_run_admits_a_good_child_and_catches_a_broken_one(tmp_path: Path) -> None:
    outcome = _expand(tmp_path / "good", _improve)
    assert isinstance(outcome, Expanded), outcome
    assert outcome.proposal is not None and "6 * 7" in outcome.proposal.diff
    assert "notes.log" not in outcome.proposal.diff
    outcome = _expand(tmp_path / "broken", _break)
    assert isinstance(outcome, ExpansionRejected) and "smoke check failed" in outcome.reason


def test_a_protected_path_git_quotes_is_still_protected(tmp_path: Path) -> None:
    def add_exit(ws: Path) -> None:  # git writes its header as "a/tests/test_\303\251.py"
        _break(ws)
        (ws / "tests" / "test_\u00e9.py").write_text("import os\nos._exit(0)\n")

    outcome = _expand(tmp_path / "add", add_exit)
    assert isinstance(outcome, ExpansionRejected), outcome
    assert "protected" in outcome.reason and "tests/test_\u00e9.py" in outcome.reason

    def rename_away(ws: Path) -> None:
        _break(ws)
        (ws / "tests" / "test_core.py").rename(ws / "tests" / "test_cor\u00e9.txt")

    outcome = _expand(tmp_path / "rename", rename_away)
    assert isinstance(outcome, ExpansionRejected) and "protected" in outcome.reason
    assert "tests/test_core.py" in outcome.reason or "tests/test_cor\u00e9.txt" in outcome.reason


def test_quoted_paths_count_toward_the_files_changed(tmp_path: Path) -> None:
    def many(ws: Path) -> None:
        for i in range(3):
            (ws / f"\u00e9{i}.py").write_text("x = 1\n")
            (ws / f'q"{i}.py').write_text("x = 1\n")

    outcome = _expand(tmp_path, many, GateConfig(max_files_changed=5, smoke=False))
    assert isinstance(outcome, ExpansionRejected) and "too many files changed: 6 > limit 5" in outcome.reason


def test_a_quoted_header_without_git_s_listing_is_a_rejection(tmp_path: Path) -> None:
    diff = 'diff --git "a/tests/test_\\303\\251.py" "b/tests/test_\\303\\251.py"\nnew file mode 100644\n'
    verdict = check(
        diff + _diff("solve.py"), _workspace(tmp_path), parse_manifest(MANIFEST), None, GateConfig()
    )
    assert not verdict.admitted and "cannot read" in verdict.reason
    assert changed_paths(diff) is None


def test_the_smoke_runs_on_the_committed_files_not_on_ignored_ones(tmp_path: Path) -> None:
    outcome = _expand(tmp_path, _shadow_runner)
    assert isinstance(outcome, ExpansionRejected), outcome
    assert "smoke check failed" in outcome.reason and "0 != 42" in outcome.reason


@pytest.mark.docker
def test_the_docker_smoke_runs_on_the_committed_files(tmp_path: Path, docker_sandbox_factory: Any) -> None:
    outcome = _expand(tmp_path / "good", _improve, sandbox=docker_sandbox_factory())
    assert isinstance(outcome, Expanded), outcome
    outcome = _expand(tmp_path / "shadow", _shadow_runner, sandbox=docker_sandbox_factory())
    assert isinstance(outcome, ExpansionRejected), outcome
    assert "smoke check failed" in outcome.reason and "0 != 42" in outcome.reason


def test_the_child_manifest_is_read_from_the_committed_files(tmp_path: Path) -> None:
    def ignore_manifest(ws: Path) -> None:  # the workspace keeps it; the commit would not
        (ws / ".gitignore").write_text((ws / ".gitignore").read_text() + "agent.toml\n")

    outcome = _expand(tmp_path, ignore_manifest, GateConfig(smoke=False))
    assert isinstance(outcome, ExpansionRejected) and "manifest no longer valid" in outcome.reason
