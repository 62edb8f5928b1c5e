"""Judging test runs: expected ids known in advance, two harnesses that must agree, pristine test files.

Runs in the grading sandbox (stdlib only, imported from ``/testrun``). ``run_and_judge`` writes the
pristine test files into the work tree, runs ``harness.py`` twice (pytest with our reporter, then our own
direct runner), checks that no test file changed during either run, and ``judge`` turns the two
transcripts into the verdict dict a grader prints. A test counts as passed only when **both** harnesses
report it passed. Failures, each with a reason naming it:

- flag ``tamper_suspect`` (score 0): a channel line the harness did not write, a library callable replaced
  during the run, a test module's names or a test class changed (``shape.py``), a value that equals
  anything (a class of the code under test whose ``__eq__`` says so), something the tests rely on changed
  during a call they made into the code under test (``entries.py``), a process that outlived the run
  holding the channel, a test file changed, a process exit status that differs from the one the session
  reported (a forced exit), or a static-scan finding;
- flag ``inconsistent_results`` (score 0): the harnesses disagree on an expected test's outcome;
- no flag, score 0: a run that timed out or ended early (no end-of-session record), a test id the grader
  did not expect, or a run's exit status saying failure while every test reported passed (in every
  language: lines forged after the real ones can rewrite a report, not the exit status);
- otherwise the score is the passed fraction of the expected ids (``fractional``) or all-or-nothing.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable
from typing import Any

from .channel import Run, run_harness

TAMPER = "tamper_suspect"
GUARD_REFUSED = "a grader-owned guard refused"  # in the test process: jest_guard.js, EqualityGuard.java
GUARD_REFUSAL = re.compile(r"metasearch: (the code under test tried to [a-z -]+(?:: [\w.$]+)?)")  # a guard's
ALWAYS_EQUAL = "always-equal class"  # watching.ALWAYS_EQUAL
WATCHED = "watched"  # hook.WATCH: what the audit hook saw the code under test do
SHAPE = "tests changed"  # shape.SHAPE: a test module's names or a test class changed, or an import hook
INCONSISTENT = "inconsistent_results"
MODES = ("pytest", "direct")
NAMES_TESTS = "the solution builds only with the test files, whose names it uses"  # Go, Java
# What a test file declares that code of the same package or build can name (Go and Java share both):
# package-level functions, variables, constants and types (and the names in a ``var (...)`` block); classes.
TEST_DECLARATIONS = {
    "go": re.compile(r"^(?:func|var|const|type)\s+(\w+)|^(?:var|const|type)\s*\(([^)]*)^\)", re.M | re.S),
    "java": re.compile(r"\b(?:class|interface|enum|record)\s+(\w+)()"),
}
BLOCK_NAME = re.compile(r"^\t(\w+)", re.M)  # one name per line of a Go declaration block
JAVA_ESCAPE = re.compile(r"\\u+([0-9a-fA-F]{4})")
FAILURE_OUTPUT = 1200  # characters of the pytest run's output kept in a failure's reason


def run_and_judge(
    root: str,
    tests: dict[str, bytes],
    expected: list[str],
    *,
    timeout_s: float,
    fractional: bool,
    what: str = "tests",
) -> dict[str, Any]:
    """Run both harnesses on the test files ``tests`` (relative path -> pristine bytes) under ``root``."""
    runs = []
    for mode in MODES:
        place_tests(root, tests)
        runs.append(run_harness(mode, root, sorted(tests), timeout_s=timeout_s))
        if changed := changed_tests(root, tests):
            return failure(f"test file {changed} changed during the {mode} run", [TAMPER])
    return judge(expected, runs, fractional=fractional, what=what)


def collect(root: str, tests: dict[str, bytes], *, timeout_s: float) -> list[str]:
    """The test ids pytest collects from pristine code; ``RuntimeError`` when that run fails."""
    place_tests(root, tests)
    run = run_harness("collect", root, sorted(tests), timeout_s=timeout_s)
    ids = [i for r in run.records if r.get("t") == "collected" for i in r.get("ids", [])]
    errors = [r.get("id") for r in run.records if r.get("t") == "collect_error"]
    if run.corrupt or errors or not any(r.get("t") == "end" for r in run.records) or not ids:
        raise RuntimeError(f"collecting the pristine tests failed ({errors or run.corrupt}): {run.output}")
    return ids


def judge(expected: list[str], runs: list[Run], *, fractional: bool, what: str) -> dict[str, Any]:
    """The verdict dict for ``runs`` of the same tests; see the module docstring for the rules."""
    if not expected:  # never a vacuous pass: the grader must know which tests decide
        return failure(f"no expected {what}: the grader could not learn which tests decide")
    folded = []
    for run in runs:
        if problem := _distrust(run):
            return failure(f"the {run.mode} run: {problem}", [TAMPER])
        if run.timed_out:
            return failure(f"{what} timed out in the {run.mode} run: {run.output[-800:]}")
        ends = [r for r in run.records if r.get("t") == "end"]
        if not ends:
            return failure(
                f"the {run.mode} run ended early (no end-of-session record; exit code "
                f"{run.exit_code}): {run.output[-800:]}"
            )
        if run.exit_code != ends[-1].get("exitstatus"):
            return failure(
                f"the {run.mode} run exited with {run.exit_code} after its session reported "
                f"{ends[-1].get('exitstatus')}: a forced exit",
                [TAMPER],
            )
        folded.append(outcomes(run))
    wanted = set(expected)
    for run, found in zip(runs, folded, strict=True):
        if unexpected := sorted(set(found) - wanted):
            return failure(f"the {run.mode} run reported {what} the grader did not expect: {unexpected[:5]}")
    views = [[found.get(test_id, "missing") for found in folded] for test_id in expected]
    if differ := [t for t, seen in zip(expected, views, strict=True) if len(set(seen)) > 1]:
        modes = [run.mode for run in runs]
        detail = [f"{t}: {dict(zip(modes, v, strict=True))}" for t, v in zip(expected, views, strict=True)]
        detail = [d for d, t in zip(detail, expected, strict=True) if t in differ]
        return failure(f"the harnesses disagree on {len(differ)} {what}: {detail[:3]}", [INCONSISTENT])
    passed = [t for t, seen in zip(expected, views, strict=True) if seen[0] == "passed"]
    missing = [t for t, seen in zip(expected, views, strict=True) if seen[0] == "missing"]
    others = [t for t in expected if t not in passed and t not in missing]
    total = len(expected)
    # Every test reported passed, yet the process says otherwise: result lines written after the real ones
    # (a thread, a late write) can rewrite a transcript, but not the exit status of the process.
    if not missing and not others and (failing := [r for r in runs if r.exit_code]):
        run = failing[0]
        return failure(f"the {run.mode} run exited {run.exit_code} although every one of the {what} passed")
    metrics = {"passed": float(len(passed)), "total": float(total), "resolved": float(len(passed) == total)}
    error = None
    if len(passed) < total:
        error = f"{total - len(passed)} of {total} {what} failed"
        error += f": {[_short(t) for t in others][:5]}" if others else ""
        error += f"; missing: {[_short(t) for t in missing][:5]}" if missing else ""
        broken = sorted(
            {str(r.get("id")) for run in runs for r in run.records if r.get("t") == "collect_error"}
        )
        error += f"; could not be imported: {broken[:3]}" if broken else ""
        error += f"\n{runs[0].output[-FAILURE_OUTPUT:]}"
    score = len(passed) / total if fractional else float(len(passed) == total)
    return {"score": score, "metrics": metrics, "flags": [], "error": error}


def outcomes(run: Run) -> dict[str, str]:
    """Each reported test's outcome: failed if any phase failed, else skipped if any was, else passed."""
    found: dict[str, str] = {}
    rank = {"passed": 0, "skipped": 1, "failed": 2}
    for record in run.records:
        if record.get("t") == "report":
            test_id, outcome = str(record.get("id")), str(record.get("outcome"))
            outcome = outcome if outcome in rank else "failed"
            if rank[outcome] >= rank[found.get(test_id, "passed")]:
                found[test_id] = outcome
    return found


def failure(reason: str, flags: list[str] | None = None) -> dict[str, Any]:
    label = f"{flags[0]}: " if flags else ""
    return {"score": 0.0, "metrics": {"resolved": 0.0}, "flags": flags or [], "error": label + reason}


def place_tests(root: str, tests: dict[str, bytes]) -> None:
    """Write the pristine test files, replacing whatever stands at their paths."""
    for rel, content in tests.items():
        path = os.path.join(root, rel)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(content)


def changed_tests(root: str, tests: dict[str, bytes]) -> str | None:
    for rel, content in tests.items():
        path = os.path.join(root, rel)
        if os.path.islink(path) or not os.path.isfile(path):
            return rel
        with open(path, "rb") as f:
            if f.read() != content:
                return rel
    return None


def declared_names(language: str, texts: Iterable[str]) -> set[str]:
    """The names the test files (their texts) declare for code of the same package or build to use."""
    found: set[str] = set()
    for text in texts:
        for name, block in TEST_DECLARATIONS[language].findall(text):
            found.update([name] if name else BLOCK_NAME.findall(block))
    return found


def names_tests(language: str, solution: Iterable[str], tests: Iterable[str], allowed: Iterable[str]) -> bool:
    """Whether the solution's text holds a name the tests declare, other than ``allowed`` (which only a
    build of the solution alone can tell apart from a word that names something of its own)."""
    words = {w for text in solution for w in re.findall(r"\w+", JAVA_ESCAPE.sub(_unescape, text))}
    return bool((declared_names(language, tests) - set(allowed)) & words)


def _unescape(match: re.Match[str]) -> str:
    return chr(int(match.group(1), 16))


def tampered(runs: Iterable[Run], what: str) -> None:
    """Record what a grader-side check found (one sentence) in every transcript of the same test process."""
    for run in runs:
        run.records.append({"t": "tamper", "what": what})


def guard_refusals(runs: Iterable[Run], output: str) -> None:
    """The first refusal a grader-owned guard in the test process printed in ``output``, recorded in every
    transcript of that process."""
    for refusal in sorted(set(GUARD_REFUSAL.findall(output)))[:1]:
        tampered(runs, f"{GUARD_REFUSED} it: {refusal}")


def _distrust(run: Run) -> str | None:
    if run.corrupt:
        return run.corrupt
    if run.held_open:
        return "a process outlived the run and kept the result channel open"
    tampered = [r.get("what") for r in run.records if r.get("t") == "tamper"]
    if not tampered:
        return None
    if isinstance(tampered[0], str):  # a grader-side check's own sentence (jest's guard, catch2's link check)
        return tampered[0]
    if any(str(what).startswith(ALWAYS_EQUAL) for what in tampered[0] or []):
        return f"a value that equals anything appeared during the run: {tampered[0]}"
    if changed := [str(w).split(": ", 1)[-1] for w in tampered[0] or [] if str(w).startswith(SHAPE)]:
        return f"what the tests are made of changed during the run: {changed}"
    if watched := [str(w) for w in tampered[0] or [] if str(w).startswith(WATCHED)]:
        return f"{watched[0].split(': ', 1)[-1]} during the run"
    return f"runner code replaced during the run: {tampered[0]}"


def _short(test_id: str) -> str:
    return test_id.rsplit("::", 1)[-1]
