"""Where a study's Ray jobs ran: ``<study>/ray_nodes.jsonl``, one line when a task starts and one when it ends.

The study's host actor (on the head, see ``ray_host``) writes the ``started`` line when a task reports in
from its node (with the node's CPU count); the driver writes the end line (``done``, ``failed``, or ``lost``
when the task's worker or node went away). ``metasearch status`` shows ``node_summary``: per node, jobs
running, done and failed (lost ones count as failed on the node they started on), and utilisation: the CPU
seconds its jobs held over the CPU seconds it offered while the study used it.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

NODES_FILE = "ray_nodes.jsonl"


class NodeLog:
    def __init__(self, study_dir: Path) -> None:
        self.path = Path(study_dir) / NODES_FILE
        self._lock = threading.Lock()

    def _append(self, line: dict[str, Any]) -> None:
        with self._lock, self.path.open("a") as f:
            f.write(json.dumps(line) + "\n")

    def started(self, job_id: str, kind: str, node_id: str, node_cpus: float) -> None:
        self._append(
            {
                "job_id": job_id,
                "kind": kind,
                "node_id": node_id,
                "cpus": node_cpus,
                "at": round(time.time(), 3),
                "state": "started",
            }
        )

    def record(
        self, job_id: str, kind: str, node_id: str | None, started: float, state: str, cpus: float = 1.0
    ) -> None:
        """One finished task: ``state`` is ``done``, ``failed`` (infrastructure) or ``lost``; ``cpus``
        is what the task asked for."""
        self._append(
            {
                "job_id": job_id,
                "kind": kind,
                "node_id": node_id,
                "started": round(started, 3),
                "ended": round(time.time(), 3),
                "state": state,
                "ask_cpus": cpus,
            }
        )


def read_records(study_dir: Path) -> list[dict[str, Any]]:
    path = Path(study_dir) / NODES_FILE
    if not path.is_file():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:  # a line cut by a crash
            continue
    return out


def node_summary(study_dir: Path) -> list[dict[str, Any]]:
    """Per node: running, done, failed, utilisation (None when the node's size is unknown)."""
    starts: dict[tuple[str, str], dict[str, Any]] = {}
    rows: dict[str, dict[str, Any]] = {}
    ended: set[tuple[str, str]] = set()

    def row(node: str) -> dict[str, Any]:
        return rows.setdefault(
            node,
            {
                "node": node,
                "running": 0,
                "done": 0,
                "failed": 0,
                "cpu_s": 0.0,
                "cpus": None,
                "span": [None, None],
            },
        )

    records = read_records(study_dir)
    for r in records:
        if r.get("state") == "started":
            starts[(r["job_id"], r["kind"])] = r
            row(r["node_id"])["cpus"] = r.get("cpus")
    for r in records:
        if r.get("state") == "started":
            continue
        key = (r["job_id"], r["kind"])
        ended.add(key)
        node = r.get("node_id") or starts.get(key, {}).get("node_id") or "unknown"
        entry = row(node)
        entry["done" if r.get("state") == "done" else "failed"] += 1
        begin, end = float(starts.get(key, {}).get("at", r["started"])), float(r["ended"])  # queueing aside
        entry["cpu_s"] += max(0.0, end - begin) * float(r.get("ask_cpus", 1.0))
        first, last = entry["span"]
        entry["span"] = [
            begin if first is None else min(first, begin),
            end if last is None else max(last, end),
        ]
    for key, start in starts.items():
        if key not in ended:
            row(start["node_id"])["running"] += 1
    out = []
    for entry in sorted(rows.values(), key=lambda e: e["node"]):
        first, last = entry.pop("span")
        cpus = entry.pop("cpus")
        cpu_s = entry.pop("cpu_s")
        span = (last - first) if first is not None and last is not None else 0.0
        entry["utilisation"] = round(cpu_s / (span * cpus), 3) if cpus and span > 0 else None
        out.append(entry)
    return out


def node_lines(summary: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """``metasearch status`` lines, one per node."""
    lines = []
    for entry in summary:
        used = entry["utilisation"]
        lines.append(
            (
                f"node {entry['node'][:10]}",
                f"running {entry['running']}, done {entry['done']}, failed {entry['failed']}, utilisation "
                + ("unknown" if used is None else f"{used:.0%}"),
            )
        )
    return lines
