"""Honest kernels, graded now and at another commit: `metasearch bench oracles --against REF [--runs 10]`.

Grades each CPU task's oracle (the fast, correct solution in ``tests/suites/kernels_fixtures.py``, the same
source for both sides) through ``KernelsSuite.grade`` in a local sandbox, once with this checkout's suite
and once with the suite of ``REF`` (checked out into a temporary git worktree). Each grading runs in a
fresh Python process. The two sides alternate task by task and swap who goes first every run, so a machine
that drifts in speed moves both alike. Prints one table: per task, the median speedup and its range on each
side and in a plain in-process timing of the same source (no defences: an anchor for both), the ratios
of the medians and the scores seen. A speedup on a CPU moves between runs of
the same code (the reference's own speed has modes on a shared machine), so read the ranges before the
ratio, and give it ten runs or more.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from metasearch.sim.table import print_table

ROOT = Path(__file__).resolve().parents[1]

# Run inside the checkout being measured: its own suite and sandbox, this checkout's oracle.
GRADE = """
import json, sys, tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from metasearch.suites.kernels import KernelsSuite
from metasearch.sandboxes.local import LocalSandbox
with tempfile.TemporaryDirectory(prefix="ms-bench-oracle-") as tmp:
    art = Path(tmp)
    art.chmod(0o755)
    (art / "solution.py").write_text(sys.stdin.read())
    (art / "solution.py").chmod(0o644)
    suite = KernelsSuite(KernelsSuite.Config(reps=int(sys.argv[3])))
    r = suite.grade(f"kernels/{sys.argv[2]}", art, LocalSandbox())
keys = ("speedup", "ref_ms", "cand_ms", "batch")
print(json.dumps({"score": r.score, "flags": list(r.flags), "error": r.error,
                  **{k: r.metrics[k] for k in keys if k in r.metrics}}))
"""

# The plainest measurement, with no defence at all, as an anchor for both: one process, the candidate's
# module imported beside the reference, each call on inputs made just before it, in ABBA order.
PLAIN = """
import importlib.util, os, statistics, sys, tempfile, time
from pathlib import Path
import torch
torch.set_num_threads(1)
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
reference = load("reference", sys.argv[1])
with tempfile.TemporaryDirectory(prefix="ms-bench-plain-") as tmp:
    path = Path(tmp) / "solution.py"
    path.write_text(sys.stdin.read())
    solution = load("solution", path)
models = [reference.Model(*reference.get_init_inputs()), solution.ModelNew(*reference.get_init_inputs())]
def once(model):
    inputs = reference.get_inputs()
    with torch.no_grad():
        start = time.perf_counter()
        model(*inputs)
        return time.perf_counter() - start
for model in models:
    for _ in range(3):
        once(model)
times = [[], []]
while sum(times[0]) < 1.0 or len(times[0]) < 40:
    for who in (0, 1, 1, 0):
        times[who].append(once(models[who]))
print(statistics.median(times[0]) / statistics.median(times[1]))
"""


def _plain(task: str, source: str) -> float:
    reference = ROOT / "metasearch" / "suites" / "kernels" / "tasks" / task / "reference.py"
    done = subprocess.run(
        [sys.executable, "-c", PLAIN, str(reference)],
        input=source,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"timing {task} plainly failed:\n{done.stderr[-2000:]}")
    return float(done.stdout.strip().splitlines()[-1])


def _oracle(task: str) -> str:
    sys.path.insert(0, str(ROOT / "tests" / "suites"))
    try:
        from kernels_fixtures import oracle
    finally:
        sys.path.pop(0)
    return str(oracle(task))


def _tasks() -> list[str]:
    folder = ROOT / "metasearch" / "suites" / "kernels" / "tasks"
    return sorted(
        p.name for p in folder.iterdir() if (p / "task.toml").exists() and not p.name.startswith("gpu_")
    )


def _grade(checkout: Path, task: str, source: str, reps: int) -> dict[str, Any]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", GRADE, str(checkout), task, str(reps)],
        input=source,
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"grading {task} at {checkout} failed:\n{done.stderr[-2000:]}")
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    out["seconds"] = time.perf_counter() - start
    return out


def _side(results: list[dict[str, Any]]) -> tuple[float, str, str]:
    speedups = sorted(r.get("speedup", 0.0) for r in results)
    scores = sorted(
        {f"{r['score']:.2f}" + ("!" + ",".join(r["flags"]) if r["flags"] else "") for r in results}
    )
    spread = f"{speedups[0]:.3g}–{speedups[-1]:.3g}"
    return statistics.median(speedups), spread, " ".join(scores)


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="metasearch bench oracles", description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True, help="a commit (or branch, tag) to compare with")
    parser.add_argument("--runs", type=int, default=10, help="gradings per task and side (default 10)")
    parser.add_argument("--reps", type=int, default=9, help="the suite's reps (default 9)")
    parser.add_argument("--tasks", default="", help="comma-separated tasks (default: every CPU task)")
    parser.add_argument("--jsonl", type=Path, help="append every grading to this file as it ends")
    args = parser.parse_args(argv)
    tasks = [t for t in args.tasks.split(",") if t] or _tasks()
    sources = {task: _oracle(task) for task in tasks}
    with tempfile.TemporaryDirectory(prefix="ms-bench-oracles-") as tmp:
        then = Path(tmp) / "then"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(then), args.against], check=True
        )
        try:
            results: dict[tuple[str, str], list[dict[str, Any]]] = {}
            for run_no in range(args.runs):
                for n, task in enumerate(tasks):
                    sides = [("now", ROOT), ("then", then)]
                    if (run_no + n) % 2:
                        sides.reverse()
                    graded = [
                        (name, _grade(checkout, task, sources[task], args.reps)) for name, checkout in sides
                    ]
                    graded.append(
                        ("plain", {"speedup": _plain(task, sources[task]), "score": 0.0, "flags": []})
                    )
                    for name, r in graded:
                        results.setdefault((task, name), []).append(r)
                        line = json.dumps({"run": run_no, "task": task, "side": name, **r})
                        print(line, file=sys.stderr, flush=True)  # progress
                        if args.jsonl:
                            with args.jsonl.open("a") as fh:
                                fh.write(line + "\n")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(then)], check=False)
    rows = []
    for task in tasks:
        now_med, now_spread, now_scores = _side(results[(task, "now")])
        then_med, then_spread, then_scores = _side(results[(task, "then")])
        plain_med, plain_spread, _ = _side(results[(task, "plain")])
        rows.append(
            {
                "task": task,
                "plain median": plain_med,
                "plain range": plain_spread,
                "then median": then_med,
                "then range": then_spread,
                "now median": now_med,
                "now range": now_spread,
                "now / then": now_med / then_med if then_med else float("nan"),
                "now / plain": now_med / plain_med if plain_med else float("nan"),
                "scores then": then_scores,
                "scores now": now_scores,
                "s per grading then": statistics.mean(r["seconds"] for r in results[(task, "then")]),
                "s per grading now": statistics.mean(r["seconds"] for r in results[(task, "now")]),
            }
        )
    print_table(
        rows,
        list(rows[0]),
        title=f"kernels oracles: this checkout against {args.against}, {args.runs} runs each",
    )
    return 0
