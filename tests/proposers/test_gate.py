from __future__ import annotations

from pathlib import Path

from metasearch.manifest import parse_manifest
from metasearch.proposers.gate import GateConfig, changed_paths, check

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
