"""Per-test results of Go exercises from ``go test -json`` (grader side, stdlib only).

One run of ``go test -json -count=1 .`` in the exercise folder (vet included, as ``go test`` does by
default), with ``GOCACHE`` seeded from the image's build cache of the standard packages when it has one. ``go`` itself turns the test binary's output into JSON events (``test2json``), outside the
test process. The run becomes two ``channel.Run`` transcripts for ``verdict.judge``: ``go-json`` from the
events' per-test ``pass``/``fail``/``skip`` actions and the package's final action, and ``go-verbose``
from the ``--- PASS:``/``--- FAIL:`` lines and the final ``ok``/``FAIL`` line in the events' output. Test
ids are ``go::<test name>``, parents and subtests alike (``TestX``, ``TestX/case_name``).

Each transcript gets its end record only when the package reports a final verdict (``ok``/``FAIL``);
its exit status (0, or 1 after a failure) must match ``go``'s. A build or vet failure prints no
per-test events and ``FAIL`` for the package: no expected test passed. Both transcripts come from the
test binary's stdout, so printed lines (``\x16``-framed like test2json's own) can claim any result; what
they cannot change is the exit status, which a failing test makes 1. Ending the binary with 0, or keeping
the tests from running, takes ``os``, ``flag``, ``testing``, ``runtime``, ``syscall`` or cgo, and the scan
allows a Go solution only imports of pure computation (``scan.GO_PURE``), under whatever name they are
imported (an alias or a dot import of ``os`` scored 1.0 on a wrong answer before). The tests share the
solution's package, so its code can name what they declare (an ``init`` that sets every case's expected
value to what the solution returns scored 1.0 on a wrong answer): the solution is built alone first, and
one that builds only with the tests is ``tamper_suspect``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Collection

from .channel import Run, guard_grader, kill_orphans
from .libtest import read_text, run_process
from .verdict import NAMES_TESTS, names_tests, tampered

WARM_CACHE = "/opt/metasearch/go-cache"  # recipes.GO_WARM_CACHE in the polyglot image
RESULT_LINE = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (\S+) \(", re.M)
FINAL_LINE = re.compile(r"^(ok|FAIL)\s+\S+", re.M)
OUTCOME = {"pass": "passed", "fail": "failed", "skip": "skipped"}
UNDEFINED = re.compile(r"undefined: (\w+)")
LINE_OUTCOME = {"PASS": "passed", "FAIL": "failed", "SKIP": "skipped"}


def run_go_tests(work: str, *, timeout_s: float, allowed: Collection[str] = ()) -> list[Run]:
    """Run the package in ``work`` once; the two transcripts of that run. ``allowed``: names the tests
    declare that the exercise's example uses too (a helper the test file offers)."""
    guard_grader()
    cache = os.environ.get("GOCACHE")
    if cache and os.path.isdir(WARM_CACHE) and not os.path.exists(cache):
        shutil.copytree(WARM_CACHE, cache)  # the image's compiled standard packages, not rebuilt per run
    # The solution alone, without the tests (``go build`` leaves ``_test.go`` files out), when its text holds
    # a name the tests declare: code that uses one (rewrites their table's expected values from ``init``)
    # builds only with them.
    texts = {name: read_text(os.path.join(work, name)) for name in os.listdir(work) if name.endswith(".go")}
    tests = [text for name, text in texts.items() if name.endswith("_test.go")]
    solution = [text for name, text in texts.items() if not name.endswith("_test.go")]
    alone = ""
    alone_code: int | None = 0
    if names_tests("go", solution, tests, allowed):
        alone, alone_code, _ = run_process(["go", "build", "."], work, timeout_s)
    command = ["go", "test", "-json", "-count=1", "."]
    out, code, timed_out = run_process(command, work, timeout_s)
    kill_orphans()
    events, text = [], []
    for line in out.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            text.append(line + "\n")  # build errors come as plain text
            continue
        if isinstance(event, dict):
            events.append(event)
            text.append(str(event.get("Output") or ""))
    printed = "".join(text)
    runs = [Run("go-json", exit_code=code, timed_out=timed_out), Run("go-verbose", exit_code=code)]
    runs[1].timed_out = timed_out
    for run in runs:
        run.output = printed[-3000:]
    read_events(runs[0], events)
    read_lines(runs[1], printed)
    if alone_code != 0 and any(event.get("Test") for event in events):  # built with the tests: it ran
        named = sorted(set(UNDEFINED.findall(alone)) - set(allowed))
        if named or not UNDEFINED.search(alone):
            tampered(runs, f"{NAMES_TESTS}: {', '.join(named[:3]) or alone[-300:]}")
    return runs


def read_events(run: Run, events: list[dict]) -> None:
    """Add the records of the ``-json`` events to ``run``; the end record after the package's verdict."""
    results: dict[str, str] = {}
    final = None
    for event in events:
        action = OUTCOME.get(str(event.get("Action")))
        if action is None:
            continue
        if event.get("Test"):
            results[str(event["Test"])] = action
        else:
            final = action
    _add(run, results)
    if final in ("passed", "failed"):
        run.records.append({"t": "end", "exitstatus": int(final == "failed")})


def read_lines(run: Run, output: str) -> None:
    """Add the records of the verbose result lines to ``run``; the end record after ``ok``/``FAIL``."""
    results = {name: LINE_OUTCOME[word] for word, name in RESULT_LINE.findall(output)}
    _add(run, results)
    final = FINAL_LINE.findall(output)
    if final:
        run.records.append({"t": "end", "exitstatus": int(final[-1] == "FAIL")})


def _add(run: Run, results: dict[str, str]) -> None:
    for name, outcome in results.items():
        if outcome != "skipped":
            run.records.append({"t": "report", "id": f"go::{name}", "phase": "call", "outcome": outcome})
