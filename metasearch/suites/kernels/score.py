"""The kernel scorer: is ``ModelNew`` in a candidate file correct, and how much faster than ``Model``?

Runs inside a fresh grading sandbox (standard library, NumPy and PyTorch only)::

    python3 score.py --task-dir TASK --candidate solution.py [--device cpu|cuda] [--reps 15]

prints one JSON line: ``{"score", "metrics", "flags", "error"}``. The work is split in two processes. This
one (the judge) draws the secret seeds, starts a fresh worker process that imports the candidate, sends
it the seeds only after the import, and checks the worker's claims against its own clock. The worker:

1. records the identity of every timer it uses, then imports the reference (under a private name, from
   a path the candidate cannot import) and the candidate;
2. checks correctness on every shape set (the module's default sizes and those in ``task.toml``), with
   inputs drawn from the secret seed, parameters initialised identically for both models, and the inputs
   compared against a pristine copy after each call (a candidate that writes into its inputs is flagged);
3. times the default shape: warm-up, then repetitions alternating reference and candidate in random order
   (single-threaded on CPU; CUDA events and a device synchronisation on GPU), speedup = ratio of medians,
   with a 95% bootstrap confidence interval over the per-repetition ratios;
4. checks correctness again after timing with a new seed (catches outputs cached across calls);
5. checks that the timers are still the ones it recorded.

Score: 0 unless correct and untampered; 0.1 for correct but not measurably faster (the CI includes 1);
faster: 0.1 + 0.9 * min(1, log(speedup) / log(10)). A speedup above the task's ceiling is flagged
``speedup_above_ceiling`` and scored as if it were 1: such numbers come from evaluation bugs more often
than from kernels.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

FULL_CREDIT_SPEEDUP = 10.0


def load_task(task_dir: Path) -> dict[str, Any]:
    spec = tomllib.loads((task_dir / "task.toml").read_text())
    spec.setdefault("shapes", [])
    return spec


def score_from(correct: bool, speedup: float, ci_low: float, flags: list[str]) -> float:
    if not correct or any(f in flags for f in ("modified_inputs", "tampered_timer", "timer_inconsistent")):
        return 0.0
    if "speedup_above_ceiling" in flags or ci_low <= 1.0:
        return 0.1
    return 0.1 + 0.9 * min(1.0, math.log(speedup) / math.log(FULL_CREDIT_SPEEDUP))


# -- the judge -------------------------------------------------------------------------------------


def judge(args: argparse.Namespace) -> dict[str, Any]:
    task = load_task(Path(args.task_dir))
    seeds = [int.from_bytes(os.urandom(4), "big") for _ in range(2)]
    command = [sys.executable, "-I", __file__, "--worker", "--task-dir", args.task_dir,
               "--candidate", args.candidate, "--device", args.device, "--reps", str(args.reps),
               "--warmup", str(args.warmup)]  # fmt: skip
    started = time.perf_counter()
    try:
        done = subprocess.run(
            command,
            input=json.dumps({"seeds": seeds}),
            capture_output=True,
            text=True,
            timeout=args.timeout,
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
        return {"score": 0.0, "metrics": {"correct": 0.0}, "flags": report.get("flags", []),
                "error": report["error"]}  # fmt: skip
    flags = list(report["flags"])
    if report["timed_s"] > wall * 1.05 + 0.05:  # the worker claims more time than it lived: its clock lies
        flags.append("timer_inconsistent")
    speedup, lo, hi = report["speedup"], report["ci_low"], report["ci_high"]
    if speedup > float(task.get("ceiling", 1000.0)):
        flags.append("speedup_above_ceiling")
    correct = bool(report["correct"])
    score = score_from(correct, speedup, lo, flags)
    faster = correct and score > 0.1
    metrics = {
        "correct": float(correct),
        "speedup": speedup,
        "ci_low": lo,
        "ci_high": hi,
        "ref_ms": report["ref_ms"],
        "cand_ms": report["cand_ms"],
        "fast_0": float(correct and not flags),
        "fast_1": float(faster and speedup > 1.0),
        "fast_2": float(faster and speedup > 2.0 and lo > 1.0),
    }
    error = None if score > 0 else f"rejected: {', '.join(flags) or 'incorrect'}"
    return {"score": score, "metrics": metrics, "flags": flags, "error": error}


def _failed(reason: str) -> dict[str, Any]:
    return {"score": 0.0, "metrics": {"correct": 0.0}, "flags": [], "error": reason}


# -- the worker ------------------------------------------------------------------------------------


def worker(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np  # noqa: F401  (imported before the candidate, like torch)
    import torch

    timers = {
        "time.perf_counter": time.perf_counter,
        "time.perf_counter_ns": time.perf_counter_ns,
        "torch.cuda.synchronize": torch.cuda.synchronize,
        "torch.cuda.Event": torch.cuda.Event,
        "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
    }
    perf_counter = time.perf_counter
    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(1)
    task_dir = Path(args.task_dir)
    task = load_task(task_dir)
    reference = _import("_metasearch_reference", task_dir / "reference.py")
    try:
        candidate = _import("solution", Path(args.candidate))
        model_new = candidate.ModelNew
    except Exception as exc:
        return {
            "error": f"cannot import ModelNew from the candidate: {type(exc).__name__}: {exc}",
            "flags": [],
        }
    seeds = json.loads(sys.stdin.read())["seeds"]  # only now: the candidate never saw them at import
    flags: list[str] = []

    def tampered() -> bool:
        now = {
            "time.perf_counter": time.perf_counter,
            "time.perf_counter_ns": time.perf_counter_ns,
            "torch.cuda.synchronize": torch.cuda.synchronize,
            "torch.cuda.Event": torch.cuda.Event,
            "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
        }
        return any(now[k] is not v for k, v in timers.items())

    def build(seed: int, shape: dict[str, Any]) -> tuple[Any, Any, list[Any]]:
        defaults = {k: getattr(reference, k) for k in shape}
        for k, v in shape.items():
            setattr(reference, k, v)
        try:
            torch.manual_seed(seed)
            inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in reference.get_inputs()]
            init = reference.get_init_inputs()
        finally:
            for k, v in defaults.items():
                setattr(reference, k, v)
        torch.manual_seed(seed + 1)
        ref = reference.Model(*init).to(device).eval()
        torch.manual_seed(seed + 1)
        cand = model_new(*init).to(device).eval()
        return ref, cand, inputs

    def check(seed: int, shape: dict[str, Any]) -> str | None:
        ref, cand, inputs = build(seed, shape)
        pristine = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        with torch.no_grad():
            expected = ref(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
            got = cand(*inputs)
        _sync(device)
        if any(
            isinstance(x, torch.Tensor) and not torch.equal(x, p)
            for x, p in zip(inputs, pristine, strict=True)
        ):
            flags.append("modified_inputs")
            return "the candidate wrote into its inputs"
        if not isinstance(got, torch.Tensor):
            return f"ModelNew returned {type(got).__name__}, not a tensor"
        if got.shape != expected.shape or got.dtype != expected.dtype:
            return f"output {tuple(got.shape)} {got.dtype} differs from the reference's {tuple(expected.shape)} {expected.dtype}"
        if any(got is x for x in inputs):
            return "the candidate returned one of its inputs"
        if not torch.allclose(got, expected, atol=float(task["atol"]), rtol=float(task["rtol"])):
            worst = (got - expected).abs().max().item()
            return f"wrong output (max abs difference {worst:.3g}, atol {task['atol']}, rtol {task['rtol']})"
        return None

    shapes = [{}, *task["shapes"]]
    try:
        for i, shape in enumerate(shapes):
            problem = check(seeds[0] + 1000 * i, shape)
            if problem:
                return {"error": f"incorrect on shape set {shape or 'default'}: {problem}", "flags": flags}
        ref, cand, inputs = build(seeds[0], {})
        ref_times, cand_times, timed = _time(device, ref, cand, inputs, args.reps, args.warmup, perf_counter)
        problem = check(seeds[1], {})  # a new seed after timing: outputs cached across calls fail here
        if problem:
            return {
                "error": f"incorrect after timing, with a new seed: {problem}",
                "flags": [*flags, "stale_output"],
            }
    except Exception as exc:
        return {"error": f"candidate raised {type(exc).__name__}: {exc}", "flags": flags}
    if tampered():
        flags.append("tampered_timer")
    ratios = [r / c for r, c in zip(ref_times, cand_times, strict=True) if c > 0]
    speedup = statistics.median(ref_times) / max(statistics.median(cand_times), 1e-12)
    lo, hi = _bootstrap(ratios)
    return {
        "correct": True,
        "speedup": speedup,
        "ci_low": lo,
        "ci_high": hi,
        "ref_ms": statistics.median(ref_times) * 1000,
        "cand_ms": statistics.median(cand_times) * 1000,
        "timed_s": timed,
        "flags": flags,
    }


def _import(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _sync(device: Any) -> bool:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()
        return True
    return False


def _time(
    device: Any, ref: Any, cand: Any, inputs: list[Any], reps: int, warmup: int, clock: Any
) -> tuple[list[float], list[float], float]:
    """Per-repetition seconds of each model, interleaved in random order; and the total time measured."""
    import torch

    rng = random.Random(0)
    ref_times: list[float] = []
    cand_times: list[float] = []

    def once(model: Any) -> float:
        args = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            with torch.no_grad():
                model(*args)
            end.record()
            torch.cuda.synchronize()
            return float(start.elapsed_time(end)) / 1000
        t0 = clock()
        with torch.no_grad():
            model(*args)
        return float(clock() - t0)

    for _ in range(warmup):
        once(ref)
        once(cand)
    total = 0.0
    for _ in range(reps):
        pair = [(ref, ref_times), (cand, cand_times)]
        rng.shuffle(pair)
        for model, sink in pair:
            seconds = once(model)
            sink.append(seconds)
            total += seconds
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
    if not Path(args.candidate).is_file():
        print(json.dumps(_failed(f"no artifact: {Path(args.candidate).name} was not written")), flush=True)
        return
    print(json.dumps(judge(args)), flush=True)


if __name__ == "__main__":
    main()
