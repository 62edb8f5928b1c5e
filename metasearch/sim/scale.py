"""``metasearch bench schedulers --scale``: decision latency at 10k and 100k agents.

Measured against a naive baseline that recomputes clade sums by walking the tree for every decision (as
the public HGM code does).
"""

from __future__ import annotations

import json
import time
import tracemalloc
from typing import Any

import numpy as np

from metasearch.registry import SCHEDULERS
from metasearch.schedulers.base import SearchState
from metasearch.schedulers.cmp import SearchTree
from metasearch.sim.table import print_table
from metasearch.types import Budget, Usage


def scale(
    sizes: tuple[int, ...] = (10_000, 100_000), decisions: int = 200, name: str = "hgm"
) -> list[dict[str, Any]]:
    """Decision latency and memory per agent at large trees, against a walk-the-tree baseline."""
    rows = []
    rng = np.random.default_rng(0)
    tasks = tuple(f"t{i}" for i in range(60))
    cls = SCHEDULERS.resolve(name)
    for n in sizes:
        parents = [int(rng.integers(0, i)) for i in range(1, n)]  # a random recursive tree
        tracemalloc.start()
        tree = SearchTree()
        tree.add_agent("a0", None)
        for i in range(1, n):
            tree.add_agent(f"a{i}", f"a{parents[i - 1]}")
        for i in range(n):
            tree.add_result(f"a{i}", "t0", float(rng.random() < 0.5))
        memory = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        scheduler = cls(cls.Config(initial_expansions=0))
        state = SearchState(tree, tasks, Budget(evaluations=10 * n), Usage(evaluations=n * 3), 0, 0)
        times = []
        for _ in range(decisions):
            t = time.perf_counter()
            scheduler.next_job(state, rng)
            times.append(time.perf_counter() - t)
        naive = []
        for _ in range(3):
            t = time.perf_counter()
            _naive_clade_sums(tree)
            naive.append(time.perf_counter() - t)
        rows.append(
            {
                "agents": n,
                "decision_ms_median": 1e3 * float(np.median(times)),
                "decision_ms_p95": 1e3 * float(np.percentile(times, 95)),
                "naive_walk_ms_median": 1e3 * float(np.median(naive)),
                "bytes_per_agent": memory / n,
            }
        )
    return rows


def _naive_clade_sums(tree: SearchTree) -> list[float]:
    """What a decision costs when clade lists are rebuilt by walking the tree (the baseline)."""
    sums = []
    for v in range(len(tree)):
        stack, s = [v], 0.0
        while stack:
            d = stack.pop()
            s += float(tree.own_s[d])
            stack.extend(tree.children[d])
        sums.append(s)
    return sums


def report(as_json: bool) -> int:
    rows = scale()
    if as_json:
        print(json.dumps(rows))
        return 0
    for r in rows:
        r["speedup_vs_naive"] = r["naive_walk_ms_median"] / r["decision_ms_median"]
    columns = ["agents", "decision_ms_median", "decision_ms_p95", "naive_walk_ms_median", "speedup_vs_naive"]
    print_table(rows, [*columns, "bytes_per_agent"])
    return 0
