"""Archive benchmark: `python bench/archive.py [--agents 10000] [--events 100000] [--json]`.

Measures, with a baseline taken in the same run:
  add      GitArchive.add_child (commit + branch + journal) vs a plain `git add -A && git commit`
  replay   Journal.replay of an E-event journal vs json.loads of every line
  query    get() and agents() on the full archive vs a plain dict lookup / list copy
  open     GitArchive.open of the full study (replay, branch reconciliation, sweeps) vs replay alone
  snapshot SearchState build + hgm decision at 1/10 and all of the agents (must scale no worse than linearly)
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

import numpy as np

from metasearch.archive import GitArchive, Journal
from metasearch.registry import SCHEDULERS
from metasearch.schedulers.base import SearchState
from metasearch.schedulers.cmp import SearchTree
from metasearch.types import Budget, Evaluation, Usage


def _ms(samples: list[float]) -> tuple[float, float]:
    return 1e3 * statistics.median(samples), 1e3 * float(np.percentile(samples, 95))


def bench_add(root: Path, n: int) -> tuple[dict, GitArchive]:
    seed = root / "seed"
    seed.mkdir()
    (seed / "agent.toml").write_text('name = "b"\n[entry]\nsolve = ["true"]\n')
    (seed / "code.py").write_text("X = 0\n")
    archive = GitArchive.create(root / "study", study="bench", config_text="{}\n")
    archive.add_seed("b", seed, job_id="seed")
    ws = root / "ws"
    ws.mkdir()
    (ws / "agent.toml").write_text((seed / "agent.toml").read_text())
    rng = np.random.default_rng(0)
    ids = [archive.agents()[0].id]
    times = []
    for i in range(n):
        (ws / "code.py").write_text(f"X = {i}\n")
        t = time.perf_counter()
        agent = archive.add_child(ids[int(rng.integers(len(ids)))], ws, job_id=f"j{i}")
        times.append(time.perf_counter() - t)
        ids.append(agent.id)
        archive.record(Evaluation(f"e{i}", agent.id, "t0", float(rng.random() < 0.5)))
    plain = root / "plain"
    subprocess.run(["git", "init", "-q", str(plain)], check=True)
    base = []
    for i in range(min(n, 300)):
        (plain / "code.py").write_text(f"X = {i}\n")
        t = time.perf_counter()
        subprocess.run(["git", "-C", str(plain), "add", "-A"], check=True)
        subprocess.run(
            ["git", "-C", str(plain), "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "-m", "x"],
            check=True,
        )
        base.append(time.perf_counter() - t)
    med, p95 = _ms(times)
    return {
        "operation": "add agent",
        "n": n,
        "median_ms": med,
        "p95_ms": p95,
        "total_s": sum(times),
        "baseline": "git add+commit",
        "baseline_median_ms": _ms(base)[0],
        "target": "<= 30 ms median",
        "ok": med <= 30,
    }, archive


def bench_replay(root: Path, events: int) -> dict:
    path = root / "journal.jsonl"
    journal = Journal(path)
    lines = []
    agents = max(1, events // 10)
    for i in range(agents):
        agent = {
            "id": f"a{i:05d}",
            "parent_id": None if i == 0 else f"a{(i - 1) // 3:05d}",
            "commit": "0" * 40,
            "branch": f"agents/a{i:05d}",
            "created_at": 0.0,
            "meta": {"job_id": f"j{i}", "summary": "x" * 40},
        }
        lines.append({"op": "agent_added", "ts": 0.0, "job_id": f"j{i}", "agent": agent})
    for i in range(events - agents):
        ev = {
            "job_id": f"e{i}",
            "agent_id": f"a{i % agents:05d}",
            "task_id": f"t{i % 60}",
            "score": 1.0,
            "metrics": {"acc": 0.5},
            "flags": [],
            "error": None,
            "duration_s": 1.0,
            "log_path": None,
            "finished_at": 0.0,
        }
        lines.append({"op": "evaluation_recorded", "ts": 0.0, "job_id": f"e{i}", "evaluation": ev})
    path.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in lines))
    times, base = [], []
    for _ in range(3):
        t = time.perf_counter()
        index = journal.replay()
        times.append(time.perf_counter() - t)
        t = time.perf_counter()
        _ = [json.loads(line) for line in path.read_bytes().split(b"\n") if line]
        base.append(time.perf_counter() - t)
    assert len(index.evaluations) == events - agents
    med = statistics.median(times)
    return {
        "operation": "replay journal",
        "n": events,
        "median_ms": 1e3 * med,
        "p95_ms": 1e3 * max(times),
        "total_s": sum(times),
        "baseline": "json.loads per line",
        "baseline_median_ms": 1e3 * statistics.median(base),
        "target": "<= 2 s",
        "ok": med <= 2.0,
    }


def bench_query(archive: GitArchive) -> list[dict]:
    """get() per agent and agents() (the whole list), against a plain dict lookup / list copy."""
    ids = list(archive.index.agents)
    plain = dict(archive.index.agents)
    get_t, base_t = [], []
    for agent_id in ids:
        t = time.perf_counter()
        archive.get(agent_id)
        get_t.append(time.perf_counter() - t)
        t = time.perf_counter()
        plain.get(agent_id)  # the baseline: a bare dict lookup
        base_t.append(time.perf_counter() - t)
    list_t, list_base = [], []
    for _ in range(50):
        t = time.perf_counter()
        archive.agents()
        list_t.append(time.perf_counter() - t)
        t = time.perf_counter()
        list(plain.values())
        list_base.append(time.perf_counter() - t)
    rows = []
    for name, times, base, n in (("get(id)", get_t, base_t, len(ids)), ("agents()", list_t, list_base, 50)):
        med, p95 = _ms(times)
        rows.append(
            {
                "operation": name,
                "n": n,
                "median_ms": med,
                "p95_ms": p95,
                "total_s": sum(times),
                "baseline": "dict lookup" if name == "get(id)" else "list(dict.values())",
                "baseline_median_ms": _ms(base)[0],
                "target": "-",
                "ok": True,
            }
        )
    return rows


def bench_open(archive: GitArchive) -> dict:
    """Index rebuild: reopen the study (replay + branch reconciliation + sweeps) vs replay alone."""
    times, base = [], []
    for _ in range(3):
        t = time.perf_counter()
        GitArchive.open(archive.root)
        times.append(time.perf_counter() - t)
        t = time.perf_counter()
        Journal(archive.root / "journal.jsonl").replay()
        base.append(time.perf_counter() - t)
    med, p95 = _ms(times)
    return {
        "operation": "open study (rebuild index)",
        "n": len(archive.index.agents),
        "median_ms": med,
        "p95_ms": p95,
        "total_s": sum(times),
        "baseline": "journal replay only",
        "baseline_median_ms": _ms(base)[0],
        "target": "-",
        "ok": True,
    }


def bench_snapshot(archive: GitArchive) -> dict:
    agents = list(archive.index.agents.values())
    evaluations = list(archive.index.evaluations.values())
    cls = SCHEDULERS.resolve("hgm")
    scheduler = cls(cls.Config(initial_expansions=0))
    tasks = tuple(f"t{i}" for i in range(60))
    per_size = {}
    for size in (max(1, len(agents) // 10), len(agents)):
        tree = SearchTree()
        keep = {a.id for a in agents[:size]}
        for a in agents[:size]:
            tree.add_agent(a.id, a.parent_id if a.parent_id in keep else None)
        for ev in evaluations:
            if ev.agent_id in keep:
                tree.add_result(ev.agent_id, ev.task_id, ev.score)
        rng = np.random.default_rng(0)
        times = []
        for _ in range(200):
            t = time.perf_counter()
            state = SearchState(
                tree, tasks, Budget(evaluations=10**6), Usage(evaluations=len(evaluations)), 0, 0
            )
            scheduler.next_job(state, rng)
            times.append(time.perf_counter() - t)
        per_size[size] = statistics.median(times)
    small, large = sorted(per_size)
    growth = per_size[large] / per_size[small]
    return {
        "operation": "snapshot + decision",
        "n": large,
        "median_ms": 1e3 * per_size[large],
        "p95_ms": float("nan"),
        "total_s": 0.0,
        "baseline": f"same at n={small}",
        "baseline_median_ms": 1e3 * per_size[small],
        "target": f"growth <= {large / small:.0f}x (linear)",
        "ok": growth <= large / small,
    }


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="metasearch bench archive", description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ms-bench-") as tmp:
        root = Path(tmp)
        add, archive = bench_add(root, args.agents)
        rows = [
            add,
            bench_replay(root, args.events),
            *bench_query(archive),
            bench_open(archive),
            bench_snapshot(archive),
        ]
    for r in rows:
        r["ratio_vs_baseline"] = (
            r["median_ms"] / r["baseline_median_ms"] if r["baseline_median_ms"] else float("nan")
        )
    if args.json:
        print(json.dumps(rows))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(
        "operation", "n", "median ms", "p95 ms", "baseline", "baseline median ms", "ratio", "target", "ok"
    )
    for r in rows:
        table.add_row(
            r["operation"],
            str(r["n"]),
            f"{r['median_ms']:.3f}",
            f"{r['p95_ms']:.3f}",
            r["baseline"],
            f"{r['baseline_median_ms']:.3f}",
            f"{r['ratio_vs_baseline']:.2f}",
            r["target"],
            "yes" if r["ok"] else "NO",
        )
    Console(width=220).print(table)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
