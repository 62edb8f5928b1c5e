"""Per-node status from ``ray_nodes.jsonl``: running, done, failed (lost jobs on the node they started on)
and utilisation."""

from __future__ import annotations

from pathlib import Path

from metasearch.cluster.ray_nodes import NodeLog, node_lines, node_summary


def test_per_node_counts_and_utilisation(tmp_path: Path) -> None:
    log = NodeLog(tmp_path)
    for job, kind, node, cpus, at in [
        ("j1", "evaluate", "nodeA", 2.0, 100.0),
        ("j2", "expand", "nodeA", 2.0, 100.0),
        ("j3", "evaluate", "nodeB", 4.0, 100.0),
        ("j4", "smoke", "nodeB", 4.0, 118.0),
    ]:
        log._append(
            {"job_id": job, "kind": kind, "node_id": node, "cpus": cpus, "at": at, "state": "started"}
        )
    log.started("j9", "evaluate", "nodeC", 1.0)  # the real writer, for its format
    log._append({"job_id": "j1", "kind": "evaluate", "node_id": "nodeA", "started": 100.0, "ended": 110.0, "state": "done", "ask_cpus": 1.0})  # fmt: skip
    log._append({"job_id": "j2", "kind": "expand", "node_id": None, "started": 100.0, "ended": 105.0, "state": "lost", "ask_cpus": 1.0})  # fmt: skip
    log._append(
        {
            "job_id": "j3",
            "kind": "evaluate",
            "node_id": "nodeB",
            "started": 90.0,
            "ended": 120.0,
            "state": "done",
            "ask_cpus": 2.0,
        }
    )  # fmt: skip (queued 10 s)
    (tmp_path / "ray_nodes.jsonl").open("a").write('{"job_id": "j5", "kind"')  # a line cut by a crash
    rows = {row["node"]: row for row in node_summary(tmp_path)}
    assert rows["nodeA"] == {"node": "nodeA", "running": 0, "done": 1, "failed": 1, "utilisation": 0.75}
    assert rows["nodeB"] == {"node": "nodeB", "running": 1, "done": 1, "failed": 0, "utilisation": 0.5}
    assert rows["nodeC"] == {"node": "nodeC", "running": 1, "done": 0, "failed": 0, "utilisation": None}
    lines = dict(node_lines(node_summary(tmp_path)))
    assert lines["node nodeA"] == "running 0, done 1, failed 1, utilisation 75%"


def test_a_study_without_ray_has_no_nodes(tmp_path: Path) -> None:
    assert node_summary(tmp_path) == [] and node_lines([]) == []
