"""The judge: every number that decides a kernels score is measured here, in a process no candidate code
runs in (and which no other process of the sandbox user may trace or read: it is non-dumpable).

Two workers run the same program (``worker.py``): the reference's (never imports the candidate) and the
candidate's, each forked from the judge before it loads the task or draws a secret (``workers.Forked``:
PyTorch is imported once per grading, not three times). The judge draws the secret seeds and then:

1. **Correctness**, on every shape set: the judge draws the inputs itself and sends them (the candidate sees
   them only then); the candidate's worker builds the model for a seed it learns only now, runs, and sends
   back its output and its inputs; the judge compares them with what it computes itself (wrong output, or
   inputs written into: ``modified_inputs``).
2. **Timing**, on the default shape, by clocks the judge reads itself: on a CPU the CPU time the worker
   process spends on the command (the kernel's clock), on a GPU the command's round trip from sending it
   to the complete answer; less the same for a command that runs no call (measured on the reference's
   worker); on a CPU, what the worker waited in it beyond the reference's worker's waiting per second of
   its calls is added (work done where its CPU clock does not run), and its waiting in the untimed
   commands is charged like their CPU time (below). Calls too short to time one by one
   are batched, each call of a batch on its own fresh inputs, the same inputs and batch size for
   both workers (on a GPU each worker draws them itself, on the device, from seeds it learns only when
   asked). Rounds alternate the two workers in ABBA order. After the timed command the worker sends every
   output of the batch and the judge compares them with the reference's (``stale_output``: skipped,
   cached or asynchronous work), and in a quarter of the rounds (at least three, drawn in secret) every
   input set as the calls left it, which must be the reference's worker's byte for byte
   (``modified_inputs``: inputs used as scratch space while timed only); on a GPU
   it must first answer a digest of every output's bytes under a fresh key, which the outputs it sends
   must match (work left running past the digest). Work the
   candidate's worker moves out of the timed command into the untimed ones around it (receiving or
   drawing inputs, the digest, sending outputs) is charged to every call: the median over pairs of rounds
   of what those commands took beyond what the reference's worker needed for the very same commands in
   the same rounds, in CPU time, and on a GPU (which works while its process sleeps) the drawing and the
   digest by their round trips; most of its work there is ``work_outside_timing``.
3. **Accounting** from the kernel's counters (see ``workers.py``): CPU the candidate's processes used while
   the judge was not waiting on them, or its processes other than its worker while it was timed
   (``work_outside_timing``), or more CPU than wall time while it was (``multithreaded``).
4. **The reference undisturbed**: after the candidate's processes are killed, the reference's worker is
   timed again alone. A reference more than 25% slower beside the candidate than alone is timed by its solo
   run, so slowing the reference (competing for its CPU, leaving the machine busy) gains at most that much.
   How much slower it was is a metric, not a flag: a machine can change speed between the two phases
   (another tenant, a frequency step), and then an honest run looks the same. What only a candidate does
   is flagged (``reference_disturbed``): the reference's worker found stopped by a signal, killed, or
   moved to other CPUs or a lower priority.
5. **Audit** (the candidate's own worker reports what moved in its process: ``tampered_timer``,
   ``tampered_runtime``, ``called_reference``, ``multithreaded``). A candidate can silence this report, but
   then the judge's own measurements above are all that count, and its timers are not among them.

What the measurements add up to (flags, the speedup, the score) is ``verdict.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import math
import os
import secrets
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import room
import shared
from compare import compare, digest_of, same_array, same_bytes
from room import OOM_FIRST, OOM_SETTABLE, oom_priority
from rounds import Round, Timing, typical
from verdict import Accounted, failed, verdict
from workers import (
    Accounting,
    Worker,
    WorkerFailed,
    process_cpu,
    run_delay,
    stopped,
)  # fmt: skip

TARGET_BATCH_S = 0.005  # a timed command lasts at least this long: the round trip is then ~1% of it
MAX_BATCH = 1000
# The inputs and outputs of one batch stay within the last-level cache, so that each call finds its inputs
# about as warm as a call right after they were made (a batch of cold inputs would time memory, not the
# kernel). On a CPU not within one core's own cache: a batch that small holds one call of a kernel whose
# inputs are half a megabyte, and one call per timed command pays the command's own cost (waking the
# worker, its code evicted by the other worker's round) in full: a fast honest kernel measured 2-4x slower.
BATCH_BYTES = {"cpu": 4 << 20, "cuda": 32 << 20}
MIN_CANDIDATE_S = 0.02  # more rounds when the candidate's batches are short
MAX_REFERENCE_BATCH_S = (
    0.05  # a batch sized for a fast candidate stops growing when the reference's is this long
)
MIN_TIMED_S = 0.05  # at least this much reference time is measured (more rounds for fast kernels)
MAX_REPS = 100
INPUT_CHECKS = 3  # timed rounds (at least) whose inputs come back to be compared
MIN_ROUNDS = 10  # whatever the configured repetitions: a low quantile of fewer rounds is one lucky call
EMPTY_TRIPS = 25
TIMERS = ("time.", "torch.cuda.synchronize", "torch.cuda.Event")


class CandidateFailed(Exception):
    def __init__(self, reason: str, flags: list[str] | None = None) -> None:
        super().__init__(reason)
        self.flags = flags or []


class GraderFailed(Exception):
    """The reference or the judge itself failed: a task or infrastructure fault, never the candidate's."""


def judge(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    shared.non_dumpable()
    # One CPU for the judge and both workers (they inherit it): they take turns, never run at once, and
    # each worker then finds the same core, caches and neighbours as the other.
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(1)
    session = Session(args, shared.load_task(Path(args.task_dir)), device)
    try:
        session.start()
        return session.grade()
    except CandidateFailed as exc:
        return failed(str(exc), exc.flags)
    finally:
        session.close()


class Session:
    """One grading: the two workers, what the judge measured of them, and the verdict."""

    def __init__(self, args: argparse.Namespace, task: dict[str, Any], device: Any) -> None:
        self.args, self.task, self.device = args, task, device
        self.drawn = args.inputs == "drawn" or (args.inputs == "auto" and device.type == "cuda")
        self.flags: list[str] = []
        self.changed: list[str] = []
        self.workers: list[Worker] = []

    def start(self) -> None:
        """Fork the workers, then load the reference here: they fork before the judge has drawn a secret or
        run a line of task code (which could start CUDA, which a forked process cannot use again)."""
        deadline = time.monotonic() + self.args.timeout
        self.ref = Worker(self.args, None, deadline)
        self.workers.append(self.ref)
        self.ref.on_wait = self._resume_reference
        self._read(self.ref)  # alive and untouchable before the candidate starts
        self.cand = Worker(self.args, self.args.candidate, deadline)
        self.workers.append(self.cand)
        self._read(self.ref)
        self._read(self.cand)
        with _reference_fault():
            self.reference = shared.import_file(
                "_metasearch_reference", Path(self.args.task_dir) / "reference.py"
            )
        self.cpu = Accounting(self.args.accounting, self.cand.proc.pid, self.ref.proc.pid)
        self.cand.counter, self.ref.counter = self.cpu.candidate, self.cpu.reference
        self.cand.after = self._check_priority

    def close(self) -> None:
        for worker in self.workers:
            worker.stop()

    def grade(self) -> dict[str, Any]:
        for shape in [{}, *self.task["shapes"]]:
            self._check(shape, f"incorrect on shape set {shape or 'default'}")
        timing = self._time()
        self._check({}, "incorrect after timing, with a new seed", stale=True)
        self._audit(self._ask(self.cand, "audit")[0])
        cpu_total = self.cpu.candidate()
        self._stop_candidate()
        solo = [self._solo_round(timing.n) for _ in range(max(5, timing.reps // 2))]
        accounted = Accounted(
            cpu_total - self.cand.cpu_inside, self.cand.cpu_inside, self.cand.wall_inside,
            self.helper_cpu, self.overhead,
        )  # fmt: skip
        return verdict(
            timing, solo, accounted, self.flags, self.changed, float(self.task.get("ceiling", 1000.0))
        )

    # -- correctness -------------------------------------------------------------------------------

    def _check(self, shape: dict[str, Any], what: str, *, stale: bool = False) -> None:
        model_seed, input_seed = _seed(), _seed()
        with _reference_fault():
            model = shared.make_model(self.reference, self.reference.Model, self.device, model_seed, shape)
            inputs = shared.make_inputs(self.reference, self.device, input_seed, shape)
            want = shared.as_array(shared.call(model, inputs))
            spec, data = shared.pack([inputs])  # the pristine inputs, as sent
            del model, inputs
        places = shared.layout(spec)
        limit = want.nbytes + len(data)
        got: list[Any] = []
        for worker in self.workers:  # the reference's worker too: both processes live the same history
            got.clear()  # what the reference's worker sent is not needed: free it before the next
            if worker is self.cand:  # the room an honest candidate needs, known before it runs
                room.check(self.ref.proc.pid, f"on shape set {shape or 'default'}")
            self._ask(worker, "model", seed=model_seed, shape=shape)
            self._ask(worker, "inputs", slots=spec, payload=data)
            self._ask(worker, "run")
            got = self._ask(worker, "fetch", slots=[0], inputs=True, limit=limit)[0].get("arrays", [])
        if len(got) != 1 + len(places):
            raise CandidateFailed(f"{what}: the worker sent {len(got)} arrays, not {1 + len(places)}")
        problem = compare(got[0], want, self.task["atol"], self.task["rtol"])
        if problem:
            raise CandidateFailed(f"{what}: {problem}", ["stale_output"] if stale else [])
        for array, (offset, size) in zip(got[1:], places, strict=True):
            if not same_bytes(array, data, offset, size):
                raise CandidateFailed(f"{what}: the candidate wrote into its inputs", ["modified_inputs"])

    # -- timing ------------------------------------------------------------------------------------

    def _time(self) -> Timing:
        model_seed = _seed()
        for worker in self.workers:
            self._ask(worker, "model", seed=model_seed, shape={})
        with _reference_fault():
            model = shared.make_model(self.reference, self.reference.Model, self.device, model_seed, {})
            inputs = shared.make_inputs(self.reference, self.device, _seed(), {})
            self.out_bytes = shared.as_array(shared.call(model, inputs)).nbytes
        self.in_bytes = sum(x.numel() * x.element_size() for x in inputs if hasattr(x, "numel"))
        self.tensors_per_set = sum(hasattr(x, "numel") for x in inputs)
        size = self.out_bytes + self.in_bytes
        self._ask(self.ref, "inputs", **self._batch(0))  # a run of no calls: the cost of the command itself
        empty = [self._run(self.ref) for _ in range(EMPTY_TRIPS)]
        self.overhead = typical([spent for spent, _, _ in empty])
        self.wait_overhead = typical([waited for _, waited, _ in empty])
        largest = max(1, min(MAX_BATCH, BATCH_BYTES.get(self.device.type, 1 << 20) // max(size, 1)))
        per_call = {w: self._calibrate(w, largest) for w in self.workers}
        n = max(1, min(largest, math.ceil(TARGET_BATCH_S / min(per_call.values()))))
        n = min(n, max(1, math.ceil(MAX_REFERENCE_BATCH_S / per_call[self.ref])))
        reps = max(
            self.args.reps,
            MIN_ROUNDS,
            math.ceil(MIN_TIMED_S / (n * per_call[self.ref])),
            math.ceil(MIN_CANDIDATE_S / (n * per_call[self.cand])),
        )
        reps = min(MAX_REPS, reps)
        rounds: dict[Worker, list[Round]] = {w: [] for w in self.workers}
        helpers = self.cpu.helpers()
        # the rounds whose inputs come back, drawn in secret: every round's would add their transfer to
        # the untimed commands, whose noise the charge then reads (a writer caught in any of these rounds)
        checked = set(secrets.SystemRandom().sample(range(reps), max(INPUT_CHECKS, reps // 4)))
        for rep in range(reps):
            batch = self._batch(n)
            for worker in self.workers if rep % 2 == 0 else self.workers[::-1]:
                rounds[worker].append(self._round(worker, batch, inputs=rep in checked))
            cand, ref = rounds[self.cand][-1], rounds[self.ref][-1]
            for got, want in zip(cand.outputs, ref.outputs, strict=True):
                problem = compare(got, want, self.task["atol"], self.task["rtol"])
                if problem:
                    raise CandidateFailed(f"incorrect on a timed call: {problem}", ["stale_output"])
            if not all(map(same_array, cand.inputs, ref.inputs)):
                raise CandidateFailed(
                    "the candidate wrote into its inputs on a timed call", ["modified_inputs"]
                )
            for worker in self.workers:
                rounds[worker][-1].outputs.clear()
                rounds[worker][-1].inputs.clear()
        self.helper_cpu = self.cpu.helpers() - helpers
        return Timing(reps, n, rounds[self.ref], rounds[self.cand])

    def _calibrate(self, worker: Worker, largest: int) -> float:
        """Seconds per call, from batches grown until one lasts ``TARGET_BATCH_S`` (warm-up included)."""
        n, best = 1, math.inf
        for attempt in range(max(1, self.args.warmup) + 4):
            best = min(best, self._round(worker, self._batch(n)).call)
            if attempt >= self.args.warmup - 1:
                if n * best >= TARGET_BATCH_S or n == largest:
                    break
                n = min(largest, max(2 * n, math.ceil(TARGET_BATCH_S / max(best, 1e-7))))
        return max(best, 1e-7)

    def _batch(self, n: int) -> dict[str, Any]:
        """``n`` fresh input sets at the timed shape, as the ``inputs`` command's fields: the sets the
        judge drew, or (``--inputs drawn``) their seeds, for each worker to draw where it runs them (on a
        GPU, by the GPU: no inputs cross a pipe, and a worker has nothing to work on before it is asked)."""
        if self.drawn:
            return {"seeds": [_seed() for _ in range(n)]}
        with _reference_fault():
            inputs = [shared.make_inputs(self.reference, self.device, _seed(), {}) for _ in range(n)]
            spec, data = shared.pack(inputs)
        return {"slots": spec, "payload": data}

    def _round(self, worker: Worker, batch: dict[str, Any], *, inputs: bool = False) -> Round:
        """Send one batch of input sets, run them in one timed command, fetch every output (and, with
        ``inputs``, every input set as the calls left it); with drawn inputs, have the worker prove first
        what the timed command made (a digest of every output's bytes, under a key it learns only then).

        Work moved out of the timed command into the untimed ones around it is charged: by the CPU
        seconds they took (the kernel's count, which waiting for a busy machine does not inflate), and on
        a GPU, where the device works while its process sleeps, the drawing and the digest by their round
        trips (both run on the device: short, and as steady as the timed command). The outputs' transfer
        stays charged by CPU: its round trip varies too much to charge, and the digest already proved
        that the outputs existed before it. (On a CPU no work gets done without CPU time, charged wherever
        it is spent; drawing there costs more than receiving, and its noise would be charged.)"""
        n = len(batch.get("seeds", batch.get("slots", [])))
        cpu = functools.partial(process_cpu, worker.proc.pid)
        clock = time.perf_counter if self.device.type == "cuda" else cpu
        key = _seed() if self.drawn else None
        with worker.busy():
            delayed = _delays(worker)
            start = clock()
            received = self._ask(worker, "inputs", **batch)[1]
            untimed = clock() - start
            spent, waited, delayed_timed = self._run(worker)
            start = clock()
            proof, proved = self._ask(worker, "digest", key=key) if key is not None else ({}, 0.0)
            untimed += clock() - start
            start = cpu()
            limit = (self.out_bytes + (self.in_bytes if inputs else 0)) * n
            answer, fetched = self._ask(worker, "fetch", slots=list(range(n)), inputs=inputs, limit=limit)
            untimed += cpu() - start
            delayed = _delays(worker) - delayed - delayed_timed
        # on a CPU, what the untimed commands took beyond their CPU time and the scheduler's delays: waiting,
        # charged as in the timed command (a worker that waits there for work done where its CPU clock
        # does not run)
        idle = (
            0.0 if self.device.type == "cuda" else max(0.0, received + proved + fetched - untimed - delayed)
        )
        arrays = answer.get("arrays", [])
        if len(arrays) != n * (1 + (self.tensors_per_set if inputs else 0)):
            what = " and their inputs" if inputs else ""
            raise CandidateFailed(
                f"the worker sent {len(arrays)} arrays, not the outputs for {n} calls{what}"
            )
        outputs, sent = arrays[:n], arrays[n:]
        if key is not None and str(proof.get("digest")) != str(digest_of(outputs, key, self.device)):
            if worker is self.ref:
                raise GraderFailed("the reference's worker sent outputs that differ from its digest")
            raise CandidateFailed(
                "the outputs sent differ from those the timed command's digest named (work left running "
                "past it, or outputs changed afterwards)",
                ["stale_output"],
            )
        waited = max(0.0, waited - self.wait_overhead)
        return Round(max(spent - self.overhead, 1e-9) / n, untimed / n, outputs, sent, waited / n, idle / n)

    def _run(self, worker: Worker) -> tuple[float, float, float]:
        """The timed command: what it cost, how long the worker spent waiting in it, and the scheduler's
        delays in it (on a CPU; see below).

        On a GPU the cost is its round trip (the device works while its process sleeps). On a CPU it is
        the CPU time of the worker process (every thread it ever ran), by the kernel's clock, read by the
        judge: the same clock as the commands around it, so work moved out of the timed command costs the
        same where it lands, and a worker kept waiting by the machine spends none. What the round trip
        took beyond that CPU time is the waiting: the scheduler's, or the worker's own, on work done where
        its CPU clock does not run (a GPU, another process; see ``rounds.charged_time``). The scheduler's
        share is taken out: the time the worker's thread and the judge's spent ready to run but waiting for
        a CPU, as the kernel counts it. On a busy machine that delay comes in whole time slices, a few
        milliseconds each, that land on a command or miss it: charged, it made a fast honest kernel's
        short commands look as if they waited for hidden work. A worker waiting for hidden work sleeps,
        which is not a delay. (One that stays ready instead, yielding its CPU to a process of its own that
        does the work, has that process's CPU counted as the candidate's other processes' in a container.)"""
        if self.device.type == "cuda":
            return self._ask(worker, "run")[1], 0.0, 0.0
        start, delayed = process_cpu(worker.proc.pid), _delays(worker)
        wall = self._ask(worker, "run")[1]
        spent, delayed = process_cpu(worker.proc.pid) - start, _delays(worker) - delayed
        return spent, max(0.0, wall - spent - delayed), delayed

    def _solo_round(self, n: int) -> float:
        """A round of the reference's worker alone, then as many input sets drawn as the candidate's
        worker's round drew in its place, by the judge or the reference's worker (so the reference finds
        the machine's caches as it did beside it)."""
        call = self._round(self.ref, self._batch(n)).call
        if self.drawn:
            self._ask(self.ref, "inputs", **self._batch(n))
        else:
            for _ in range(n):
                shared.make_inputs(self.reference, self.device, _seed(), {})
        return call

    def _ask(self, worker: Worker, op: str, **fields: Any) -> tuple[dict, float]:
        with self._failures(worker), worker.busy():
            answer, wall = worker.ask(op, **fields)
        return self._answer(worker, answer), wall

    def _read(self, worker: Worker) -> dict[str, Any]:
        with self._failures(worker):
            return self._answer(worker, worker.read())

    @contextlib.contextmanager
    def _failures(self, worker: Worker) -> Iterator[None]:
        """A worker that died, hung or broke the protocol: the grader's fault for the reference's worker,
        the candidate's for its own."""
        try:
            yield
        except WorkerFailed as exc:
            killed = worker.proc.poll() is not None and worker.proc.returncode < 0
            if worker is self.ref and killed and len(self.workers) > 1:  # a signal, while the candidate ran
                raise CandidateFailed(
                    f"the reference's worker was killed while the candidate ran: {exc}",
                    ["reference_disturbed"],
                ) from None
            if worker is self.ref:
                raise GraderFailed(f"the reference's worker failed: {exc}") from None
            if str(exc) == "timed out":
                raise CandidateFailed(
                    f"grading timed out after {self.args.timeout:g} s (candidate too slow or hung)"
                ) from None
            if killed:  # by the kernel when memory ran out, maybe: was that the run's size or the candidate?
                room.check(self.ref.proc.pid, "when its worker was killed")
            raise CandidateFailed(f"candidate crashed: {exc}") from None

    def _answer(self, worker: Worker, answer: dict[str, Any]) -> dict[str, Any]:
        if "error" in answer and worker is self.ref:
            raise GraderFailed(f"the reference failed: {answer['error']}")
        if "error" in answer:
            raise CandidateFailed(str(answer["error"]))
        return answer

    def _check_priority(self) -> None:
        """After each stretch of commands to the candidate's worker (not between two of them: the judge's
        work there would cool the worker's caches, and the reference's worker has none)."""
        if OOM_SETTABLE and oom_priority(self.cand.proc.pid) != OOM_FIRST:
            # with it lowered, running out of memory could end the judge instead of the candidate
            raise CandidateFailed(
                "the candidate lowered its worker's out-of-memory priority", ["tampered_runtime"]
            )

    # -- after timing ------------------------------------------------------------------------------

    def _flag(self, name: str) -> None:
        """Record a flag once, however many checks find it."""
        if name not in self.flags:
            self.flags.append(name)

    def _audit(self, report: dict[str, Any]) -> None:
        self.changed = [str(c) for c in report.get("changed") or []]
        if any(c.startswith(TIMERS) for c in self.changed):
            self._flag("tampered_timer")
        if any(not c.startswith(TIMERS) for c in self.changed):
            self._flag("tampered_runtime")
        if report.get("reference_calls"):
            self._flag("called_reference")
        if report.get("threads_changed"):
            self._flag("multithreaded")

    def _resume_reference(self) -> None:
        """The reference's worker is slow to answer: if a signal stopped it, that was the candidate."""
        if stopped(self.ref.proc.pid):
            self._flag("reference_disturbed")
            os.kill(self.ref.proc.pid, signal.SIGCONT)

    def _stop_candidate(self) -> None:
        self.cand.stop()
        for pid in self.cpu.stray_processes():  # whatever it left running would disturb the solo timing
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        # the candidate's processes ran as the same user: they could have stopped, moved or deprioritised
        # the reference's worker, which would make it look slow alone too
        pid = self.ref.proc.pid
        self._resume_reference()
        if os.sched_getaffinity(pid) != os.sched_getaffinity(0) or os.getpriority(
            os.PRIO_PROCESS, pid
        ) != os.getpriority(os.PRIO_PROCESS, 0):
            self._flag("reference_disturbed")
            os.sched_setaffinity(pid, os.sched_getaffinity(0))


@contextlib.contextmanager
def _reference_fault() -> Iterator[None]:
    """The reference failing in the judge's own process is the task's or the machine's fault."""
    try:
        yield
    except Exception as exc:
        raise GraderFailed(f"the reference failed in the judge: {type(exc).__name__}: {exc}") from exc


def _delays(worker: Worker) -> float:
    """Run-queue delay so far of the worker's main thread and the judge's own (each command's round trip
    includes both: the worker woken by the command, the judge by the answer)."""
    return run_delay(worker.proc.pid) + run_delay()


def _seed() -> int:
    return secrets.randbelow(1 << 30)
