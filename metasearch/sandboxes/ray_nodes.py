"""Where a study's Ray jobs ran: ``<study>/ray_nodes.jsonl``, one line per job when it starts and ends.

Written by the driver only (the RayRunner), read by ``metasearch status`` through ``node_table``: per node,
jobs running, done and failed, and utilisation (busy seconds over the span the node was seen working). A job
lost with its node is ``lost``: it counts as failed on no node, since Ray reports no node for it.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NODES_FILE = "ray_nodes.jsonl"


class NodeLog:
    def __init__(self, study_dir: Path) -> None:
        self.path = Path(study_dir) / NODES_FILE
        self._lock = threading.Lock()

    def record(self, job_id: str, kind: str, node_id: str | None, started: float, state: str) -> None:
        """One finished task: ``state`` is ``done``, ``failed`` (infrastructure) or ``lost`` (its node
        or worker went away)."""
        line = {
            "job_id": job_id,
            "kind": kind,
            "node_id": node_id,
            "started": round(started, 3),
            "ended": round(time.time(), 3),
            "state": state,
        }
        with self._lock, self.path.open("a") as f:
            f.write(json.dumps(line) + "\n")


@dataclass
class NodeRow:
    node: str
    done: int = 0
    failed: int = 0
    busy_s: float = 0.0
    first: float = float("inf")
    last: float = 0.0

    @property
    def utilisation(self) -> float:
        span = self.last - self.first
        return self.busy_s / span if span > 0 else 0.0


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


def node_table(study_dir: Path) -> list[NodeRow]:
    """Per node (by Ray node id, ``lost`` for tasks whose node went away), sorted by node."""
    rows: dict[str, NodeRow] = {}
    for r in read_records(study_dir):
        node = r.get("node_id") or ("lost" if r.get("state") == "lost" else "unplaced")
        row = rows.setdefault(node, NodeRow(node))
        if r.get("state") == "done":
            row.done += 1
        else:
            row.failed += 1
        row.busy_s += max(0.0, float(r["ended"]) - float(r["started"]))
        row.first, row.last = min(row.first, float(r["started"])), max(row.last, float(r["ended"]))
    return sorted(rows.values(), key=lambda row: row.node)
