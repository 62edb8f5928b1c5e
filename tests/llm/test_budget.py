"""Budgets that hold under concurrency: many expansions of the ``llm`` meta-agent at once against the
scripted server never spend more tokens than ``budget.tokens``, and the journal counts exactly what the
server reported."""

from __future__ import annotations

import contextlib
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from metasearch import launch
from metasearch.config import load_config
from metasearch.events import ExpansionRejected, InfraFailure
from metasearch.llm.scripted import ScriptedLLM
from metasearch.types import Expand

CAP = 40_000
REPLY = "A long answer without a diff. " + "word " * 3000


def test_concurrent_expansions_never_spend_past_the_token_cap(tmp_path: Path) -> None:
    reported: list[int] = []
    lock = threading.Lock()
    gate = threading.Barrier(4, timeout=5)

    def script(body: dict[str, Any]) -> dict[str, Any]:
        with contextlib.suppress(threading.BrokenBarrierError):  # the first calls overlap in the server
            gate.wait()
        words = REPLY.split()[: body["max_tokens"]]
        prompt = sum(len(str(m["content"]).split()) for m in body["messages"])
        with lock:
            reported.append(prompt + len(words))
        return {"content": " ".join(words), "delay_s": 0.05}

    with ScriptedLLM(script) as llm:
        config = tmp_path / "study.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "study": {"name": "budget", "seeds": ["trainer"], "workers": 16},
                    "budget": {"evaluations": 10, "tokens": CAP},
                    "proposer": {"name": "llm", "mode": "diff"},
                    "suite": {"name": "training", "subset": "smoke", "time_budget_s": 5},
                    "sandbox": {"name": "local"},
                    "llm": {"base_url": llm.base_url, "api_key_env": None, "max_tokens": 4000},
                    "gate": {"smoke": False},
                    "tracking": {"mlflow": {"enabled": False}},
                }
            )
        )
        launched = launch.create(load_config(config), tmp_path / "archive" / "budget")
        try:
            seed = next(iter(launched.archive.index.agents))
            jobs = [Expand(parent_id=seed) for _ in range(24)]
            with ThreadPoolExecutor(16) as pool:
                outcomes = list(pool.map(launched.runner, jobs))
            meter = launched.llm.meter if launched.llm is not None else None
            assert meter is not None and meter.held == 0
        finally:
            launched.close()
    journal = [
        json.loads(x) for x in (tmp_path / "archive" / "budget" / "journal.jsonl").read_text().splitlines()
    ]
    journaled = sum(e["tokens"] for e in journal if e["op"] == "usage")
    # Spend <= cap exactly, and the journal holds what the server reported, call by call.
    assert journaled == sum(reported) == meter.study.tokens <= CAP
    refused = [o for o in outcomes if isinstance(o, InfraFailure) and "token budget" in o.reason]
    assert refused and all(not o.retryable for o in refused), outcomes
    assert all(isinstance(o, ExpansionRejected | InfraFailure) for o in outcomes)  # no diff in the replies
    # Checked only before each call (the old meter), all 24 would have started at 0 used and spent this:
    assert len(jobs) * min(reported) > CAP


def test_reservations_from_many_threads_never_pass_the_caps() -> None:
    """The meter alone: 32 threads reserve, then settle a random share of what they held (or release)."""
    import random

    from metasearch.llm.usage import BudgetExhausted, TokenMeter

    meter = TokenMeter(study_limit=5_000, job_limit=900)
    peaks: list[int] = []

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        job = f"job{seed % 8}"
        for _ in range(200):
            try:
                hold = meter.reserve(job, rng.randint(1, 60), rng.choice([None, 10, 100]))
            except BudgetExhausted:
                continue
            with meter._lock:
                peaks.append(meter.study.tokens + meter.held)
            if rng.random() < 0.2:
                meter.release(hold)
            else:
                completion = rng.randint(0, hold.max_completion or 0)
                meter.settle(hold, rng.randint(0, hold.tokens - (hold.max_completion or 0)), completion)

    with ThreadPoolExecutor(32) as pool:
        list(pool.map(worker, range(32)))
    assert meter.held == 0 and not meter.job_held
    assert max(peaks) <= 5_000 and meter.study.tokens <= 5_000
    assert all(meter.job(f"job{i}").tokens <= 900 for i in range(8))
    assert meter.study.tokens > 4_000  # the budget was used, not refused from the start
