"""``metasearch bench schedulers --scale``: decision latency at 10k and 100k agents.

The tree is a random recursive tree whose agents each have results on 1 to 10 of the 60 tasks (0/1 scores,
each agent with its own solve rate), so the per-task diversity options have something to compare. Rows:

* ``hgm``, evaluation decisions: N ** alpha is far below the agent count, as in the first measurement.
* ``hgm``, ``hgm`` with ``novelty: 0.2``, ``hgm`` with ``pareto_parents: true``: expansion decisions
  (N ** alpha is above the agent count, so ``next_job`` chooses a parent), which is where the options act.
  The ``kind`` column counts the jobs ``next_job`` returned, so a row that did not expand says so.

Measured against a naive baseline that recomputes clade sums by walking the tree for every decision (as
the public HGM code does).
"""

from __future__ import annotations

import json
import math
import time
import tracemalloc
from typing import Any

import numpy as np

from metasearch.registry import SCHEDULERS
from metasearch.schedulers.base import SearchState
from metasearch.schedulers.cmp import SearchTree
from metasearch.sim.table import print_table
from metasearch.types import Budget, Expand, Usage

TASKS = tuple(f"t{i}" for i in range(60))
# (label, scheduler, options, decisions wanted: "evaluate" or "expand")
ROWS: tuple[tuple[str, str, dict[str, Any], str], ...] = (
    ("hgm", "hgm", {}, "evaluate"),
    ("hgm", "hgm", {}, "expand"),
    ("hgm novelty 0.2", "hgm", {"novelty": 0.2}, "expand"),
    ("hgm pareto_parents", "hgm", {"pareto_parents": True}, "expand"),
)


def scale_tree(n: int, rng: np.random.Generator) -> SearchTree:
    """``n`` agents in a random recursive tree, each with 0/1 results on 1 to 10 random tasks."""
    parents = [int(rng.integers(0, i)) for i in range(1, n)]
    tree = SearchTree()
    tree.add_agent("a0", None)
    for i in range(1, n):
        tree.add_agent(f"a{i}", f"a{parents[i - 1]}")
    for i in range(n):
        rate = float(rng.random())
        for k in rng.choice(len(TASKS), size=int(rng.integers(1, 11)), replace=False):
            tree.add_result(f"a{i}", TASKS[k], float(rng.random() < rate))
    return tree


def scale(
    sizes: tuple[int, ...] = (10_000, 100_000),
    decisions: int = 200,
    rows: tuple[tuple[str, str, dict[str, Any], str], ...] = ROWS,
) -> list[dict[str, Any]]:
    """Decision latency and memory per agent at large trees, against a walk-the-tree baseline."""
    out = []
    rng = np.random.default_rng(0)
    for n in sizes:
        tracemalloc.start()
        tree = scale_tree(n, rng)
        memory = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        naive = []
        for _ in range(3):
            t = time.perf_counter()
            _naive_clade_sums(tree)
            naive.append(time.perf_counter() - t)
        for label, name, options, wanted in rows:
            cls = SCHEDULERS.resolve(name)
            scheduler = cls(cls.Config(initial_expansions=0, **options))
            alpha = scheduler.config.alpha
            # evaluations started: 3 per agent (N ** alpha << agents), or enough that N ** alpha >= agents
            started = 3 * n if wanted == "evaluate" else math.ceil((n + 1) ** (1 / alpha))
            state = SearchState(tree, TASKS, Budget(evaluations=10 * started // 3), Usage(started, 0), 0, 0)
            times, expansions = [], 0
            for _ in range(decisions):
                t = time.perf_counter()
                job = scheduler.next_job(state, rng)
                times.append(time.perf_counter() - t)
                expansions += isinstance(job, Expand)
            kind = {0: "evaluate", decisions: "expand"}.get(expansions, f"{expansions}/{decisions} expand")
            out.append(
                {
                    "scheduler": label,
                    "kind": kind,
                    "agents": n,
                    "decision_ms_median": 1e3 * float(np.median(times)),
                    "decision_ms_p95": 1e3 * float(np.percentile(times, 95)),
                    "naive_walk_ms_median": 1e3 * float(np.median(naive)),
                    "bytes_per_agent": memory / n,
                }
            )
    return out


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
    columns = ["scheduler", "kind", "agents", "decision_ms_median", "decision_ms_p95", "naive_walk_ms_median"]
    print_table(rows, [*columns, "speedup_vs_naive", "bytes_per_agent"])
    return 0
