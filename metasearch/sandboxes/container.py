"""Commands in a running sandbox container, through the Docker exec API.

A sandbox container's PID 1 is a holder (``sleep infinity``) running as ``HOLDER_USER``; everything the
candidate runs is an exec as another unprivileged user, which therefore cannot signal the holder, and
``kill -KILL -1`` as that user ends all of the candidate's processes and nothing else. So the container,
and the in-memory filesystems that hold its writable mounts, outlive the command: its outputs are
collected by the host after the command, from processes the candidate cannot reach.
"""

from __future__ import annotations

import collections
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from metasearch.errors import InfrastructureError

HOLDER_USER = "65533:65533"
_KILLED = "metasearch-killed"
_OOM = re.compile(r"^oom_kill (\d+)$", re.MULTILINE)
_FREE = re.compile(r"^free (\S+) (\d+) (\d+) (\d+)$", re.MULTILINE)


@dataclass(frozen=True)
class Finished:
    exit_code: int | None
    stdout: str
    stderr: str
    truncated: bool
    timed_out: bool
    duration_s: float


class Capped:
    """Keeps the first and last ``cap // 2`` bytes of a stream and counts what is dropped between."""

    def __init__(self, cap: int) -> None:
        self.half = cap // 2
        self.head = bytearray()
        self.tail: collections.deque[bytes] = collections.deque()
        self.tail_size = 0
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        self.tail.append(data)
        self.tail_size += len(data)
        while self.tail and self.tail_size - len(self.tail[0]) >= self.half:
            self.dropped += len(self.tail[0])
            self.tail_size -= len(self.tail.popleft())

    def text(self) -> tuple[str, bool]:
        tail = b"".join(self.tail)
        extra = max(0, len(tail) - self.half)
        self.dropped, tail = self.dropped + extra, tail[extra:]
        if not self.dropped:
            return (bytes(self.head) + tail).decode("utf-8", "replace"), False
        marker = f"\n[... {self.dropped} bytes of output dropped ...]\n".encode()
        return (bytes(self.head) + marker + tail).decode("utf-8", "replace"), True


def run_exec(
    container: Any,
    command: Sequence[str],
    *,
    user: str,
    workdir: str,
    env: Mapping[str, str],
    timeout_s: float,
    output_bytes: int,
) -> Finished:
    """Run ``command`` as ``user``; on timeout, or once it exits, end every process of ``user``.

    Ending on exit matters: a background child holding stdout would otherwise keep the command going."""
    api = container.client.api
    started = time.monotonic()
    try:
        exec_id = api.exec_create(
            container.id, list(command), user=user, workdir=workdir, environment=dict(env)
        )
        stream = api.exec_start(exec_id["Id"], stream=True, demux=True)
    except Exception as exc:
        raise InfrastructureError(f"docker exec failed: {exc}") from exc
    out, err = Capped(output_bytes), Capped(output_bytes)
    failure: list[BaseException] = []

    def pump() -> None:
        try:
            for o, e in stream:
                if o:
                    out.add(o)
                if e:
                    err.add(e)
        except Exception as exc:
            failure.append(exc)

    reader = threading.Thread(target=pump, name="metasearch-exec", daemon=True)
    reader.start()
    timed_out, step = False, 0.01
    while True:
        reader.join(min(step, max(0.0, started + timeout_s - time.monotonic())))
        if not reader.is_alive():
            break
        if time.monotonic() >= started + timeout_s:
            timed_out = True
            break
        if not _inspect(api, exec_id["Id"]).get("Running"):
            break
        step = min(step * 2, 0.2)
    duration = time.monotonic() - started
    if reader.is_alive():
        if not kill_all(container, user):
            _kill_container(container)
        reader.join(10)
    if failure and not timed_out:
        raise InfrastructureError(f"docker exec stream failed: {failure[0]}")
    code = None if timed_out else _inspect(api, exec_id["Id"]).get("ExitCode")
    stdout, t1 = out.text()
    stderr, t2 = err.text()
    return Finished(code, stdout, stderr, t1 or t2, timed_out, duration)


def kill_all(container: Any, user: str) -> bool:
    """End every process of ``user`` in the container; False when even that cannot start (process limit)."""
    for attempt in range(3):
        script = f"kill -KILL -1 2>/dev/null; kill -KILL -1 2>/dev/null; echo {_KILLED}"
        try:
            code, output = container.exec_run(["sh", "-c", script], user=user)
        except Exception as exc:
            raise InfrastructureError(f"docker exec failed: {exc}") from exc
        if code == 0 and _KILLED in (output or b"").decode("utf-8", "replace"):
            return True
        time.sleep(0.2 * (attempt + 1))
    return False


def probe(container: Any, user: str, paths: Sequence[str]) -> tuple[int, dict[str, tuple[int, int]]]:
    """The container's OOM-kill count and, per path, (free bytes, size bytes) of its filesystem."""
    script = (
        "cat /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events 2>/dev/null; "
        'for p in "$@"; do stat -f -c "free $p %a %b %S" "$p"; done'
    )
    try:
        _code, output = container.exec_run(["sh", "-c", script, "probe", *paths], user=user)
    except Exception as exc:
        raise InfrastructureError(f"docker exec failed: {exc}") from exc
    text = (output or b"").decode("utf-8", "replace")
    free = {path: (int(a) * int(bs), int(b) * int(bs)) for path, a, b, bs in _FREE.findall(text)}
    oom = _OOM.search(text)
    return (int(oom.group(1)) if oom else 0), free


def stream_out(container: Any, command: Sequence[str], user: str) -> tuple[Iterator[bytes], Any]:
    """Start ``command`` and return (its stdout chunks, its exec id); stderr is kept in ``errors``."""
    api = container.client.api
    try:
        exec_id = api.exec_create(container.id, list(command), user=user)["Id"]
        frames = api.exec_start(exec_id, stream=True, demux=True)
    except Exception as exc:
        raise InfrastructureError(f"docker exec failed: {exc}") from exc

    def chunks() -> Iterator[bytes]:
        for o, _e in frames:
            if o:
                yield o

    return chunks(), exec_id


def exit_code(container: Any, exec_id: str) -> int | None:
    return _inspect(container.client.api, exec_id).get("ExitCode")


def _inspect(api: Any, exec_id: str) -> dict[str, Any]:
    try:
        return dict(api.exec_inspect(exec_id))
    except Exception as exc:
        raise InfrastructureError(f"docker exec inspect failed: {exc}") from exc


def _kill_container(container: Any) -> None:
    try:
        container.kill()
    except Exception as exc:
        if "is not running" not in str(exc):
            raise InfrastructureError(f"cannot kill container: {exc}") from exc
