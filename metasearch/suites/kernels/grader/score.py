"""The kernels scorer: is ``ModelNew`` in a candidate file correct, and how much faster than ``Model``?

Runs inside a fresh grading sandbox (standard library, NumPy and PyTorch only)::

    python3 -I score.py --task-dir TASK --candidate solution.py [--device cpu|cuda] [--reps 15]
        [--accounting container|process]

and prints one JSON line of the grader contract (``metasearch/suites/contract.py``): the verdict
``{"score", "metrics", "flags", "error"}``, or ``{"grader_fault", "need_mb"?}`` (exit status 3) when the
grader itself failed, which is never the candidate's doing. The verdict is computed by the judge
(``judge.py``, which never loads the candidate) from what it measures itself; the workers (``worker.py``)
only run what it asks. ``--accounting container`` when the run is alone in its container (Docker), else
``process``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from judge import GraderFailed, failed, judge
from room import OutOfRoom
from shared import MALLOC_TUNABLES


def main(argv: list[str] | None = None) -> None:
    if os.environ.get("GLIBC_TUNABLES") != MALLOC_TUNABLES:
        # the workers fork from the judge and keep its allocator's settings, which the C library reads only
        # when a program starts: start again with them
        given = sys.argv[1:] if argv is None else argv
        env = {**os.environ, "GLIBC_TUNABLES": MALLOC_TUNABLES}
        os.execve(sys.executable, [sys.executable, "-I", str(Path(__file__).resolve()), *given], env)
    parser = argparse.ArgumentParser(
        description="Score a KernelBench-format candidate against its reference."
    )
    parser.add_argument("--task-dir", required=True)
    parser.add_argument("--candidate", required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=240.0)
    parser.add_argument("--accounting", choices=("container", "process"), default="process")
    parser.add_argument(
        "--inputs",
        choices=("auto", "sent", "drawn"),
        default="auto",
        help="timed inputs sent by the judge, or drawn by each worker from seeds (with a digest of the "
        "outputs); auto: drawn on a GPU, sent on a CPU",
    )
    args = parser.parse_args(argv)
    if not Path(args.candidate).is_file():
        print(json.dumps(failed(f"no artifact: {Path(args.candidate).name} was not written")), flush=True)
        return
    try:
        result = judge(args)
    except OutOfRoom as exc:  # the run was too small for the problem: not the candidate's doing either
        print(json.dumps({"grader_fault": str(exc), "need_mb": exc.need_mb}), flush=True)
        sys.exit(3)
    except GraderFailed as exc:  # the reference or the judge failed here: not the candidate's doing
        print(json.dumps({"grader_fault": str(exc)}), flush=True)
        sys.exit(3)
    except MemoryError:  # the judge's own memory: what it holds is bounded by the problem's sizes
        print(json.dumps({"grader_fault": "the judge ran out of memory"}), flush=True)
        sys.exit(3)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
