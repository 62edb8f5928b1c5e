"""Per-test results of Rust exercises from libtest's two reports (grader side, stdlib only).

``cargo test --offline --test <stem> -- --include-ignored --test-threads=1 --logfile <path>`` runs one
integration-test file; libtest prints ``test <name> ... ok|FAILED|ignored`` and a final ``test result:``
line on stdout, and writes ``ok|failed|ignored <name>`` lines to the log file, a path in a directory the
grader made for this run. Both become ``channel.Run`` transcripts for ``verdict.judge``: they must agree,
cover the expected test ids (``<test file>::<name>``) and end with the summary line, whose verdict must
match cargo's exit status (0 or 101).

Weaker than the Python harnesses: both reports come from the test process and its files, which candidate
code shares, so a candidate that prints matching lines *and* writes the log file can still forge them; the
early-exit scan and the Cargo.toml scan (``scan.py``: ``harness``, ``build``, extra targets) are what stand
in its way. Tested with the host's cargo on benchmark-shaped fixtures and in the polyglot image (Rust 1.85,
crates from Debian's packages) on benchmark exercises.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import tempfile

from .channel import Run, guard_grader, kill_orphans

STDOUT_LINE = re.compile(r"^test (\S+) \.\.\. (ok|FAILED|ignored)\s*$", re.M)
SUMMARY = re.compile(r"^test result: (ok|FAILED)\. \d+ passed; \d+ failed", re.M)
LOG_LINE = re.compile(r"^(ok|failed|ignored) (\S+)\s*$", re.M)
OUTCOME = {"ok": "passed", "FAILED": "failed", "failed": "failed", "ignored": "skipped"}


def run_cargo_tests(work: str, test_files: list[str], *, timeout_s: float) -> list[Run]:
    """Two transcripts (stdout, log file) covering every test file, one cargo run per file."""
    guard_grader()
    printed, logged = Run("libtest-stdout"), Run("libtest-logfile")
    code = 0
    for rel in test_files:
        stem = os.path.splitext(os.path.basename(rel))[0]
        log = os.path.join(tempfile.mkdtemp(prefix="libtest-"), "log.txt")
        command = ["cargo", "test", "--offline", "--test", stem, "--"]
        command += ["--include-ignored", "--test-threads=1", "--logfile", log]
        out, exit_code, timed_out = run_process(command, work, timeout_s)
        kill_orphans()
        printed.exit_code = logged.exit_code = exit_code
        printed.output = (printed.output + out)[-3000:]
        printed.timed_out |= timed_out
        for name, outcome in STDOUT_LINE.findall(out):
            printed.records.append(_report(rel, name, outcome))
        with contextlib.suppress(OSError), open(log, encoding="utf-8", errors="replace") as f:
            for outcome, name in LOG_LINE.findall(f.read(1 << 20)):
                logged.records.append(_report(rel, name, outcome))
        summary = SUMMARY.findall(out)
        if not summary or exit_code is None:
            return [printed, logged]  # no end record: the run ended early (or never built)
        code = exit_code if exit_code else code
        if (summary[-1] == "ok") != (exit_code == 0):
            end = {"t": "end", "exitstatus": 0 if summary[-1] == "ok" else 101}
            printed.records.append(end)
            return [printed, logged]
    for run in (printed, logged):
        run.records.append({"t": "end", "exitstatus": code})
        run.exit_code = code
    return [printed, logged]


def _report(rel: str, name: str, outcome: str) -> dict[str, str]:
    return {"t": "report", "id": f"{rel}::{name}", "phase": "call", "outcome": OUTCOME[outcome]}


def read_text(path: str) -> str:
    """A source file's text, undecodable bytes replaced (the graders only search it)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def run_process(command: list[str], cwd: str, timeout_s: float) -> tuple[str, int | None, bool]:
    """Run ``command`` in its own process group: (output, exit status or None, timed out); the group is killed."""
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        code: int | None = proc.returncode
        timed_out = False
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        code, timed_out = None, True
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    return out.decode("utf-8", "replace")[-(1 << 20) :], code, timed_out
