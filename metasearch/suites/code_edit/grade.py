"""The code-edit grader: ``python3 grade.py REPO_DIR PATCH`` prints one JSON object.

Runs inside a fresh sandbox with the suite's directory mounted read-only, so ``REPO_DIR`` (which holds the
hidden tests) is never visible to the agent. Steps: refuse a patch that touches tests or leaves the
repository, copy the visible repository to a temporary directory, apply the patch (``git apply``, then
``patch -p1`` as a fallback), copy the hidden tests in and run them with pytest.

Score: the fraction of hidden tests that pass; ``resolved`` is 1 only when all of them do. Every problem
with the candidate's patch becomes ``{"score": 0, "error": ...}``; only a broken grader exits non-zero.

Limits of the defence: the patched code runs in the same process as the hidden tests, so a patch that
rewrites pytest at import time is not caught here; the flags catch the direct route (editing tests).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import PurePosixPath
from typing import Any

HIDDEN = "hidden_tests"
TEST_DIRS = {"tests", "test", "testing", HIDDEN}
TEST_FILES = {"conftest.py"}
IGNORED = shutil.ignore_patterns(HIDDEN, "__pycache__", "*.pyc", ".pytest_cache")
# A grader-owned pytest configuration: repository ini files (addopts, plugins) cannot change the run.
PYTEST_INI = "[pytest]\naddopts =\n"
# Isolated mode (-I) keeps the repository off the front of sys.path: a patch that adds ``pytest.py`` or a
# stdlib-named module cannot replace the test runner. The repository is appended, after pytest is loaded.
RUNNER = "import sys, pytest; sys.path.append(sys.argv[1]); sys.exit(pytest.main(sys.argv[2:]))"


def touched_paths(diff: str) -> list[str]:
    """Every path a unified (or git) diff names, without ``a/``/``b/`` prefixes."""
    paths: list[str] = []
    for line in diff.splitlines():
        if line.startswith("diff --git "):
            parts = line[len("diff --git ") :].split(" b/", 1)
            paths += [parts[0], "b/" + parts[1]] if len(parts) == 2 else [parts[0]]
        elif line.startswith(("--- ", "+++ ")):
            paths.append(line[4:].split("\t", 1)[0])
        elif line.startswith(("rename from ", "rename to ", "copy from ", "copy to ")):
            paths.append(line.split(" ", 2)[2])
    cleaned = []
    for raw in paths:
        path = raw.strip().strip('"')
        if path == "/dev/null" or not path:
            continue
        if path.startswith(("a/", "b/")):
            path = path[2:]
        cleaned.append(path)
    return sorted(set(cleaned))


def is_test_path(path: str) -> bool:
    parts = PurePosixPath(path).parts
    name = parts[-1] if parts else ""
    return (
        any(p in TEST_DIRS for p in parts[:-1])
        or name in TEST_FILES
        or name.startswith("test_")
        or name.endswith("_test.py")
        or name == HIDDEN
    )


def check_patch(diff: str) -> tuple[list[str], str | None]:
    """Integrity flags and the reason to refuse the patch, if any."""
    paths = touched_paths(diff)
    unsafe = [p for p in paths if p.startswith("/") or ".." in PurePosixPath(p).parts]
    if unsafe or "new file mode 120000" in diff or "new mode 120000" in diff:
        return ["unsafe_path"], f"patch leaves the repository or adds a symlink: {unsafe[:3]}"
    tests = [p for p in paths if is_test_path(p)]
    if tests:
        return ["touched_tests"], f"patch edits test files, which is not allowed: {tests[:5]}"
    return [], None


def apply_patch(diff_path: str, work: str) -> str | None:
    """Apply the patch in ``work``; the reason when neither ``git apply`` nor ``patch`` can."""
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": os.path.dirname(work)}
    git = subprocess.run(
        ["git", "apply", "--whitespace=nowarn", diff_path], cwd=work, env=env, capture_output=True, text=True
    )
    if git.returncode == 0:
        return None
    fallback = subprocess.run(
        ["patch", "-p1", "--batch", "--forward", "--no-backup-if-mismatch", "-i", diff_path],
        cwd=work,
        capture_output=True,
        text=True,
    )
    if fallback.returncode == 0:
        return None
    return f"patch does not apply: {(git.stderr or fallback.stdout).strip()[-400:]}"


def run_hidden_tests(work: str, report: str) -> tuple[int, int, list[str]]:
    """Run the hidden tests; (passed, total, names of the tests that did not pass)."""
    ini = os.path.join(os.path.dirname(report), "pytest.ini")
    with open(ini, "w") as f:
        f.write(PYTEST_INI)
    command = [
        sys.executable,
        "-I",
        "-B",
        "-c",
        RUNNER,
        work,
        "-q",
        "-p",
        "no:cacheprovider",
        "-c",
        ini,
        "--rootdir",
        work,
    ]
    command += ["--confcutdir", os.path.join(work, HIDDEN), f"--junitxml={report}", HIDDEN]
    subprocess.run(
        command,
        cwd=work,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
    )
    if not os.path.isfile(report):
        return 0, 0, []
    cases = ET.parse(report).getroot().iter("testcase")
    failed, total = [], 0
    for case in cases:
        total += 1
        if any(child.tag in ("failure", "error", "skipped") for child in case):
            failed.append(case.get("name") or "?")
    return total - len(failed), total, failed


def main(argv: list[str]) -> dict[str, Any]:
    repo, diff_path = argv[1], argv[2]
    if not os.path.isfile(diff_path):
        return {"score": 0.0, "error": "no patch: expected output/patch.diff"}
    with open(diff_path, encoding="utf-8", errors="replace") as f:
        diff = f.read()
    if not diff.strip():
        return {"score": 0.0, "error": "empty patch: output/patch.diff holds no changes"}
    flags, refusal = check_patch(diff)
    if refusal:
        return {"score": 0.0, "flags": flags, "error": refusal}
    with tempfile.TemporaryDirectory(prefix="code-edit-") as tmp:
        work = os.path.join(tmp, "repo")
        shutil.copytree(repo, work, ignore=IGNORED)
        failure = apply_patch(os.path.abspath(diff_path), work)
        if failure:
            return {"score": 0.0, "metrics": {"applied": 0.0}, "error": failure}
        shutil.copytree(os.path.join(repo, HIDDEN), os.path.join(work, HIDDEN), dirs_exist_ok=True)
        report_dir = os.path.join(tmp, "report")
        os.mkdir(report_dir)
        passed, total, failed = run_hidden_tests(work, os.path.join(report_dir, "junit.xml"))
    metrics = {"applied": 1.0, "passed": float(passed), "total": float(total)}
    metrics["resolved"] = float(total > 0 and passed == total)
    if total == 0:
        return {"score": 0.0, "metrics": metrics, "error": "the hidden tests did not run"}
    error = None if passed == total else f"{len(failed)} of {total} hidden tests failed: {failed[:5]}"
    return {"score": passed / total, "metrics": metrics, "error": error}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv)))
