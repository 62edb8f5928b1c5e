"""The code-edit grader: ``python3 grade.py REPO_DIR PATCH TESTRUN_DIR RUN_TIMEOUT`` prints one contract line.

Runs inside a fresh sandbox with this script, the task's repository and the shared ``testrun`` package
mounted read-only, so ``REPO_DIR`` (which holds the hidden tests) is never visible to the agent, and the
candidate's code, which runs here, reaches no other task's tests. Steps:

1. refuse a patch that touches tests, leaves the repository (flags ``touched_tests``, ``unsafe_path``) or
   adds a binary or compiled file (``tamper_suspect``);
2. apply the patch to a copy of the repository (``git apply``, then ``patch -p1`` as a fallback);
3. find what it changed by comparing the trees (not by reading the patch's text), refuse it on the
   same grounds as in 1, and scan every Python file it changed for what it added (``testrun/scan.py``):
   a finding is flag ``tamper_suspect`` with the file and the pattern, score 0;
4. learn the expected test ids by collecting the hidden tests on a pristine copy: no candidate code runs;
5. run the hidden tests under two harnesses that report over private channels and must agree
   (``testrun/verdict.py``): pytest with our reporter, then our own direct runner.

Score: the fraction of the expected hidden tests that both harnesses report passed; ``resolved`` is 1
only when all of them do. A missing test counts as failed; an unexpected test, a run that ends early or
is forced to exit, or a test file changed during a run scores 0. Every problem with the candidate's patch
becomes ``{"score": 0, "error": ...}``; a step of the grader's own that fails (collecting the pristine tests)
is ``{"grader_fault": ...}``, and a broken grader exits non-zero (the grader contract,
``metasearch/suites/contract.py``).
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import PurePosixPath
from typing import Any

HIDDEN = "hidden_tests"
TEST_DIRS = {"tests", "test", "testing", HIDDEN}
TEST_FILES = {"conftest.py"}
COMPILED = (".so", ".pyd", ".pyc", ".pyo", ".dll", ".dylib")
IGNORED = shutil.ignore_patterns(HIDDEN, "__pycache__", "*.pyc", ".pytest_cache")


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
    """Integrity flags and the reason to refuse the patch, if any, from its text: a first look, before it
    is applied. What it changed is judged on the trees after it is (``check_changes``)."""
    paths = touched_paths(diff)
    unsafe = [p for p in paths if p.startswith("/") or ".." in PurePosixPath(p).parts]
    if unsafe or "new file mode 120000" in diff or "new mode 120000" in diff:
        return ["unsafe_path"], f"patch leaves the repository or adds a symlink: {unsafe[:3]}"
    flags, refusal = check_changes(paths, [])
    if not refusal and ("GIT binary patch" in diff or "\nBinary files " in diff):
        reason = "patch adds a binary or compiled file, which the grader does not run: a binary patch"
        return ["tamper_suspect"], f"tamper_suspect: {reason}"
    return flags, refusal


def check_changes(paths: list[str], links: list[str]) -> tuple[list[str], str | None]:
    """Integrity flags and the reason to refuse ``paths`` changed (``links`` among them: links or other
    files that are not regular), if any."""
    if links:
        return ["unsafe_path"], f"patch adds a symlink or a special file: {links[:3]}"
    outside = [p for p in paths if PurePosixPath(p).parts[:1] == (".git",)]
    if outside:
        return ["unsafe_path"], f"patch changes the repository's git data: {outside[:3]}"
    tests = [p for p in paths if is_test_path(p)]
    if tests:
        return ["touched_tests"], f"patch edits test files, which is not allowed: {tests[:5]}"
    # Compiled modules (an extension, an unchecked-hash .pyc) would run code no scan can read.
    compiled = [p for p in paths if p.endswith(COMPILED) or "__pycache__" in PurePosixPath(p).parts]
    if compiled:
        reason = f"patch adds a binary or compiled file, which the grader does not run: {compiled[:3]}"
        return ["tamper_suspect"], f"tamper_suspect: {reason}"
    return [], None


def changed_files(before: str, after: str) -> tuple[list[str], list[str]]:
    """What the patch changed, from the trees themselves (a patch's text can name a file one way to a
    reader and another way to ``git apply``: quoted names with escapes, odd prefixes, mode lines): every
    path that is new, gone or different in content, and the new or changed ones that are not regular
    files (a link, a pipe)."""
    old, new = _entries(before), _entries(after)
    changed, odd = [], []
    for rel in sorted(old.keys() | new.keys()):
        was, now = old.get(rel), new.get(rel)
        if was == now and (now is None or now[0] != "file" or _same_bytes(before, after, rel)):
            continue
        changed.append(rel)
        if now is not None and now[0] != "file":
            odd.append(rel)
    return changed, odd


def _entries(root: str) -> dict[str, tuple[str, str]]:
    """Every entry under ``root`` but folders (a link to one included), by relative path: (kind, link
    target)."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path):
                found[rel] = ("link", os.readlink(path))
            elif os.path.isfile(path):
                found[rel] = ("file", "")
            elif not os.path.isdir(path):
                found[rel] = ("special", "")
    return found


def _same_bytes(before: str, after: str, rel: str) -> bool:
    return filecmp.cmp(os.path.join(before, rel), os.path.join(after, rel), shallow=False)


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


def main(argv: list[str]) -> dict[str, Any]:
    repo, diff_path, testrun, run_timeout = argv[1], argv[2], argv[3], float(argv[4])
    sys.path.insert(0, os.path.dirname(os.path.abspath(testrun)))
    from testrun import scan, verdict

    if not os.path.isfile(diff_path):
        return {"score": 0.0, "error": "no patch: expected output/patch.diff"}
    with open(diff_path, encoding="utf-8", errors="replace") as f:
        diff = f.read()
    if not diff.strip():
        return {"score": 0.0, "error": "empty patch: output/patch.diff holds no changes"}
    flags, refusal = check_patch(diff)
    if refusal:
        return {"score": 0.0, "flags": flags, "error": refusal}
    tests = hidden_tests(os.path.join(repo, HIDDEN))
    with tempfile.TemporaryDirectory(prefix="code-edit-") as tmp:
        pristine = os.path.join(tmp, "pristine")
        shutil.copytree(repo, pristine, ignore=IGNORED)
        work = os.path.join(tmp, "repo")
        shutil.copytree(repo, work, ignore=IGNORED)
        failure = apply_patch(os.path.abspath(diff_path), work)
        if failure:
            return {"score": 0.0, "metrics": {"applied": 0.0}, "error": failure}
        changed, odd = changed_files(pristine, work)
        flags, refusal = check_changes(changed, odd)
        if refusal:
            return {"score": 0.0, "flags": flags, "error": refusal, "metrics": {"applied": 1.0}}
        if found := scan_patch(scan, changed, pristine, work):
            return {**verdict.failure(found, [verdict.TAMPER]), "metrics": {"applied": 1.0}}
        try:  # no candidate code runs here: a failure is the grader's, never a 0 for the candidate
            expected = verdict.collect(pristine, tests, timeout_s=run_timeout)
        except RuntimeError as exc:
            return {"grader_fault": f"collecting the pristine hidden tests failed: {exc}"[:2000]}
        result = verdict.run_and_judge(
            work, tests, expected, timeout_s=run_timeout, fractional=True, what="hidden tests"
        )
    result["metrics"] = {"applied": 1.0, "total": float(len(expected)), **result.get("metrics", {})}
    return result


def hidden_tests(folder: str) -> dict[str, bytes]:
    """The pristine hidden test files (every file under ``hidden_tests/``), by path in the repository."""
    found = {}
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                found[os.path.join(HIDDEN, os.path.relpath(path, folder))] = f.read()
    return found


def scan_patch(scan: Any, paths: list[str], pristine: str, work: str) -> str | None:
    """The first thing the patch added that the static scan flags, as ``"file: finding"``."""
    for rel in paths:
        after = os.path.join(work, rel)
        if not rel.endswith(".py") or os.path.islink(after) or not os.path.isfile(after):
            continue
        before = os.path.join(pristine, rel)
        old = _read(before) if os.path.isfile(before) and not os.path.islink(before) else None
        if found := scan.new_findings(old, _read(after)):
            return f"{rel}: {', '.join(found[:3])}"
    return None


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


if __name__ == "__main__":
    # The leading newline ends any partial line written to this stdout by someone else.
    print("\n" + json.dumps(main(sys.argv)))
