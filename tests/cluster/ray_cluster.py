"""A real multi-node Ray cluster on one machine, for tests: a head and worker nodes as separate raylets.

Every node is its own ``ray start --block`` process in its own session, with its own ports (asked of the OS)
and the head's temp dir under /tmp; ``kill_node`` kills one node's whole session (its raylet and the workers
running its jobs, as a machine dying would) and ``stop`` kills exactly the sessions it started, never
``ray stop``, which would stop every Ray on the machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))
ENV = {**os.environ, "RAY_AUTH_MODE": "disabled"}


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [int(s.getsockname()[1]) for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _node_ports() -> list[str]:
    ports = free_ports(7)
    return [
        f"--node-manager-port={ports[0]}",
        f"--object-manager-port={ports[1]}",
        f"--dashboard-agent-listen-port={ports[2]}",
        f"--dashboard-agent-grpc-port={ports[3]}",
        f"--metrics-export-port={ports[4]}",
        f"--runtime-env-agent-port={ports[5]}",
        "--object-store-memory=150000000",
        "--disable-usage-stats",
        "--block",
    ]


@dataclass
class Node:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path


@dataclass
class Cluster:
    root: Path
    address: str = ""
    nodes: list[Node] = field(default_factory=list)

    def start(self, head_cpus: int, workers: list[dict[str, float]], worker_cpus: int) -> Cluster:
        from ray.util import get_node_ip_address

        port, client = free_ports(2)
        self.address = f"{get_node_ip_address()}:{port}"  # the address the head advertises
        self._spawn("head", [
            "--head", f"--port={port}", f"--num-cpus={head_cpus}", "--num-gpus=0",
            f"--ray-client-server-port={client}", f"--temp-dir={self.root / 'ray'}", "--include-dashboard=false",
        ])  # fmt: skip
        self.wait_for(1)
        for i, resources in enumerate(workers, start=1):  # one at a time: raylets starting together time out
            for attempt in range(3):
                self._spawn(f"worker{i}", [
                    f"--address={self.address}", f"--num-cpus={worker_cpus}", "--num-gpus=0",
                    f"--resources={json.dumps(resources)}",
                ])  # fmt: skip
                try:
                    self.wait_for(1 + i)
                    break
                except RuntimeError:  # a loaded machine: the raylet missed its start deadline
                    failed = self.nodes.pop()
                    kill_session(failed.proc.pid)
                    failed.proc.wait(timeout=30)
                    if attempt == 2:
                        raise
        return self

    def _spawn(self, name: str, args: list[str]) -> None:
        log = self.root / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [RAY, "start", *args, *_node_ports()],
                stdout=out, stderr=subprocess.STDOUT, env=ENV, start_new_session=True,
            )  # fmt: skip
        self.nodes.append(Node(name, proc, log))

    def alive_nodes(self) -> list[dict[str, object]]:
        code = (
            f"import json, ray; ray.init(address={self.address!r}, log_to_driver=False); "
            "print(json.dumps([n for n in ray.nodes() if n['Alive']]))"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=120
        )
        if out.returncode != 0:
            return []
        nodes: list[dict[str, object]] = json.loads(out.stdout.strip().splitlines()[-1])
        return nodes

    def wait_for(self, count: int, timeout_s: float = 180) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if len(self.alive_nodes()) >= count:
                return
            if any(n.proc.poll() is not None for n in self.nodes):
                break
            time.sleep(2)
        logs = "\n".join(f"--- {n.name}\n{n.log.read_text()[-2000:]}" for n in self.nodes)
        raise RuntimeError(f"the Ray cluster did not reach {count} nodes\n{logs}")

    def kill_node(self, name: str) -> None:
        """The whole node dies at once, as a machine would: every process of its session by SIGKILL. Its
        raylet shares the ``ray start`` process group, but each Ray worker leads a process group of its own
        (in the same session), so killing the group alone leaves the workers running jobs alive: they finish
        and hand their results straight to the driver, and no job is lost."""
        kill_session(next(n for n in self.nodes if n.name == name).proc.pid)

    def stop(self) -> None:
        for node in reversed(self.nodes):  # only the sessions started here
            kill_session(node.proc.pid)
            node.proc.wait(timeout=30)


def session_members(sid: int) -> list[int]:
    """The pids of every live process in session ``sid`` (read from /proc: field 6 of ``stat``)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # it exited while we looked
            continue
        if int(fields[3]) == sid:
            pids.append(int(stat.parent.name))
    return pids


def kill_session(sid: int) -> None:
    for pid in session_members(sid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def make_root() -> Path:
    return Path(tempfile.mkdtemp(prefix="i18_ray_", dir="/tmp"))


SEED_MANIFEST = """name = "knn"
description = "k nearest neighbours in numpy: light enough for a cluster test on two shared cores."
protected = ["tests/**"]

[entry]
solve = ["python3", "solve.py", "{task_dir}"]
smoke = ["python3", "-c", "import json, solve; json.load(open('knobs.json'))"]

[knobs]
file = "knobs.json"

[knobs.params.k]
type = "int"
low = 1
high = 25

[knobs.params.scale]
type = "categorical"
choices = ["none", "standard"]
"""
SEED_SOLVE = """import json, sys, time
from pathlib import Path

import numpy as np


def main(task):
    time.sleep(3)  # long enough that a node killed while it runs this loses the job
    knobs = json.loads((Path(__file__).parent / "knobs.json").read_text())
    info = json.loads((task / "task.json").read_text())
    x, test = (np.load(task / n) for n in ("train_x.npy", "test_x.npy"))
    x, test = x.reshape(len(x), -1).astype(float), test.reshape(len(test), -1).astype(float)
    y = np.load(task / "train_y.npy").ravel()
    if knobs["scale"] == "standard":
        mu, sd = x.mean(0), x.std(0) + 1e-9
        x, test = (x - mu) / sd, (test - mu) / sd
    k = min(int(knobs["k"]), len(x))
    pred = []
    for row in test:
        near = y[np.argsort(((x - row) ** 2).sum(1))[:k]]
        pred.append(np.bincount(near.astype(int)).argmax() if info["kind"] == "classification" else near.mean())
    np.save(task / "output" / "predictions.npy", np.asarray(pred))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
"""


def write_seed(dest: Path) -> Path:
    """A knobs-tunable seed whose runs and smoke check take a fraction of a second (no torch)."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "agent.toml").write_text(SEED_MANIFEST)
    (dest / "solve.py").write_text(SEED_SOLVE)
    (dest / "knobs.json").write_text(json.dumps({"k": 5, "scale": "none"}))
    return dest
