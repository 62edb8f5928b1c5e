"""The judge's side of the workers: start them, time every command with the judge's clock, and account
for the CPU time the candidate's processes use, from the kernel's counters (which no worker can forge).

Accounting modes: ``container`` (the grading run is alone in its container: the container's cgroup counts
every process the candidate starts, however it detaches) and ``process`` (the local sandbox: the
candidate's worker and its live descendants, found through ``/proc``; a process that detaches from the
tree escapes this count, one reason the local sandbox is for trusted code only).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import resource
import secrets
import select
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import shared

PIPE_BYTES = 1 << 20  # Linux's default most for an unprivileged process (/proc/sys/fs/pipe-max-size)
CPUCLOCK_SCHED = 2  # a process CPU clock's id: (~pid << 3) | this (Linux, as glibc's clock_getcpuclockid)
CHILDREN_LISTED = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists()
CGROUP_USAGE = (  # (path, field or None for a bare nanosecond counter, seconds per unit)
    ("/sys/fs/cgroup/cpu.stat", "usage_usec", 1e-6),
    ("/sys/fs/cgroup/cpuacct/cpuacct.usage", None, 1e-9),
    ("/sys/fs/cgroup/cpu,cpuacct/cpuacct.usage", None, 1e-9),
)


class WorkerFailed(Exception):
    """The worker died, hung past the deadline or broke the protocol; ``str`` says which."""


class Worker:
    """One worker process and the judge's record of the CPU seconds its processes used while the judge was
    waiting on it (read by ``counter``)."""

    def __init__(self, args: Any, candidate: str | None, deadline: float) -> None:
        cmd_r, self._cmd = os.pipe()
        self._reply, reply_w = os.pipe()
        err_r, err_w = os.pipe()
        for fd in (self._cmd, self._reply):  # fewer wake-ups per transfer: steadier CPU around the calls
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        self.deadline = deadline
        argv = ["--task-dir", args.task_dir, "--device", args.device, "--cmd-fd", str(cmd_r)]
        argv += ["--reply-fd", str(reply_w), *(["--candidate", candidate] if candidate else [])]
        self.proc = Forked(argv, (cmd_r, reply_w), err_w, "kernels-cand" if candidate else "kernels-ref")
        for fd in (cmd_r, reply_w, err_w):
            os.close(fd)
        self._err = err_r
        os.set_blocking(self._cmd, False)
        # stderr is drained as it comes and only its end kept: a flood fills neither memory nor disk
        self._stderr: deque[bytes] = deque(maxlen=64)
        threading.Thread(target=self._drain, daemon=True).start()
        self.counter: Callable[[], float] | None = None
        self.cpu_inside = 0.0
        self.wall_inside = 0.0
        self._buffer = bytearray()
        self._depth = 0
        self.on_wait: Callable[[], None] | None = None
        self.after: Callable[[], None] | None = None  # called when a stretch of commands ends well

    def read(self) -> dict[str, Any]:
        """The next answer (the first one says whether the worker is ready)."""
        return self._read()

    def ask(
        self,
        op: str,
        *,
        limit: int = 0,
        payload: bytes | bytearray = b"",
        **fields: Any,
    ) -> tuple[dict[str, Any], float]:
        """Send one command; its answer and the seconds from sending it to the full answer. The command
        carries a fresh id that its answer must echo: an answer written before the question is refused.
        Arrays sent after the answer line (at most ``limit`` bytes) come back as ``answer["arrays"]``;
        ``payload`` bytes follow the command line."""
        nonce = secrets.token_hex(8)
        data = (json.dumps({"op": op, "id": nonce, "nbytes": len(payload), **fields}) + "\n").encode()
        start = time.perf_counter()
        self._write(memoryview(data))
        self._write(memoryview(payload))
        answer = self._read()
        if answer.get("id") != nonce:
            raise WorkerFailed("the worker answered out of turn (a reply not to the command it was sent)")
        if "arrays" in answer:
            answer["arrays"] = self._arrays(answer["arrays"], limit)
        wall = time.perf_counter() - start
        if self._buffer:
            raise WorkerFailed("the worker answered out of turn (more than its answer)")
        return answer, wall

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """A stretch of commands to this worker: the CPU its processes use during it counts as inside.
        (Read around whole stretches, not each command: reading the counters between two commands would
        keep the worker waiting and cool its caches; so are the judge's checks, in ``after``. Both workers'
        counters are read alike, so that the judge's own work around them costs each worker's caches the
        same.)"""
        self._depth += 1
        outermost = self._depth == 1
        counter = self.counter if outermost else None
        cpu0 = counter() if counter else 0.0
        start = time.perf_counter()
        try:
            yield
        finally:
            self._depth -= 1
            if counter:
                self.cpu_inside += counter() - cpu0
                self.wall_inside += time.perf_counter() - start
        if outermost and self.after:
            self.after()

    def _write(self, data: memoryview) -> None:
        """Write a command, never waiting past the deadline on a worker that stopped reading (``on_wait``
        is called each half second of waiting, as while waiting for a reply: a worker stopped by a signal
        reads no more)."""
        while len(data):
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise WorkerFailed("timed out")
            if not select.select([], [self._cmd], [], min(left, 0.5))[1]:
                if self.on_wait:
                    self.on_wait()
                continue
            try:
                data = data[os.write(self._cmd, data) :]
            except BlockingIOError:
                continue
            except OSError as exc:
                raise WorkerFailed(self._died(f"the worker stopped reading ({exc})")) from None

    def _fill(self) -> None:
        """Read what the worker has sent so far into the buffer."""
        self._wait_for_reply()
        chunk = os.read(self._reply, 1 << 20)
        if not chunk:
            raise WorkerFailed(self._died("the worker ended"))
        self._buffer += chunk

    def _wait_for_reply(self) -> None:
        """Until the reply pipe has bytes to read, within the deadline (``on_wait`` is called each half
        second of waiting)."""
        while True:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise WorkerFailed("timed out")
            if select.select([self._reply], [], [], min(left, 0.5))[0]:
                return
            if self.on_wait:
                self.on_wait()

    def _arrays(self, header: Any, limit: int) -> list[Any]:
        import numpy as np

        try:
            specs = [(np.dtype(str(d)), tuple(int(n) for n in shape)) for d, shape in header]
        except (TypeError, ValueError) as exc:
            raise WorkerFailed(f"the worker described its arrays wrongly ({exc})") from None
        sizes = [dtype.itemsize * int(np.prod(shape)) for dtype, shape in specs]
        if (
            any(dtype.kind not in "biufc" or min(shape, default=0) < 0 for dtype, shape in specs)
            or sum(sizes) > limit
        ):
            raise WorkerFailed("the worker sent arrays of a kind or size it was not asked for")
        arrays = []
        for (dtype, shape), size in zip(specs, sizes, strict=True):
            array = np.empty(shape, dtype=dtype)
            self._read_into(array.reshape(-1).view(np.uint8).data, size)
            arrays.append(array)
        return arrays

    def _read_into(self, out: memoryview, size: int) -> None:
        """``size`` bytes of the reply into ``out``, in place (outputs can be gigabytes)."""
        got = min(size, len(self._buffer))
        out[:got] = self._buffer[:got]
        del self._buffer[:got]
        while got < size:
            self._wait_for_reply()
            n = os.readv(self._reply, [out[got:size]])
            if not n:
                raise WorkerFailed(self._died("the worker ended"))
            got += n

    def _read(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            if len(self._buffer) > shared.MAX_LINE:
                raise WorkerFailed("the worker answered with more than a reply line")
            self._fill()
        end = self._buffer.index(b"\n")
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        try:
            answer = json.loads(line)
        except ValueError:
            raise WorkerFailed("the worker's answer is not JSON") from None
        if not isinstance(answer, dict):
            raise WorkerFailed("the worker's answer is not an object")
        return answer

    def _drain(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            for chunk in iter(lambda: os.read(self._err, 1 << 14), b""):
                self._stderr.append(chunk)
        with contextlib.suppress(OSError):
            os.close(self._err)

    def tail(self, limit: int = 800) -> str:
        return b"".join(self._stderr)[-limit:].decode("utf-8", "replace").strip()

    def _died(self, what: str) -> str:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=2)
        return f"{what} (exit {self.proc.returncode}): {self.tail()}"

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        for fd in (self._cmd, self._reply):  # the stderr pipe stays with its draining thread
            with contextlib.suppress(OSError):
                os.close(fd)


class Forked:
    """A worker process, forked from the judge rather than started afresh: it finds Python, NumPy and
    PyTorch already imported (a fresh interpreter spends seconds importing them, most of a CPU grading's
    cost). It holds a copy of the judge's memory as it was then, in which there is nothing secret yet (the
    judge forks before it imports the reference or draws a seed), and none of its descriptors but its own
    (``worker.forked``). Popen's interface, as far as the judge uses it."""

    def __init__(self, argv: list[str], keep: tuple[int, ...], stderr_fd: int, name: str) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        self.returncode: int | None = None
        self.pid = os.fork()
        if self.pid == 0:  # the worker: never returns, nor runs another line of the judge's
            try:
                import worker

                worker.forked(argv, keep, stderr_fd, worker_env(), name)
            finally:
                os._exit(1)

    def poll(self) -> int | None:
        if self.returncode is None:
            with contextlib.suppress(ChildProcessError):
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """The exit status (a signal's negated number), within ``timeout`` seconds if given."""
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() > end:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0.0)
            time.sleep(0.005)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


class Accounting:
    """CPU seconds used by the candidate's processes since ``start``, from kernel counters only."""

    def __init__(self, mode: str, candidate_pid: int, reference_pid: int) -> None:
        self.candidate_pid, self.reference_pid = candidate_pid, reference_pid
        in_container = Path("/.dockerenv").exists() or Path("/run/.containerenv").exists()
        self.source = _cgroup_source() if mode == "container" and in_container else None
        self.mode = "container" if self.source else "process"
        self.origin = 0.0
        self.origin = self.candidate()

    def helpers(self) -> float:
        """CPU seconds of the candidate's processes other than its worker: in a container, the container's
        count less the worker's; elsewhere its live descendants and those they reaped. (The judge times
        the worker process by its own clock, which counts every thread it ever ran and nothing else.)"""
        return self.candidate() + self.origin - process_cpu(self.candidate_pid)

    def reference(self) -> float:
        """CPU seconds of the reference's worker (one process, which starts none), at about the cost of
        reading ``candidate``: the judge's work around each worker's commands cools its caches alike."""
        return process_cpu(self.reference_pid) if self.source else _tree_cpu(self.reference_pid)

    def candidate(self) -> float:
        if self.source:  # the container's whole usage less the judge's and the reference worker's
            own = resource.getrusage(resource.RUSAGE_SELF)
            judge = own.ru_utime + own.ru_stime
            return _read_cgroup(self.source) - judge - process_cpu(self.reference_pid) - self.origin
        return _tree_cpu(self.candidate_pid) - self.origin

    def stray_processes(self) -> list[int]:
        """Processes the candidate left behind: only inside a container (its own process namespace, as an
        unprivileged user), every process of this user but the judge, its ancestors and the reference's
        worker. Anywhere else nothing: outside a container those could be anybody's."""
        if self.mode != "container" or os.getuid() == 0 or not Path("/.dockerenv").exists():
            return []
        keep = {1, self.reference_pid, *_ancestors(os.getpid())}
        return [pid for pid in _pids() if pid not in keep and _owner(pid) == os.getuid()]


def stopped(pid: int) -> bool:
    """Whether the process is stopped (by a signal) right now."""
    try:
        return _stat(pid)[0] in ("T", "t")
    except (OSError, IndexError):
        return False


def _owner(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def _cgroup_source() -> tuple[str, str | None, float] | None:
    for path, field, unit in CGROUP_USAGE:
        with contextlib.suppress(OSError, ValueError):
            _read_cgroup((path, field, unit))
            return path, field, unit
    return None


def _read_cgroup(source: tuple[str, str | None, float]) -> float:
    path, field, unit = source
    text = Path(path).read_text()
    if field is None:
        return int(text.split()[0]) * unit
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == field:
            return int(value) * unit
    raise ValueError(f"{field} not in {path}")


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _stat(pid: int) -> list[str]:
    """Fields of /proc/PID/stat after the command name (which may hold spaces)."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()


def _ancestors(pid: int) -> list[int]:
    chain = []
    with contextlib.suppress(OSError, ValueError, IndexError):
        while pid > 1:
            chain.append(pid)
            pid = int(_stat(pid)[1])
    return chain


def run_delay(pid: int | None = None) -> float:
    """Seconds a thread has spent runnable but waiting for a CPU (the scheduler's run-queue delay, from
    ``/proc/PID/schedstat``): of a process's main thread, or of the calling thread when ``pid`` is None. The
    kernel keeps it; a process can raise its own only by being ready to run while something else runs on
    its CPU. 0 where the kernel does not keep it (then waiting for a busy machine counts as waiting)."""
    path = "/proc/thread-self/schedstat" if pid is None else f"/proc/{pid}/schedstat"
    try:
        with open(path, "rb") as stats:
            return int(stats.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def process_cpu(pid: int) -> float:
    """CPU seconds of one process, every thread it ever ran (those that have ended too), ns precision: the
    kernel's CPU clock of the process (``clock_getcpuclockid``), which any process may read. Summing the
    threads listed in ``/proc`` would miss the CPU of a thread that ended between two readings: work done
    in short-lived threads would go uncharged. 0 when the process is gone."""
    try:
        return time.clock_gettime(((~pid) << 3) | CPUCLOCK_SCHED)
    except OSError:
        return 0.0


def _tree_cpu(root: int) -> float:
    """CPU seconds of ``root``, its live descendants (every thread, ns precision) and the children they
    reaped."""
    total = 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    for pid in _descendants(root):
        total += process_cpu(pid)
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = _stat(pid)
            total += (int(fields[13]) + int(fields[14])) / ticks  # cutime, cstime: reaped children
    return total


def _descendants(root: int) -> set[int]:
    """``root`` and every live process below it: from each thread's list of the children it started
    (``/proc/PID/task/TID/children``), which reads a few files, where the parent links of every process on
    the machine take milliseconds, all on the CPU the workers run on; from those parent links on a kernel
    without the lists."""
    if not CHILDREN_LISTED:
        return _descendants_by_parent(root)
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        found.add(pid)
        with contextlib.suppress(OSError):
            for tid in os.listdir(f"/proc/{pid}/task"):
                with contextlib.suppress(OSError, ValueError):
                    todo += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
    return found


def _descendants_by_parent(root: int) -> set[int]:
    children: dict[int, list[int]] = defaultdict(list)
    for pid in _pids():
        with contextlib.suppress(OSError, ValueError, IndexError):
            children[int(_stat(pid)[1])].append(pid)
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo += children.get(pid, [])
    return found


def worker_env() -> dict[str, str]:
    keep = (
        "PATH",
        "HOME",
        "TMPDIR",
        "LANG",
        "LD_LIBRARY_PATH",
        "CUDA_VISIBLE_DEVICES",
        "NVIDIA_VISIBLE_DEVICES",
    )
    env = {k: v for k, v in os.environ.items() if k in keep or k.endswith("_NUM_THREADS")}
    return {**env, "GLIBC_TUNABLES": shared.MALLOC_TUNABLES, "PYTHONDONTWRITEBYTECODE": "1"}
