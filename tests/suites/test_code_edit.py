from __future__ import annotations

import difflib
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from metasearch.errors import ConfigError
from metasearch.sandboxes.local import LocalSandbox
from metasearch.sandboxes.protocol import Sandbox
from metasearch.suites.code_edit import REPOS_DIR, CodeEditSuite
from metasearch.suites.protocol import Suite, TaskResult

FIXTURES = Path(__file__).resolve().parent / "code_edit_fixtures"
NAMES = sorted(p.name for p in REPOS_DIR.iterdir() if (p / "ISSUE.md").is_file())


def _grade(tmp_path: Path, name: str, diff: str | None) -> TaskResult:
    artifact = tmp_path / "output"
    artifact.mkdir(parents=True, exist_ok=True)
    if diff is not None:
        (artifact / "patch.diff").write_text(diff)
    return CodeEditSuite().grade(f"code-edit/{name}", artifact, LocalSandbox())


def _edit_diff(name: str, rel: str, new_text: str) -> str:
    """A unified diff that replaces file ``rel`` of repo ``name`` (a new file when it does not exist)."""
    path = REPOS_DIR / name / rel
    old = path.read_text().splitlines(keepends=True) if path.exists() else []
    lines = difflib.unified_diff(
        old, new_text.splitlines(keepends=True), "a/" + rel if old else "/dev/null", "b/" + rel
    )
    return "".join(lines)


def test_suite_satisfies_the_protocol_and_lists_tasks() -> None:
    suite = CodeEditSuite()
    assert isinstance(suite, Suite)
    assert (suite.name, suite.artifact_path, suite.needs_docker, suite.needs_gpu) == (
        "code-edit",
        "output",
        False,
        False,
    )
    assert len(NAMES) >= 4
    assert [t.id for t in suite.tasks()] == [f"code-edit/{n}" for n in NAMES]
    smoke = [t.id for t in CodeEditSuite(CodeEditSuite.Config(subset="smoke")).tasks()]
    assert smoke and set(smoke) < {t.id for t in suite.tasks()}
    for task in suite.tasks():
        issue = (REPOS_DIR / task.id.split("/")[1] / "ISSUE.md").read_text().strip()
        assert issue in task.statement and "patch.diff" in task.statement


def test_errors_name_the_key_or_task() -> None:
    with pytest.raises(ConfigError, match=r"suite\.subset"):
        CodeEditSuite(CodeEditSuite.Config(subset="nope"))
    with pytest.raises(ConfigError, match="unknown task 'code-edit/nope'"):
        CodeEditSuite().prepare("code-edit/nope", Path("/nonexistent"))
    with pytest.raises(ConfigError, match="unknown task"):
        CodeEditSuite().prepare("code-edit/../repos", Path("/nonexistent"))


@pytest.mark.parametrize("name", NAMES)
def test_prepare_writes_only_visible_files_as_a_git_repo(tmp_path: Path, name: str) -> None:
    CodeEditSuite().prepare(f"code-edit/{name}", tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["TASK.md", "output", "repo"]
    files = sorted(
        str(p.relative_to(tmp_path / "repo")) for p in (tmp_path / "repo").rglob("*") if p.is_file()
    )
    source = REPOS_DIR / name
    visible = sorted(
        str(p.relative_to(source))
        for p in source.rglob("*")
        if p.is_file() and "hidden_tests" not in p.parts and "__pycache__" not in p.parts
    )
    assert [f for f in files if not f.startswith(".git/")] == visible
    assert not any("hidden" in f for f in visible)
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=tmp_path / "repo", capture_output=True, text=True
    )
    assert status.returncode == 0 and status.stdout == ""


@pytest.mark.parametrize("name", NAMES)
def test_the_fix_resolves_and_a_wrong_or_empty_patch_does_not(tmp_path: Path, name: str) -> None:
    fixed = _grade(tmp_path, name, (FIXTURES / f"{name}.fix.diff").read_text())
    assert fixed.error is None and fixed.flags == ()
    assert fixed.score == 1.0 and fixed.metrics["resolved"] == 1.0 and fixed.metrics["total"] >= 4

    wrong = _grade(tmp_path, name, (FIXTURES / f"{name}.wrong.diff").read_text())
    assert wrong.metrics["applied"] == 1.0 and wrong.metrics["resolved"] == 0.0
    assert 0.0 <= wrong.score < 1.0 and "hidden tests failed" in (wrong.error or "")

    empty = _grade(tmp_path, name, "")
    assert empty.score == 0.0 and "empty patch" in (empty.error or "")


@pytest.mark.parametrize("name", NAMES)
def test_patches_touching_tests_are_refused(tmp_path: Path, name: str) -> None:
    fix = (FIXTURES / f"{name}.fix.diff").read_text()
    hidden = next((REPOS_DIR / name / "hidden_tests").glob("test_*.py")).relative_to(REPOS_DIR / name)
    visible = next((REPOS_DIR / name).glob("tests/test_*.py"), None)
    visible_rel = str(visible.relative_to(REPOS_DIR / name)) if visible else "tests/test_new.py"
    for touched in (str(hidden), visible_rel, "conftest.py"):
        result = _grade(tmp_path, name, fix + _edit_diff(name, touched, "def test_ok() -> None:\n    pass\n"))
        assert result.score == 0.0 and result.flags == ("touched_tests",), touched
        assert touched in (result.error or "")


def test_the_agent_workflow_with_git_diff(tmp_path: Path) -> None:
    task = tmp_path / "task"
    CodeEditSuite().prepare("code-edit/shop", task)
    repo = task / "repo"
    cart = repo / "shop" / "cart.py"
    cart.write_text(cart.read_text().replace("line.quantity = quantity\n", "line.quantity += quantity\n"))
    diff = subprocess.run(["git", "diff"], cwd=repo, capture_output=True, text=True, check=True).stdout
    (task / "output" / "patch.diff").write_text(diff)
    result = CodeEditSuite().grade("code-edit/shop", task / "output", LocalSandbox())
    assert result.score == 1.0 and result.metrics["resolved"] == 1.0


def test_plain_unified_diffs_apply_and_bad_ones_are_reported(tmp_path: Path) -> None:
    source = (REPOS_DIR / "pagination" / "pagination.py").read_text()
    fixed = source.replace("return total_items // per_page\n", "return -(-total_items // per_page)\n")
    plain = _edit_diff("pagination", "pagination.py", fixed)
    assert plain.startswith("--- a/pagination.py") and "diff --git" not in plain
    assert _grade(tmp_path, "pagination", plain).score == 1.0

    stale = plain.replace("-    return total_items // per_page\n", "-    return total_items / per_page\n")
    bad = _grade(tmp_path, "pagination", stale)
    assert bad.score == 0.0 and bad.metrics["applied"] == 0.0 and "does not apply" in (bad.error or "")

    missing = _grade(tmp_path / "none", "pagination", None)
    assert missing.score == 0.0 and "no patch" in (missing.error or "")

    # A fake pytest in the repository never replaces the real one (isolated mode, repository appended).
    fake_runner = _edit_diff("pagination", "pytest.py", "def main(*args, **kwargs):\n    return 0\n")
    shadowed = _grade(tmp_path, "pagination", fake_runner)
    assert shadowed.metrics["total"] >= 4 and shadowed.metrics["resolved"] == 0.0 and shadowed.flags == ()
    exiting = _grade(
        tmp_path, "pagination", _edit_diff("pagination", "pytest.py", "import sys\nsys.exit(0)\n")
    )
    assert exiting.score == 0.0 and exiting.flags == ("tamper_suspect",)
    assert exiting.error == "tamper_suspect: pytest.py: early exit outside __main__: sys.exit"

    escape = plain.replace("a/pagination.py", "a/../x.py").replace("b/pagination.py", "b/../x.py")
    assert _grade(tmp_path, "pagination", escape).flags == ("unsafe_path",)

    # A compiled module next to the source would be imported instead of it, unread by any scan.
    for name in ("pagination.cpython-311-x86_64-linux-gnu.so", "__pycache__/pagination.cpython-311.pyc"):
        compiled = _grade(tmp_path, "pagination", plain + _edit_diff("pagination", name, "not really\n"))
        assert compiled.score == 0.0 and compiled.flags == ("tamper_suspect",)
        assert name in (compiled.error or "") and "binary or compiled" in (compiled.error or "")
    binary = (
        "diff --git a/p.bin b/p.bin\nnew file mode 100644\nGIT binary patch\nliteral 3\nKcmZQzU|;|M00aO5\n"
    )
    assert _grade(tmp_path, "pagination", plain + binary).flags == ("tamper_suspect",)


def test_what_a_patch_changed_is_judged_on_the_trees_not_on_its_text(tmp_path: Path) -> None:
    """A patch can name its files one way to a reader of its text and another way to ``git apply``: git's
    quoted names with octal escapes, prefixes other than ``a/``/``b/``, a mode written with a leading zero.
    Each of these once got a forbidden file applied, or added code past the scan."""
    source = (REPOS_DIR / "pagination" / "pagination.py").read_text()
    fixed = source.replace("return total_items // per_page\n", "return -(-total_items // per_page)\n")
    plain = _edit_diff("pagination", "pagination.py", fixed)
    quoted = (
        'diff --git "a/conftes\\164.py" "b/conftes\\164.py"\nnew file mode 100644\n--- /dev/null\n'
        '+++ "b/conftes\\164.py"\n@@ -0,0 +1 @@\n+x = 1\n'
    )
    result = _grade(tmp_path / "quoted", "pagination", plain + quoted)
    assert result.flags == ("touched_tests",) and "conftest.py" in (result.error or ""), result
    cached = quoted.replace("conftes\\164.py", "__pycach\\145__/pagination.cpython-311.py\\143")
    result = _grade(tmp_path / "cached", "pagination", plain + cached)
    assert result.flags == ("tamper_suspect",) and "__pycache__/pagination.cpython-311.pyc" in (
        result.error or ""
    )
    link = (
        "diff --git a/link.py b/link.py\nnew file mode 0120000\n--- /dev/null\n+++ b/link.py\n"
        "@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n"
    )
    result = _grade(tmp_path / "link", "pagination", plain + link)
    assert result.flags == ("unsafe_path",) and "link.py" in (result.error or ""), result
    exiting = _edit_diff("pagination", "pagination.py", fixed + "\nimport sys\nsys.exit(0)\n")
    prefixed = exiting.replace("--- a/", "--- x/").replace("+++ b/", "+++ y/")
    result = _grade(tmp_path / "prefixed", "pagination", prefixed)
    assert result.flags == ("tamper_suspect",), result
    assert result.error == "tamper_suspect: pagination.py: early exit outside __main__: sys.exit"
    assert (
        _grade(
            tmp_path / "plain", "pagination", plain.replace("--- a/", "--- x/").replace("+++ b/", "+++ y/")
        ).score
        == 1.0
    )


@pytest.mark.docker
def test_grading_in_docker(docker_sandbox_factory: Callable[[], Sandbox], tmp_path: Path) -> None:
    artifact = tmp_path / "output"
    artifact.mkdir()
    (artifact / "patch.diff").write_text((FIXTURES / "intervals.fix.diff").read_text())
    suite = CodeEditSuite()
    fixed = suite.grade("code-edit/intervals", artifact, docker_sandbox_factory())
    assert fixed.score == 1.0 and fixed.error is None
    (artifact / "patch.diff").write_text((FIXTURES / "intervals.wrong.diff").read_text())
    wrong = suite.grade("code-edit/intervals", artifact, docker_sandbox_factory())
    assert wrong.metrics["resolved"] == 0.0 and wrong.score < 1.0
