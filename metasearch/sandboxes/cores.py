"""Which CPU cores a sandbox run may use. Runs that overlap get different cores as long as there are cores
to go round, across every metasearch process of this user on the machine (a lock file per core, released
by the kernel when a process ends, however it ends); then the cores this process uses least are shared.
Concurrent jobs would otherwise share one core while others idle: the kernels judge pins itself and its
workers to the first core it is given, and two gradings on one core would time each other."""

from __future__ import annotations

import fcntl
import math
import os
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path


class CorePool:
    def __init__(self, cores: Sequence[int] | None = None, lock_dir: Path | None = None) -> None:
        self.cores = sorted(os.sched_getaffinity(0) if cores is None else cores)
        self.lock_dir = lock_dir or Path(tempfile.gettempdir()) / f"metasearch-cores-{os.getuid()}"
        self._runs = dict.fromkeys(self.cores, 0)  # this process's runs on each core now
        self._lock = threading.Lock()

    @contextmanager
    def acquire(self, cpus: float) -> Iterator[list[int]]:
        """``ceil(cpus)`` cores for one run: free ones first, then the least used here; never waits."""
        n = min(len(self.cores), max(1, math.ceil(cpus)))
        held: list[int] = []  # descriptors of the core locks this run holds
        with self._lock:
            order = sorted(self.cores, key=self._runs.__getitem__)
            taken: list[int] = []
            for core in order:
                if len(taken) < n and (fd := self._claim(core)) is not None:
                    taken.append(core)
                    held.append(fd)
            taken += [core for core in order if core not in taken][: n - len(taken)]
            taken.sort()
            for core in taken:
                self._runs[core] += 1
        try:
            yield taken
        finally:
            for fd in held:
                os.close(fd)
            with self._lock:
                for core in taken:
                    self._runs[core] -= 1

    def _claim(self, core: int) -> int | None:
        """An open descriptor holding ``core``'s lock, or None when another run holds it (or locks cannot
        be kept here)."""
        try:
            self.lock_dir.mkdir(mode=0o700, exist_ok=True)
            fd = os.open(self.lock_dir / str(core), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return None
        return fd


CORES = CorePool()  # this process's: every sandbox in it draws from the same cores
