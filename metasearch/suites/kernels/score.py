"""The kernel scorer: is ``ModelNew`` in a candidate file correct, and how much faster than ``Model``?

Runs inside a fresh grading sandbox (standard library, NumPy and PyTorch only)::

    python3 score.py --task-dir TASK --candidate solution.py [--device cpu|cuda] [--reps 15]

prints one JSON line: ``{"score", "metrics", "flags", "error"}``. The work is split in two processes, and
nothing the candidate's process says about correctness is taken on trust.

The judge (this process, which never loads the candidate) draws the secret seeds, computes the reference's
outputs for them itself, starts a fresh worker process that imports the candidate, sends it the seeds only
after the import, and then:

- compares the outputs the worker saved (plain ``.npy`` arrays) with its own, in its own process, so a
  candidate that patches ``torch.allclose``, returns a tensor subclass or fakes a report line gains nothing;
- checks the worker's timings against its own clock (a worker that claims more time than it lived lies)
  and against its own timing of the reference (a reference that ran far slower or faster in the worker's
  process than here was tampered with there).

The worker:

1. records the identity of every timer and of every function in the namespaces grading relies on (torch,
   ``torch.Tensor``, ``nn.Module``, ``torch.nn.functional``, NumPy, the standard library it uses, the
   reference module and class), counts calls of the reference's ``forward``, then imports the reference
   (under a private name it removes from ``sys.modules``) and the candidate;
2. runs the candidate on every shape set (the module's default sizes and those in ``task.toml``), with
   inputs drawn from the secret seeds and parameters initialised as the judge's, and compares the inputs
   against a pristine copy after each call (a candidate that writes into its inputs is flagged);
3. times the default shape: warm-up, then repetitions alternating reference and candidate in a balanced
   order (ABBA), each repetition on fresh inputs from a secret seed (so caching outputs keyed on input
   values is worthless), single-threaded on CPU (process CPU time must not exceed wall time), with CUDA
   events and the wall time between device synchronisations on GPU (the larger counts, so work left on a
   side stream is not free); speedup = ratio of medians, with a 95% bootstrap CI over per-repetition ratios;
4. runs the candidate again after timing with a new seed (catches outputs cached across calls);
5. checks that the timers and the recorded namespaces are unchanged and that the candidate never called
   the reference.

Score: 0 unless correct and no disqualifying flag is raised; 0.1 for correct but not measurably faster
(the CI's lower end is at most ``MIN_GAIN``); faster: 0.1 + 0.9 * min(1, log(speedup) / log(10)). A speedup
above the task's ceiling is flagged ``speedup_above_ceiling`` and scored as if it were 1: such numbers come
from evaluation bugs more often than from kernels.

What remains trusted: the worker's own per-call timings of the candidate. A candidate that takes over its
worker process entirely (replaces the grading loop and forges a report with a plausible reference time)
is not caught by the checks above; the ceiling and the reference cross-check bound what it can claim.
"""

from __future__ import annotations

import argparse
import builtins
import contextlib
import importlib.util
import inspect
import json
import math
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

FULL_CREDIT_SPEEDUP = 10.0
MIN_GAIN = 1.05  # the CI's lower end must clear this to count as faster: timing noise is not a speedup
REFERENCE_AGREEMENT = 3.0  # the worker's reference median vs the judge's: a wider gap is tampering
MIN_TIMED_S = 0.05  # at least this much reference time is measured (more repetitions for fast kernels)
MAX_REPS = 100
# A fixed malloc threshold: without it, glibc's adaptive one makes the same allocation cost a page fault in
# some runs and not in others, and sub-millisecond timings vary several-fold between processes.
MALLOC_TUNABLES = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=268435456"
DISQUALIFYING = (
    "modified_inputs", "tampered_timer", "timer_inconsistent", "tampered_runtime", "called_reference",
    "multithreaded", "reference_time_inconsistent", "stale_output",
)  # fmt: skip


def load_task(task_dir: Path) -> dict[str, Any]:
    spec = tomllib.loads((task_dir / "task.toml").read_text())
    spec.setdefault("shapes", [])
    return spec


def score_from(correct: bool, speedup: float, ci_low: float, flags: list[str]) -> float:
    if not correct or any(f in flags for f in DISQUALIFYING):
        return 0.0
    if "speedup_above_ceiling" in flags or ci_low <= MIN_GAIN:
        return 0.1
    return 0.1 + 0.9 * min(1.0, math.log(speedup) / math.log(FULL_CREDIT_SPEEDUP))


# -- shared by both processes ---------------------------------------------------------------------


@contextlib.contextmanager
def sized(reference: Any, shape: dict[str, Any]) -> Iterator[None]:
    """The reference module with its module-level sizes set to one shape set, restored afterwards."""
    defaults = {k: getattr(reference, k) for k in shape}
    for k, v in shape.items():
        setattr(reference, k, v)
    try:
        yield
    finally:
        for k, v in defaults.items():
            setattr(reference, k, v)


def build(
    reference: Any, model_cls: Any, device: Any, seed: int, shape: dict[str, Any]
) -> tuple[Any, list[Any]]:
    """A model of ``model_cls`` and the inputs for one secret seed and shape set, as the judge builds them."""
    import torch

    inputs = make_inputs(reference, device, seed, shape)
    with sized(reference, shape):
        init = reference.get_init_inputs()
    torch.manual_seed(seed + 1)
    return model_cls(*init).to(device).eval(), inputs


def make_inputs(reference: Any, device: Any, seed: int, shape: dict[str, Any]) -> list[Any]:
    import torch

    with sized(reference, shape):
        torch.manual_seed(seed)
        return [x.to(device) if isinstance(x, torch.Tensor) else x for x in reference.get_inputs()]


def _run(model: Any, inputs: list[Any]) -> Any:
    import torch

    with torch.no_grad():
        return model(*inputs)


def _clone(inputs: list[Any]) -> list[Any]:
    return [x.clone() if hasattr(x, "clone") else x for x in inputs]


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def _import(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# -- the judge -------------------------------------------------------------------------------------


def judge(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    task_dir = Path(args.task_dir)
    task = load_task(task_dir)
    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(1)
    reference = _import("_metasearch_reference", task_dir / "reference.py")
    shapes = [{}, *task["shapes"]]
    secret = [int.from_bytes(os.urandom(4), "big") // 4 for _ in range(3)]
    checks = [(secret[0] + 1000 * i, shape) for i, shape in enumerate(shapes)]
    checks.append((secret[2], {}))  # the recheck after timing, with a new seed
    expected = []
    for seed, shape in checks:
        model, inputs = build(reference, reference.Model, device, seed, shape)
        expected.append(_as_array(_run(model, inputs)))
    with tempfile.TemporaryDirectory(prefix="kernels-") as out_dir:
        os.chmod(out_dir, 0o777)  # the worker may run as another user in some sandboxes
        payload = {"checks": checks, "timing_seed": secret[1], "out_dir": out_dir}
        command = [sys.executable, "-I", __file__, "--worker", "--task-dir", args.task_dir,
                   "--candidate", args.candidate, "--device", args.device, "--reps", str(args.reps),
                   "--warmup", str(args.warmup)]  # fmt: skip
        started = time.perf_counter()
        try:
            done = subprocess.run(
                command, input=json.dumps(payload), capture_output=True, text=True, timeout=args.timeout
            )
        except subprocess.TimeoutExpired:
            return _failed(f"grading timed out after {args.timeout:g} s (candidate too slow or hung)")
        wall = time.perf_counter() - started
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not lines:
            return _failed(f"candidate crashed: {(done.stderr or done.stdout)[-800:]}")
        try:
            report = json.loads(lines[-1])
        except ValueError:
            return _failed("worker output unreadable")
        if report.get("error"):
            return _failed(str(report["error"]), [str(f) for f in report.get("flags", [])])
        if not _well_formed(report):
            return _failed("worker report malformed (the candidate wrote to stdout or ended the worker)")
        flags = [str(f) for f in report["flags"]]
        for i, ((_, shape), want) in enumerate(zip(checks, expected, strict=True)):
            problem = _compare(Path(out_dir) / f"check-{i}.npy", want, task)
            if problem and i == len(checks) - 1:
                return _failed(
                    f"incorrect after timing, with a new seed: {problem}", [*flags, "stale_output"]
                )
            if problem:
                return _failed(f"incorrect on shape set {shape or 'default'}: {problem}", flags)
    if report["timed_s"] > wall * 1.05 + 0.05:  # the worker claims more time than it lived: its clock lies
        flags.append("timer_inconsistent")
    own_ref = _time_reference(reference, device, secret[1], max(9, args.reps), max(3, args.warmup))
    agreement = report["ref_ms"] / 1000 / max(own_ref, 1e-9)
    if not 1 / REFERENCE_AGREEMENT <= agreement <= REFERENCE_AGREEMENT:
        flags.append("reference_time_inconsistent")
    speedup, lo, hi = report["speedup"], report["ci_low"], report["ci_high"]
    if speedup > float(task.get("ceiling", 1000.0)):
        flags.append("speedup_above_ceiling")
    score = score_from(True, speedup, lo, flags)
    faster = score > 0.1
    metrics = {
        "correct": 1.0,
        "speedup": speedup,
        "ci_low": lo,
        "ci_high": hi,
        "ref_ms": report["ref_ms"],
        "cand_ms": report["cand_ms"],
        "judge_ref_ms": own_ref * 1000,
        "fast_0": float(not flags),
        "fast_1": float(faster and speedup > 1.0),
        "fast_2": float(faster and speedup > 2.0),
    }
    error = None if score > 0 else f"rejected: {', '.join(flags)}"
    if error and report["changed"]:
        error += f" (changed: {', '.join(map(str, report['changed'][:5]))})"
    return {"score": score, "metrics": metrics, "flags": flags, "error": error}


def _well_formed(report: Any) -> bool:
    numbers = ("speedup", "ci_low", "ci_high", "ref_ms", "cand_ms", "timed_s")
    return (
        isinstance(report, dict)
        and all(isinstance(report.get(k), (int, float)) and math.isfinite(report[k]) for k in numbers)
        and isinstance(report.get("flags"), list)
        and isinstance(report.get("changed"), list)
    )


def _as_array(output: Any) -> Any:
    import torch

    if type(output) is not torch.Tensor:
        raise TypeError(f"ModelNew returned {type(output).__name__}, not a plain torch.Tensor")
    output = output.detach().cpu()
    if output.dtype == torch.bfloat16:  # NumPy has no bfloat16
        output = output.float()
    return output.numpy()


def _compare(path: Path, want: Any, task: dict[str, Any]) -> str | None:
    import numpy as np

    try:
        got = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        return f"no output saved ({type(exc).__name__})"
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"output {got.shape} {got.dtype} differs from the reference's {want.shape} {want.dtype}"
    atol, rtol = float(task["atol"]), float(task["rtol"])
    if not np.allclose(got, want, atol=atol, rtol=rtol):
        worst = float(np.nanmax(np.abs(got.astype(np.float64) - want))) if got.size else 0.0
        return f"wrong output (max abs difference {worst:.3g}, atol {atol:g}, rtol {rtol:g})"
    return None


def _time_reference(reference: Any, device: Any, seed: int, reps: int, warmup: int) -> float:
    """The judge's own median time of the reference, timed as the worker times it (against itself)."""

    first, _ = build(reference, reference.Model, device, seed, {})
    second, _ = build(reference, reference.Model, device, seed, {})

    times, _, _ = _time(device, reference, first, second, _run, seed, reps, warmup, time.perf_counter)
    return statistics.median(times)


def _failed(reason: str, flags: list[str] | None = None) -> dict[str, Any]:
    return {"score": 0.0, "metrics": {"correct": 0.0}, "flags": flags or [], "error": reason}


# -- the worker ------------------------------------------------------------------------------------


class Guard:
    """What grading relies on, as found before the candidate was imported; ``changed()`` names what moved."""

    def __init__(self, spaces: dict[str, Any], allowed_code_dir: str) -> None:
        self.spaces = spaces
        self.allowed_code_dir = allowed_code_dir
        self.before = {name: dict(self._callables(space)) for name, space in spaces.items()}

    @staticmethod
    def _callables(space: Any) -> Any:
        for key in dir(space):
            value = inspect.getattr_static(space, key, None)
            if callable(value) or isinstance(value, (staticmethod, classmethod, property)):
                yield key, value

    def changed(self) -> list[str]:
        moved = []
        for name, space in self.spaces.items():
            for key, value in self.before[name].items():
                new = inspect.getattr_static(space, key, None)
                if new is value or self._library_wrapper(new):
                    continue
                moved.append(f"{name}.{key}")
        return moved

    def _library_wrapper(self, new: Any) -> bool:
        """PyTorch patches a few of its own functions when parts of it load: ``torch.compile`` wraps
        ``manual_seed`` and hooks ``nn.Module.__init__``. A replacement whose code lives in PyTorch's own
        files is that, not the candidate (which cannot write there; the judge's reference cross-check still
        catches a slowed reference however it was done)."""
        code = getattr(new, "__code__", None)
        return code is not None and code.co_filename.startswith(self.allowed_code_dir)


def worker(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np
    import torch

    perf_counter, process_time = time.perf_counter, _cpu_seconds
    timers = _timers(torch)
    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(1)
    task_dir = Path(args.task_dir)
    reference = _import("_metasearch_reference", task_dir / "reference.py")
    del sys.modules["_metasearch_reference"]  # not reachable by name from the candidate
    reference_calls = [0]
    reference_forward = reference.Model.forward

    def counted(self: Any, *a: Any, **k: Any) -> Any:
        reference_calls[0] += 1
        return reference_forward(self, *a, **k)

    reference.Model.forward = counted
    guard = Guard(
        {
            "builtins": builtins,
            "time": time,
            "os": os,
            "json": json,
            "math": math,
            "random": random,
            "statistics": statistics,
            "numpy": np,
            "torch": torch,
            "torch.Tensor": torch.Tensor,
            "torch.nn.Module": torch.nn.Module,
            "torch.nn.functional": torch.nn.functional,
            "torch.cuda": torch.cuda,
            "torch._C._VariableFunctions": torch._C._VariableFunctions,
            "torch._C._nn": torch._C._nn,
            "reference": reference,
            "reference.Model": reference.Model,
        },
        allowed_code_dir=str(Path(torch.__file__).parent) + os.sep,
    )
    try:
        candidate = _import("solution", Path(args.candidate))
        model_new = candidate.ModelNew
    except Exception as exc:
        return {
            "error": f"cannot import ModelNew from the candidate: {type(exc).__name__}: {exc}",
            "flags": [],
        }
    payload = json.loads(sys.stdin.read())  # only now: the candidate never saw the seeds at import
    out_dir = Path(payload["out_dir"])
    flags: list[str] = []

    def flag(name: str) -> None:
        if name not in flags:
            flags.append(name)

    def run_candidate(model: Any, inputs: list[Any]) -> Any:
        before = reference_calls[0]
        out = _run(model, inputs)
        _sync(device)
        if reference_calls[0] != before:
            flag("called_reference")
        if device.type == "cpu" and torch.get_num_threads() != 1:
            flag("multithreaded")
            torch.set_num_threads(1)
        return out

    def check(index: int, seed: int, shape: dict[str, Any]) -> str | None:
        model, inputs = build(reference, model_new, device, seed, shape)
        pristine = _clone(inputs)
        got = run_candidate(model, inputs)
        if any(
            isinstance(x, torch.Tensor) and not torch.equal(x, p)
            for x, p in zip(inputs, pristine, strict=True)
        ):
            flag("modified_inputs")
            return "the candidate wrote into its inputs"
        if any(got is x for x in inputs):
            return "the candidate returned one of its inputs"
        np.save(out_dir / f"check-{index}.npy", _as_array(got), allow_pickle=False)
        return None

    checks = payload["checks"]
    try:
        for i, (seed, shape) in enumerate(checks[:-1]):
            problem = check(i, seed, shape)
            if problem:
                return {"error": f"incorrect on shape set {shape or 'default'}: {problem}", "flags": flags}
        timing_seed = payload["timing_seed"]
        ref, _ = build(reference, reference.Model, device, timing_seed, {})
        cand, _ = build(reference, model_new, device, timing_seed, {})
        wall0, cpu0 = perf_counter(), process_time()
        ref_times, cand_times, timed = _time(
            device, reference, ref, cand, run_candidate, timing_seed, args.reps, args.warmup, perf_counter
        )
        wall, cpu = perf_counter() - wall0, process_time() - cpu0
        if device.type == "cpu" and cpu > wall * 1.25 + 0.05:  # another core did part of the work
            flag("multithreaded")
        problem = check(len(checks) - 1, *checks[-1])  # a new seed after timing
        if problem:
            return {"error": f"incorrect after timing, with a new seed: {problem}", "flags": flags}
    except Exception as exc:
        return {"error": f"candidate raised {type(exc).__name__}: {exc}", "flags": flags}
    if any(now is not then for now, then in zip(_timers(torch), timers, strict=True)):
        flag("tampered_timer")
    changed = guard.changed()
    if changed:
        flag("tampered_runtime")
    ratios = [r / c for r, c in zip(ref_times, cand_times, strict=True) if c > 0]
    lo, hi = _bootstrap(ratios)
    return {
        "speedup": statistics.median(ref_times) / max(statistics.median(cand_times), 1e-12),
        "ci_low": lo,
        "ci_high": hi,
        "ref_ms": statistics.median(ref_times) * 1000,
        "cand_ms": statistics.median(cand_times) * 1000,
        "timed_s": timed,
        "changed": changed,
        "flags": flags,
    }


def _timers(torch: Any) -> tuple[Any, ...]:
    return (time.perf_counter, time.perf_counter_ns, time.process_time, torch.cuda.synchronize,
            torch.cuda.Event, torch.cuda.Event.elapsed_time, torch.cuda.Event.record)  # fmt: skip


def _cpu_seconds() -> float:
    """CPU time of this process and its children: work moved to a subprocess is counted too."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _time(
    device: Any, reference: Any, ref: Any, cand: Any, run_candidate: Any, seed: int, reps: int, warmup: int,
    clock: Any,
) -> tuple[list[float], list[float], float]:  # fmt: skip
    """Per-repetition seconds of each model, in ABBA order on fresh inputs; and the total time measured."""
    import torch

    ref_times: list[float] = []
    cand_times: list[float] = []

    def once(model: Any, inputs: list[Any]) -> float:
        args = _clone(inputs)
        _sync(device)
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0 = clock()
            start.record()
            run_model(model, args)
            end.record()
            torch.cuda.synchronize()
            return max(float(start.elapsed_time(end)) / 1000, float(clock() - t0))
        t0 = clock()
        run_model(model, args)
        return float(clock() - t0)

    def run_model(model: Any, args: list[Any]) -> None:
        (run_candidate if model is cand else _run)(model, args)

    total = 0.0
    rep = 0
    warm: list[float] = []
    while rep < warmup + reps:
        inputs = make_inputs(reference, device, seed + 1 + rep, {})
        order = [(ref, ref_times), (cand, cand_times)]
        if rep % 2:
            order.reverse()
        for model, sink in order:
            seconds = once(model, inputs)
            if rep >= warmup:
                sink.append(seconds)
                total += seconds
            elif model is ref:
                warm.append(seconds)
        rep += 1
        if rep == warmup and warm:  # fast kernels get more repetitions: sub-millisecond calls are noisy
            reps = min(MAX_REPS, max(reps, math.ceil(MIN_TIMED_S / max(min(warm), 1e-6))))
    return ref_times, cand_times, total


def _bootstrap(ratios: list[float], draws: int = 2000) -> tuple[float, float]:
    if not ratios:
        return 0.0, 0.0
    rng = random.Random(1)
    medians = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(draws))
    return medians[int(0.025 * draws)], medians[int(0.975 * draws) - 1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Score a KernelBench-format candidate against its reference."
    )
    parser.add_argument("--task-dir", required=True)
    parser.add_argument("--candidate", required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=240.0)
    parser.add_argument("--worker", action="store_true")
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args)), flush=True)
        return
    if os.environ.get("GLIBC_TUNABLES") != MALLOC_TUNABLES:  # the worker inherits it
        env = {**os.environ, "GLIBC_TUNABLES": MALLOC_TUNABLES}
        os.execve(sys.executable, [sys.executable, __file__, *(sys.argv[1:] if argv is None else argv)], env)
    if not Path(args.candidate).is_file():
        print(json.dumps(_failed(f"no artifact: {Path(args.candidate).name} was not written")), flush=True)
        return
    try:
        result = judge(args)
    except Exception as exc:  # the reference itself failed here: a task bug, reported as such
        result = _failed(f"grader error: {type(exc).__name__}: {exc}")
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
