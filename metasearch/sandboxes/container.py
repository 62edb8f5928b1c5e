"""Commands in a running sandbox container, through the Docker exec API.

A sandbox container's main process is a holder (``HOLDER``: it waits for the end of its stdin) running
as ``HOLDER_USER``; everything the
candidate runs is an exec as another unprivileged user, which therefore cannot signal the holder, and
``kill -KILL -1`` as that user ends all of the candidate's processes and nothing else. So the container,
and the in-memory filesystems that hold its writable mounts, outlive the command: its outputs are
collected by the host after the command, from processes the candidate cannot reach. Writable mounts
travel as tar streams: ``fill`` before the command, ``collect`` after it (see transfer.py).
"""

from __future__ import annotations

import collections
import re
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metasearch.errors import InfrastructureError
from metasearch.sandboxes.protocol import Mount
from metasearch.sandboxes.transfer import ChunkReader, pack, replace_contents, scratch_beside, unpack

HOLDER_USER = "65533:65533"
HOLDER = ["sh", "-c", "exec cat >/dev/null"]  # lives while its stdin is open (see attach_lifeline)
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


def attach_lifeline(container: Any) -> Any:
    """Attach to the holder's stdin and return the connection; keep it open for the container's life.

    The container is created with ``OpenStdin`` and ``StdinOnce``: when this connection closes, because the
    host process closed it or died (SIGKILL closes its sockets too), the engine closes the holder's stdin,
    the holder exits and the container stops. Nothing is ever written to it."""
    return container.client.api.attach_socket(container.id, params={"stdin": 1, "stream": 1})


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
        if end_all(container, user) is None:
            _kill_container(container)
        reader.join(10)
    if failure and not timed_out:
        raise InfrastructureError(f"docker exec stream failed: {failure[0]}")
    code = None if timed_out else _inspect(api, exec_id["Id"]).get("ExitCode")
    stdout, t1 = out.text()
    stderr, t2 = err.text()
    return Finished(code, stdout, stderr, t1 or t2, timed_out, duration)


@dataclass(frozen=True)
class Probe:
    oom_kills: int  # the container's OOM kills so far
    free: dict[str, tuple[int, int]]  # path -> (free bytes, size bytes) of its filesystem


def end_all(container: Any, user: str, paths: Sequence[str] = ()) -> Probe | None:
    """End every process of ``user``, then read the OOM-kill count and the free space of ``paths``, in one
    exec; None when even that cannot start (the candidate holds every PID)."""
    script = (
        f"kill -KILL -1 2>/dev/null; kill -KILL -1 2>/dev/null; echo {_KILLED}; "
        "cat /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events 2>/dev/null; "
        'for p in "$@"; do stat -f -c "free $p %a %b %S" "$p"; done'
    )
    for attempt in range(3):
        try:
            code, output = container.exec_run(["sh", "-c", script, "end", *paths], user=user)
        except Exception as exc:
            raise InfrastructureError(f"docker exec failed: {exc}") from exc
        text = (output or b"").decode("utf-8", "replace")
        if code == 0 and _KILLED in text:
            oom = _OOM.search(text)
            free = {path: (int(a) * int(bs), int(b) * int(bs)) for path, a, b, bs in _FREE.findall(text)}
            return Probe(int(oom.group(1)) if oom else 0, free)
        time.sleep(0.2 * (attempt + 1))
    return None


def fill(container: Any, mount: Mount, user: str, disk_mb: int) -> None:
    """Copy a writable mount's host files into its disk area, extracted there by ``user``."""
    source = Path(mount.source)
    if source.is_symlink() or not source.is_dir():
        raise InfrastructureError(f"writable mount {source} is not a directory", retryable=False)
    api = container.client.api
    with tempfile.SpooledTemporaryFile(max_size=32 << 20) as data:
        pack(source, data)
        data.seek(0)
        try:
            command = ["tar", "-x", "-f", "-", "-C", mount.target]
            exec_id = api.exec_create(container.id, command, stdin=True, user=user)["Id"]
            conn = api.exec_start(exec_id, socket=True)
            raw = getattr(conn, "_sock", conn)
            while chunk := data.read(1 << 20):
                raw.sendall(chunk)
            raw.shutdown(socket.SHUT_WR)
            replies = b""
            while block := raw.recv(65536):
                replies = (replies + block)[-4000:]
            conn.close()
        except Exception as exc:
            raise InfrastructureError(f"cannot copy inputs into the sandbox: {exc}") from exc
        code = exit_code(container, exec_id)
    if code:
        message = replies.decode("utf-8", "replace")
        if "No space left" in message:
            raise InfrastructureError(
                f"the inputs of {mount.target} do not fit the sandbox disk limit ({disk_mb} MB): "
                "raise sandbox.disk_mb",
                retryable=False,
            )
        raise InfrastructureError(
            f"cannot copy inputs into {mount.target} (tar exit {code}): {message[-500:]}"
        )


def collect(container: Any, mount: Mount, user: str, max_bytes: int) -> str | None:
    """Replace the host directory's content by what was left in the mount's disk area (read by ``user``
    once all its processes are gone); return the first refusal (see transfer.unpack), or None."""
    source = Path(mount.source)
    scratch = scratch_beside(source)
    try:
        chunks, exec_id = stream_out(container, ["tar", "-c", "-f", "-", "-C", mount.target, "."], user)
        reader = ChunkReader(chunks)
        refused = unpack(reader, scratch, max_bytes=max_bytes, label=mount.target)
        try:
            reader.drain()
        except Exception as exc:
            raise InfrastructureError(f"reading outputs from the sandbox failed: {exc}") from exc
        code = exit_code(container, exec_id)
        if code and not refused:
            refused = f"output of {mount.target} could not be read completely (tar exit {code})"
        replace_contents(source, scratch)
        return refused
    finally:
        if scratch.exists():
            shutil.rmtree(scratch, ignore_errors=True)


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
