"""Sandbox benchmark: `python bench/sandbox.py [--jobs 20] [--json]`.

Per-job overhead of a trivial job through DockerSandbox.run against a raw `docker run --rm` of the same
image with the same isolation flags (target: <= 1.3x), and throughput with 1, 2 and 4 worker threads.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from metasearch.sandboxes.docker import DockerSandbox
from metasearch.sandboxes.protocol import RunSpec

STUDY = "bench-sandbox"


def raw_run(image: str) -> float:
    started = time.perf_counter()
    subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            "--network",
            "none",
            "--read-only",
            "--cap-drop",
            "ALL",
            "--user",
            "65534:65534",
            image,
            "true",
        ],
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - started


def sandbox_run(sandbox: DockerSandbox) -> float:
    started = time.perf_counter()
    result = sandbox.run(RunSpec(command=["true"], labels={"metasearch.job": "bench"}))
    assert result.ok, result.stderr
    return time.perf_counter() - started


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="metasearch bench sandbox", description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    sandbox = DockerSandbox(DockerSandbox.Config(), study=STUDY)
    raw, ours = [], []
    for _ in range(args.jobs):  # interleaved, so drift on the machine hits both alike
        raw.append(raw_run(sandbox.image))
        ours.append(sandbox_run(sandbox))
    rows = [
        {
            "measure": "trivial job, median s",
            "raw docker run": statistics.median(raw),
            "DockerSandbox": statistics.median(ours),
            "ratio": statistics.median(ours) / statistics.median(raw),
            "target": "<= 1.3x",
        }
    ]
    base_rate = None
    for workers in (1, 2, 4):
        started = time.perf_counter()
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(lambda _: sandbox_run(sandbox), range(args.jobs)))
        rate = args.jobs / (time.perf_counter() - started)
        base_rate = base_rate or rate
        rows.append(
            {
                "measure": f"throughput, {workers} worker(s), jobs/s",
                "raw docker run": None,
                "DockerSandbox": rate,
                "ratio": rate / base_rate,
                "target": "vs 1 worker",
            }
        )
    sandbox.sweep()
    if args.json:
        print(json.dumps(rows))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table("measure", "raw docker run", "DockerSandbox", "ratio", "target")
    for r in rows:
        raw_cell = "-" if r["raw docker run"] is None else f"{r['raw docker run']:.3f}"
        table.add_row(r["measure"], raw_cell, f"{r['DockerSandbox']:.3f}", f"{r['ratio']:.2f}", r["target"])
    Console(width=160).print(table)
    return 0 if rows[0]["ratio"] <= 1.3 else 1


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
