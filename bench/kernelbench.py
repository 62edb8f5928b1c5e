"""KernelBench grading check: `metasearch bench kernelbench --path CHECKOUT [--levels 1] [--scale 0.125]`.

Grades, for every loaded problem, the reference itself as the candidate (``ModelNew`` copied from
``Model``: it must come out correct) and, with ``--wrong``, a candidate with one output element off by more than its own size (it must
fail on correctness), through the suite's public ``grade`` in the chosen sandbox. Problems the suite leaves
out (grading does not fit the memory limit, or the scale made the reference fail) are listed with why. Prints one table (problem,
memory estimated, memory the grading ended with (more when the judge asked for room), verdicts, seconds) and
a summary; exits non-zero when a correct candidate failed or a wrong one passed. A problem whose grading
turns out to need more than the memory limit once measured is ``retired`` (``errors.TaskUnfit``: a study
stops evaluating it), counted apart. ``--jsonl FILE`` appends each row as it comes (a long sweep can be followed and resumed with
``--skip-done``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from metasearch.errors import MetasearchError, TaskUnfit
from metasearch.sandboxes.protocol import Sandbox
from metasearch.sim.table import print_table
from metasearch.suites.kernelbench import KernelBenchSuite

WRONG_FORWARD = """

_forward = ModelNew.forward


def _off(self, *args):
    out = _forward(self, *args).clone()
    flat = out.view(-1)
    flat[0] += 1 + flat[0].abs()  # beyond any tolerance below 100%, and no value is its own image
    return out


ModelNew.forward = _off
"""


def _sandbox(kind: str) -> Sandbox:
    if kind == "docker":
        from metasearch.sandboxes.docker import DockerSandbox

        return DockerSandbox(DockerSandbox.Config(), study="bench-kernelbench")
    from metasearch.sandboxes.local import LocalSandbox

    return LocalSandbox()


def _grade(suite: KernelBenchSuite, task_id: str, source: str, sandbox: Sandbox) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ms-bench-kb-") as tmp:
        out = Path(tmp) / "out"
        out.mkdir()
        (out / "solution.py").write_text(source)
        start = time.perf_counter()
        try:
            result = suite.grade(task_id, out, sandbox)
        except MetasearchError as exc:  # a task no candidate can be graded on here is retired by a study
            kind = "retired" if isinstance(exc, TaskUnfit) else "infra"
            return {"verdict": f"{kind}: {exc}"[:120], "detail": str(exc), "s": time.perf_counter() - start}
        correct = bool(result.metrics.get("correct"))
        return {
            "correct": correct,
            "speedup": result.metrics.get("speedup"),
            "verdict": "correct" if correct else (result.error or "failed")[:120],
            "s": time.perf_counter() - start,
        }


def candidate(reference: str, wrong: bool) -> str:
    """The reference renamed to ``ModelNew`` (a correct candidate), or one with an output element off by more than its size."""
    right = reference.replace("class Model(", "class ModelNew(").replace("super(Model,", "super(ModelNew,")
    if not wrong:
        return right
    return right + WRONG_FORWARD


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="metasearch bench kernelbench", description=__doc__)
    parser.add_argument("--path", required=True, help="a KernelBench checkout")
    parser.add_argument("--levels", default="1", help="comma-separated levels")
    parser.add_argument("--ids", default=None, help="comma-separated problem ids (e.g. L1/19,L1/23)")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--sandbox", choices=("docker", "local"), default="docker")
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="cpu", help="where to time")
    parser.add_argument("--memory-limit-mb", type=int, default=None)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=900.0, help="grading timeout per problem (s)")
    parser.add_argument("--wrong", action="store_true", help="also grade a wrong candidate per problem")
    parser.add_argument("--jsonl", type=Path, default=None, help="append each row to this file")
    parser.add_argument("--skip-done", action="store_true", help="skip problems already in --jsonl")
    args = parser.parse_args(argv)
    suite = KernelBenchSuite(
        KernelBenchSuite.Config(
            path=args.path,
            levels=[int(x) for x in args.levels.split(",")],
            ids=args.ids.split(",") if args.ids else None,
            device=args.device,
            scale=args.scale,
            reps=args.reps,
            grade_timeout_s=args.timeout,
            memory_limit_mb=args.memory_limit_mb,
        )
    )
    sandbox = _sandbox(args.sandbox)
    done: set[str] = set()
    if args.skip_done and args.jsonl and args.jsonl.is_file():
        done = {json.loads(line)["problem"] for line in args.jsonl.read_text().splitlines() if line}
    sizes, left_out = suite.grading_mb(), suite.left_out()
    rows: list[dict[str, Any]] = []
    for task in [
        t for t in suite.source.ids() if t.split("/", 1)[1] not in done
    ]:  # rows name the problem only
        row: dict[str, Any] = {"problem": task.split("/", 1)[1], "memory_mb": sizes[task]}
        if task in left_out:
            row.update(right=f"left out: {left_out[task]}"[:120], right_s=0.0)
        else:
            reference = suite.reference(task).decode()
            right = _grade(suite, task, candidate(reference, False), sandbox)
            row.update(right=right["verdict"], speedup=right.get("speedup"), right_s=right["s"])
            if "detail" in right:
                row["right_detail"] = right["detail"]
            row["right_ok"] = bool(right.get("correct"))
            if args.wrong:
                wrong = _grade(suite, task, candidate(reference, True), sandbox)
                row.update(wrong=wrong["verdict"], wrong_s=wrong["s"])
                row["wrong_ok"] = "wrong output" in wrong["verdict"] or "incorrect" in wrong["verdict"]
            row["graded_mb"] = sizes[task]  # more than estimated when the judge asked for more room
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
        if args.jsonl:
            with args.jsonl.open("a") as f:
                f.write(json.dumps(row) + "\n")
    columns = ["problem", "memory_mb", "graded_mb", "right", "speedup", "right_s"] + (
        ["wrong", "wrong_s"] if args.wrong else []
    )
    print_table(rows, columns)
    graded = [r for r in rows if "right_ok" in r and not str(r["right"]).startswith("retired")]
    retired = [r for r in rows if str(r.get("right", "")).startswith("retired")]
    right_ok = sum(r["right_ok"] for r in graded)
    wrong_ok = sum(r.get("wrong_ok", False) for r in graded)
    print(
        f"\nscale {args.scale:g}, {args.sandbox}: correct candidates graded correct {right_ok}/{len(graded)}"
        + (f", wrong candidates failed on correctness {wrong_ok}/{len(graded)}" if args.wrong else "")
        + f"; left out {len(rows) - len(graded) - len(retired)} (memory limit {suite.memory_limit_mb()} MB, or"
        + f" too small at the scale); retired {len(retired)} (measured need over that limit: a study retires them)"
    )
    failed = right_ok < len(graded) or (args.wrong and wrong_ok < len(graded))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run())
