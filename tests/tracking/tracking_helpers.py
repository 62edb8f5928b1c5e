"""Helpers for the tracking tests: a small real study (GitArchive + Study + a job function standing in for
sandboxes and proposers), a synthetic journal for scale runs, and a real `mlflow server` process."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

import httpx

from metasearch.archive import GitArchive
from metasearch.events import Evaluated, Event, Expanded, ExpansionRejected, Outcome
from metasearch.registry import SCHEDULERS
from metasearch.study import Callback, Study
from metasearch.tracking import store
from metasearch.types import Budget, Evaluate, Evaluation, Expand, Job, Proposal

TASKS = ("t0", "t1", "t2")
VENV_BIN = Path(sys.executable).parent

SEED_TOML = 'name = "tiny"\n[entry]\nsolve = ["python3", "solve.py", "{task_dir}"]\n'
SEED_SOLVE = """import pathlib, sys
task = pathlib.Path(sys.argv[1])
out = task / "output"
out.mkdir(exist_ok=True)
quality = (pathlib.Path(__file__).parent / "quality.txt").read_text().strip()
(out / "answer.txt").write_text(f"solved {task.name} with quality {quality}\\n")
print("done", task.name)
"""


def write_seed(dest: Path, quality: float = 0.3) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "agent.toml").write_text(SEED_TOML)
    (dest / "solve.py").write_text(SEED_SOLVE)
    (dest / "quality.txt").write_text(f"{quality}\n")
    return dest


class FakeSearch:
    """A job function: children get a random quality; evaluations are seeded draws with logs and metrics."""

    def __init__(self, archive: GitArchive, *, fail_every: int = 0) -> None:
        self.archive = archive
        self.fail_every = fail_every
        self.quality: dict[str, float] = {}
        self.calls = Counter[str]()
        self._lock = threading.Lock()

    def __call__(self, job: Job) -> Outcome:
        with self._lock:
            self.calls[job.kind] += 1
            n = self.calls[job.kind]
        log_dir = self.archive.log_dir(job.job_id)
        if isinstance(job, Evaluate):
            q = self.quality.get(job.agent_id, 0.3)
            rng = random.Random(f"{job.agent_id}/{job.task_id}")
            score = float(rng.random() < q)
            (log_dir / "agent.log").write_text(f"agent {job.agent_id} on {job.task_id}: score {score}\n")
            flagged = rng.random() < 0.3 and job.agent_id in self.quality  # seeds (no quality drawn) never
            flags = ("suspicious_speed",) if flagged else ()
            error = "timeout" if rng.random() < 0.15 else None
            ev = Evaluation(
                job.job_id,
                job.agent_id,
                job.task_id,
                score=score,
                metrics={"accuracy": q, "loss@val": 1 - q},
                flags=flags,
                error=error,
                duration_s=0.01,
                log_path=str(log_dir),
                finished_at=time.time(),
            )
            return Evaluated(ev)
        assert isinstance(job, Expand)
        with self.archive.checkout(job.parent_id) as ws:
            q = min(
                1.0, float((ws / "quality.txt").read_text()) + random.Random(job.job_id).uniform(-0.1, 0.3)
            )
            (ws / "quality.txt").write_text(f"{q}\n")
            diff = self.archive.workspace_diff(ws)
            (log_dir / "proposal.diff").write_text(diff)
            if self.fail_every and n % self.fail_every == 0:
                return ExpansionRejected("gate: smoke test failed", diff)
            transcript = log_dir / "transcript.json"
            transcript.write_text(json.dumps([{"role": "user", "content": "improve"}]))
            self.archive.add_usage(job.job_id, 100, 0.002)
            meta = {
                "proposer": "fake",
                "model": "scripted-model",
                "summary": f"quality {q:.2f}",
                "rationale": "raise quality",
                "tokens": 100,
                "cost_usd": 0.002,
                "transcript_path": str(transcript),
                "knobs": {"lr": round(q, 3)},
            }
            agent = self.archive.add_child(job.parent_id, ws, job_id=job.job_id, meta=meta)
        self.quality[agent.id] = q
        return Expanded(agent, Proposal(diff=diff, summary=meta["summary"], tokens=100))


def make_archive(
    root: Path, name: str = "s", *, config: str | None = None, quality: float = 0.3
) -> GitArchive:
    seed = write_seed(root / f"{name}-seed", quality)
    archive = GitArchive.create(root / name, study=name, config_text=config or CONFIG)
    archive.add_seed("tiny", seed, job_id="seed-tiny")
    return archive


CONFIG = """study: {name: s, seeds: [tiny]}
budget: {evaluations: 20}
scheduler: {name: hgm}
suite: {name: training}
llm: {model: scripted-model}
"""


def make_study(archive: GitArchive, *, budget: int, callbacks: Sequence[Callback] = ()) -> Study:
    scheduler = SCHEDULERS.resolve("hgm")
    return Study(
        archive,
        scheduler(scheduler.Config()),
        tasks=TASKS,
        budget=Budget(evaluations=budget),
        callbacks=callbacks,
    )


def run_study(
    archive: GitArchive,
    *,
    budget: int,
    callbacks: Sequence[Callback] = (),
    workers: int = 2,
    fail_every: int = 3,
) -> Study:
    """A whole run (ends with StudyFinished, which closes a mirror callback)."""
    study = make_study(archive, budget=budget, callbacks=callbacks)
    study.run(FakeSearch(archive, fail_every=fail_every), workers=workers)
    return study


def drive(study: Study, search: FakeSearch, jobs: int) -> int:
    """Run ``jobs`` jobs one at a time through ask/tell (no StudyFinished at the end)."""
    done = 0
    for _ in range(jobs):
        job = study.ask()
        if job is None:
            break
        study.tell(job, search(job))
        done += 1
    return done


class TimedCallback:
    """Wraps a callback and records how long each call took on the calling (study) thread."""

    def __init__(self, inner: Callback) -> None:
        self.inner = inner
        self.seconds: list[float] = []

    def __call__(self, study: Study, event: Event) -> None:
        started = time.perf_counter()
        self.inner(study, event)
        self.seconds.append(time.perf_counter() - started)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MlflowServer:
    """A real `mlflow server` process on a SQLite store; ``stop``/``start`` simulate an outage."""

    def __init__(self, root: Path, port: int | None = None) -> None:
        self.root = root
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self, timeout_s: float = 120.0) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        db = f"sqlite:///{self.root / 'server.db'}"
        store.prepare_sqlite(db)  # WAL: faster migrations and writes
        cmd = [
            str(VENV_BIN / "mlflow"), "server", "--backend-store-uri", db,
            "--artifacts-destination", str(self.root / "artifacts"), "--host", "127.0.0.1",
            "--port", str(self.port), "--workers", "1",
        ]  # fmt: skip
        env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
        self._log = open(self.root / "server.log", "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            cmd, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True, cwd=self.root, env=env
        )
        wait_http(self.url + "/health", timeout_s, self.proc)

    def stop(self) -> None:
        """SIGKILL the whole process group (the server runs a uvicorn child): an abrupt outage."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
            self.proc.wait(timeout=30)
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None


def wait_http(url: str, timeout_s: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise TimeoutError(f"{url} did not answer in {timeout_s}s")


def wait_until(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def write_synthetic_study(root: Path, *, agents: int, evals_per_agent: int, seed: int = 0) -> Path:
    """A study directory whose journal (in the archive's documented format) holds ``agents`` agents and
    ``evals_per_agent`` evaluations each, without git commits: the mirror only reads the journal."""
    rng = random.Random(seed)
    root.mkdir(parents=True)
    (root / "config.yaml").write_text(CONFIG)
    lines: list[dict[str, object]] = []
    ts = 1_700_000_000.0

    def emit(event: dict[str, object]) -> None:
        nonlocal ts
        ts += 0.01
        lines.append({"op": event.pop("op"), "ts": round(ts, 6), **event})

    emit({"op": "study_created", "study": root.name})
    quality: list[float] = []
    for i in range(agents):
        parent = None if i == 0 else rng.randrange(max(0, i - 50), i)  # recent parents: a deep, bushy tree
        quality.append(
            0.3 if parent is None else min(1.0, max(0.0, quality[parent] + rng.uniform(-0.1, 0.15)))
        )
        agent_id, job = f"a{i:05d}", f"job-{i:06d}"
        meta = {"job_id": job, "proposer": "fake", "summary": f"quality {quality[i]:.2f}", "tokens": 10}
        emit({"op": "job_started", "job_id": job, "job": {"kind": "expand", "job_id": job, "parent_id": "x"}})
        agent = {
            "id": agent_id, "parent_id": None if parent is None else f"a{parent:05d}", "commit": f"{i:040x}",
            "branch": f"agents/{agent_id}", "created_at": ts, "meta": meta,
        }  # fmt: skip
        emit({"op": "agent_added", "job_id": job, "agent": agent})
        emit({"op": "usage", "job_id": job, "tokens": 10, "cost_usd": 0.0001})
        for t in range(evals_per_agent):
            ej = f"eval-{i:06d}-{t}"
            evaluation = {
                "job_id": ej, "agent_id": agent_id, "task_id": f"t{t}", "score": float(rng.random() < quality[i]),
                "metrics": {"accuracy": quality[i]}, "flags": [], "error": None, "duration_s": 0.1,
                "log_path": None, "finished_at": ts,
            }  # fmt: skip
            emit({"op": "evaluation_recorded", "job_id": ej, "evaluation": evaluation})
    with open(root / "journal.jsonl", "w") as f:
        for line in lines:
            f.write(json.dumps(line, separators=(",", ":")) + "\n")
    return root
