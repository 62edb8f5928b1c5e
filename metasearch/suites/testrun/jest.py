"""Per-test results of JavaScript exercises from jest's JSON report and its verbose lines (grader side, stdlib only).

The pristine spec files get Aider's edit (``xtest(``/``xit(`` become ``test(``/``it(``), then one run of
``jest --ci --json --outputFile=<path> --verbose --silent --cacheDirectory=<dir> <spec files>``, the report
path and cache in directories the grader made outside the exercise folder. jest comes from the exercise's
``node_modules`` (linked by ``exercise_grade.py``, never copied) or else from ``PATH``. The run becomes two
``channel.Run`` transcripts for ``verdict.judge``: ``jest-json`` from the report file and ``jest-verbose``
from the ``✓``/``✕`` lines the default reporter prints under each ``PASS``/``FAIL`` file header. Test ids
are ``<spec file>::<describe titles and test title joined by spaces>`` (jest's ``fullName``); skipped and
todo tests are dropped (the trusted run of the example never expects them).

Each transcript gets its end record only when it is complete: the report's ``numTotalTests``,
``numPassedTests``, ``numFailedTests`` and ``numTotalTestSuites`` must match its own per-test list and the
spec files, and it must not be ``wasInterrupted``; the verbose lines must end with jest's ``Tests:``
summary, whose counts must match the lines. Its exit status (``success``, or any failure in the summary)
must match jest's (0 or 1), else ``judge`` calls it a forced exit.

Weaker than the Python harnesses, like ``libtest.py``: jest runs a single spec file in its own process,
in the realm of the code under test, so that code could write both the report file and matching lines,
or change what the assertions rest on. The scan (``scan.py``), a check that the spec files are unchanged
after the run, and a grader-owned setup file (``jest_guard.js``, loaded before the spec and the code under
test) stand in its way. The guard refuses a value with a matcher hook handed to ``expect()``; makes the
test framework's globals, its matchers and equality testers and the built-ins they call (``Object.is``,
``Array.prototype.every`` ...) impossible to replace; takes code from strings (``Function``, every
function's ``constructor``, ``eval``) and the process's ``exit``/``abort``/``kill``/``getBuiltinModule``/
``binding`` away; worker threads start with ``jest_worker_guard.js`` (the same, plus no module that reaches
the system) loaded first. Every refusal it throws is read from the output and flags the run (``tamper_suspect``,
``verdict.GUARD_REFUSED``). An early ``process.exit(0)`` leaves no report and no summary: the run ended
early. Tested with jest 29 from the npm registry on benchmark-shaped fixtures and in the polyglot image
(Node 20, jest 29.7) on benchmark exercises.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
from typing import Any

from . import verdict
from .channel import Run, guard_grader, kill_orphans
from .libtest import run_process

GUARD = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "jest_guard.js"
)  # refuses always-equal values
SKIPPED_PREFIX = re.compile(r"\bx(test|it)\(")
HEADER = re.compile(r"^(PASS|FAIL) (?:\./)?(.+?)\s*(?:\(\d.*\))?$")
LINE = re.compile(r"^( +)([✓✕○✎√×]) (?:(?:skipped|todo) )?(.*?)(?: \(\d+(?:\.\d+)? m?s\))?$")
SUMMARY = re.compile(r"^Tests:\s+(.*?)(\d+) total\s*$", re.M)
# What jest_guard.js throws when the code under test reaches for the framework, the built-ins or the process
MARKS = {"✓": "passed", "√": "passed", "✕": "failed", "×": "failed", "○": "skipped", "✎": "skipped"}
STATUS = {"passed": "passed", "failed": "failed"}  # pending, skipped, todo, disabled: dropped


def run_jest_tests(work: str, test_files: list[str], *, timeout_s: float) -> list[Run]:
    """Run the spec files ``test_files`` (relative to ``work``) once; the two transcripts of that run."""
    guard_grader()
    placed = {}
    for rel in test_files:
        path = os.path.join(work, rel)
        with open(path, encoding="utf-8") as f:
            placed[rel] = SKIPPED_PREFIX.sub(r"\1(", f.read())
        with open(path, "w", encoding="utf-8") as f:
            f.write(placed[rel])
    own = tempfile.mkdtemp(prefix="jest-")
    report = os.path.join(own, "report.json")
    local = os.path.join(work, "node_modules", ".bin", "jest")
    jest = local if os.path.exists(local) else shutil.which("jest") or "jest"
    command = [jest, "--ci", "--json", f"--outputFile={report}", "--verbose", "--silent"]
    command += [f"--setupFilesAfterEnv={GUARD}"]
    command += [f"--cacheDirectory={os.path.join(own, 'cache')}", "--watchman=false", *test_files]
    out, code, timed_out = run_process(command, work, timeout_s)
    kill_orphans()
    runs = [Run("jest-json", exit_code=code, timed_out=timed_out), Run("jest-verbose", exit_code=code)]
    runs[1].timed_out = timed_out
    for run in runs:
        run.output = out[-3000:]
    with contextlib.suppress(OSError, ValueError), open(report, encoding="utf-8") as f:
        read_report(runs[0], json.load(f), work, test_files)
    read_verbose(runs[1], out, test_files)
    verdict.guard_refusals(runs, out)
    for rel, text in placed.items():
        if _read(os.path.join(work, rel)) != text:
            verdict.tampered(runs, f"spec file {rel} changed during the run")
    return runs


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, ValueError):
        return None


def read_report(run: Run, report: Any, work: str, test_files: list[str]) -> None:
    """Add the records of jest's ``--json`` report to ``run``; the end record only when it is complete."""
    if not isinstance(report, dict) or not isinstance(report.get("testResults"), list):
        return
    counts = {"passed": 0, "failed": 0, "total": 0}
    files = set()
    for suite in report["testResults"]:
        rel = os.path.relpath(str(suite.get("name", "")), work)
        files.add(rel)
        for test in suite.get("assertionResults") or []:
            counts["total"] += 1
            outcome = STATUS.get(str(test.get("status")))
            if outcome is None:
                continue
            counts[outcome] += 1
            name = " ".join([*map(str, test.get("ancestorTitles") or []), str(test.get("title"))])
            run.records.append({"t": "report", "id": f"{rel}::{name}", "phase": "call", "outcome": outcome})
    complete = (
        report.get("numTotalTests") == counts["total"]
        and report.get("numPassedTests") == counts["passed"]
        and report.get("numFailedTests") == counts["failed"]
        and report.get("numTotalTestSuites") == len(report["testResults"])
        and files == set(test_files)
        and report.get("wasInterrupted") is False
        and isinstance(report.get("success"), bool)
        and not (report["success"] and counts["failed"])
    )
    if complete:
        run.records.append({"t": "end", "exitstatus": 0 if report["success"] else 1})


def read_verbose(run: Run, output: str, test_files: list[str]) -> None:
    """Add the records of the verbose reporter's lines to ``run``; the end record only after a summary
    whose counts match them."""
    rel: str | None = None
    stack: list[str] = []
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    failed_suite = False
    for line in output.splitlines():
        if header := HEADER.match(line):
            rel, stack = header.group(2), []
            failed_suite |= header.group(1) == "FAIL"
            continue
        if rel is None or not line.strip():
            rel = None if not line.strip() else rel
            continue
        depth = (len(line) - len(line.lstrip(" "))) // 2 - 1
        found = LINE.match(line)
        if found and depth >= 0:
            outcome = MARKS[found.group(2)]
            counts[outcome] += 1
            if outcome != "skipped" and rel in test_files:
                name = " ".join([*stack[:depth], found.group(3)])
                record = {"t": "report", "id": f"{rel}::{name}", "phase": "call", "outcome": outcome}
                run.records.append(record)
        elif depth >= 0:
            stack = [*stack[:depth], line.strip()]
    summary = SUMMARY.findall(output)
    if not summary:
        return
    said = dict((k, int(n)) for n, k in re.findall(r"(\d+) (passed|failed|skipped|todo)", summary[-1][0]))
    said["skipped"] = said.get("skipped", 0) + said.pop("todo", 0)
    if int(summary[-1][1]) == sum(counts.values()) and all(said.get(k, 0) == n for k, n in counts.items()):
        failed = failed_suite or counts["failed"] > 0
        run.records.append({"t": "end", "exitstatus": 1 if failed else 0})
