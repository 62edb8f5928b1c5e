"""The grader side of a test run: start ``harness.py`` with a private result channel and read it back.

Runs in the grading sandbox, in the grader's process, never in the test process. The channel is a pipe
whose write end is placed at a random descriptor number (64-1023) and inherited by the test process; the
number and a random nonce travel on the child's stdin, which the harness reads first and closes, so
neither appears in argv, the environment or a file. The grader reads at most ``CHANNEL_BYTES`` and
accepts only lines ``"<nonce> <seq> <json>"`` with consecutive sequence numbers; anything else marks the
run as ``corrupt`` (someone else wrote to the channel). After the run the whole process group is killed,
then every orphan the run left (the grader is their subreaper, see ``guard_grader``); a channel still held
open two seconds later is reported as ``held_open``.

Stdlib only: the grading sandbox imports this file from its read-only mount (``/testrun``).
"""

from __future__ import annotations

import contextlib
import ctypes
import hmac
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field

HARNESS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "harness.py")
CHANNEL_BYTES = 4 << 20
PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 4, 36
OUTPUT_CHARS = 3000


@dataclass
class Run:
    """What one harness run reported, unjudged."""

    mode: str
    records: list[dict] = field(default_factory=list)
    corrupt: str | None = None
    held_open: bool = False
    exit_code: int | None = None
    timed_out: bool = False
    output: str = ""


def run_harness(mode: str, root: str, files: list[str], *, timeout_s: float, python: str = "") -> Run:
    """Run the harness in ``mode`` (``pytest`` | ``collect`` | ``direct``) on ``files`` under ``root``."""
    guard_grader()
    read_end, write_end = os.pipe()
    fd = _free_fd()
    os.dup2(write_end, fd, inheritable=True)
    os.close(write_end)
    nonce = secrets.token_hex(16)
    command = [python or sys.executable, "-I", "-B", HARNESS, mode, root, *files]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp")}
    env |= {"LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": os.environ.get("TMPDIR", "/tmp")}
    try:
        proc = subprocess.Popen(
            command,
            cwd=root,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(fd,),
            start_new_session=True,
        )
    finally:
        os.close(fd)
    run = Run(mode)
    chunks: list[bytes] = []
    output: list[bytes] = []
    reader = threading.Thread(target=_drain, args=(read_end, chunks, CHANNEL_BYTES), daemon=True)
    assert proc.stdout is not None and proc.stdin is not None
    printer = threading.Thread(target=_drain, args=(proc.stdout.fileno(), output, 1 << 20), daemon=True)
    reader.start()
    printer.start()
    with contextlib.suppress(OSError):
        proc.stdin.write(f"{fd} {nonce}\n".encode())
        proc.stdin.close()
    try:
        run.exit_code = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        run.timed_out = True
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    kill_orphans()
    reader.join(2.0)
    run.held_open = reader.is_alive()
    printer.join(0.5)
    if not run.held_open:  # else a thread still reads it; the grader exits soon anyway
        os.close(read_end)
    data = b"".join(chunks)
    run.output = b"".join(output).decode("utf-8", "replace")[-OUTPUT_CHARS:]
    if len(data) > CHANNEL_BYTES:
        run.corrupt = f"more than {CHANNEL_BYTES} bytes on the result channel"
    else:
        run.records, run.corrupt = parse(data, nonce)
    return run


def parse(data: bytes, nonce: str) -> tuple[list[dict], str | None]:
    """The records of a channel transcript, and the first reason it cannot be trusted (if any)."""
    records: list[dict] = []
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for seq, raw in enumerate(lines):
        parts = raw.decode("utf-8", "replace").split(" ", 2)
        if len(parts) != 3 or not hmac.compare_digest(parts[0], nonce) or parts[1] != str(seq):
            return records, f"result channel line {seq + 1} was not written by the harness: {raw[:80]!r}"
        try:
            record = json.loads(parts[2])
        except ValueError:
            return records, f"result channel line {seq + 1} is not JSON"
        if not isinstance(record, dict):
            return records, f"result channel line {seq + 1} is not a record"
        records.append(record)
    return records, None


def guard_grader() -> None:
    """Make this (the grader's) process a child subreaper and not dumpable (Linux; a no-op elsewhere).

    As a subreaper it inherits every process the test run orphans (``setsid`` and a double fork escape the
    process group, not this), so ``kill_orphans`` can end them before the verdict is printed: nothing the
    candidate started outlives the run to write after it. Not dumpable, its ``/proc/<pid>/fd``, ``mem`` and
    ``environ`` are closed to the test process, which runs as the same user.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def kill_orphans() -> None:
    """SIGKILL and reap every remaining child of this process (orphans re-parented to it included)."""
    for _ in range(100):
        children = _children()
        if not children:
            return
        for pid in children:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for pid in children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def _children() -> list[int]:
    me, found = os.getpid(), []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and int(fields[1]) == me:
            found.append(int(entry))
    return found


def _drain(fd: int, sink: list[bytes], limit: int) -> None:
    """Read ``fd`` to its end, keeping at most ``limit`` + 1 bytes (so overflow is visible)."""
    kept = 0
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return
        if not chunk:
            return
        if kept <= limit:
            sink.append(chunk[: limit + 1 - kept])
            kept += len(sink[-1])


def _free_fd() -> int:
    while True:
        fd = 64 + secrets.randbelow(960)
        try:
            os.fstat(fd)
        except OSError:
            return fd
