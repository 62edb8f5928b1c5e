"""Proposer benchmark: `metasearch bench proposers [--models scripted,smollm2-135m,gemma3-270m]
[--proposers llm-whole,llm-search_replace,llm-diff,self,knobs] [--expansions 6] [--jsonl FILE]`.

For each proposer and model, a real study (git archive, Docker sandboxes when the engine answers, the
admission gate and its smoke run, the training suite's ``smoke`` tasks) expands the trainer seed
``--expansions`` times and evaluates every admitted child on the seed's tasks, so children and parent are
compared on the same tasks (paired). Local models are served by vLLM (``metasearch models prepare NAME``
first); ``scripted`` is a control that always answers with a valid edit in the format asked for. Prints,
per row: proposals, each failure class, admitted, admitted children better than the parent, tokens in and
out and seconds per proposal, tokens per admitted child.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

from metasearch import launch
from metasearch.config import load_config
from metasearch.llm.config import ServeSection
from metasearch.llm.scripted import ScriptedLLM
from metasearch.llm.serve import VLLMServer
from metasearch.schedulers.base import BaseScheduler, SearchState, open_agents, random_unseen_task
from metasearch.types import Expand, Job

ROOT = Path(__file__).resolve().parents[1]
PROPOSERS = {
    "llm-whole": {"name": "llm", "edit_format": "whole"},
    "llm-search_replace": {"name": "llm", "edit_format": "search_replace"},
    "llm-diff": {"name": "llm", "edit_format": "diff"},
    "llm-whole-fp": {"name": "llm", "edit_format": "whole", "frequency_penalty": 0.5},
    "self": {"name": "self", "timeout_s": 300},
    "knobs": {"name": "knobs", "mode": "mutate", "mutate_k": 1, "min_evaluations": 1},
}
CLASSES = (
    "no_edit",
    "unknown_file",
    "apply_failed",
    "no_change",
    "truncated",
    "repetition",
    "gate",
    "smoke",
    "self_improve",
)


class PairedScheduler(BaseScheduler):
    """Evaluate every agent on every task first; then expand the seed, until the expansion budget."""

    def next_job(self, state: SearchState, rng: np.random.Generator) -> Job | None:
        tree = state.tree
        candidates = open_agents(state)
        if len(candidates):
            return random_unseen_task(state, int(candidates[0]), rng)
        if self.can_expand(state):
            return Expand(parent_id=tree.ids[int(np.flatnonzero(tree.view("parent") < 0)[0])])
        return None


def control(body: dict[str, Any]) -> str:
    """The scripted control: a valid edit of knobs.json in whatever format the prompt asks for."""
    prompt = body["messages"][-1]["content"]
    lr = 0.01 + 0.001 * len(prompt) % 0.05
    if prompt.startswith(
        "You tune"
    ):  # the trainer's own self_improve (the meta-agent's prompt lists its code)
        return json.dumps({"lr": round(lr, 4), "epochs": 60})
    knobs = json.loads(re.search(r"--- knobs\.json\n```\n(.*?)\n```", prompt, re.DOTALL).group(1))  # type: ignore[union-attr]
    new = {**knobs, "lr": round(lr, 4), "epochs": 60, "optimizer": "adam"}
    if "<<<<<<< SEARCH" in prompt:
        old = json.dumps(knobs, indent=2, sort_keys=True)
        return f"Retune.\n\nknobs.json\n<<<<<<< SEARCH\n{old}\n=======\n{json.dumps(new, indent=2)}\n>>>>>>> REPLACE\n"
    if "unified diff" in prompt:
        old_lines, new_lines = (
            json.dumps(knobs, indent=2).splitlines(),
            json.dumps(new, indent=2).splitlines(),
        )
        body_lines = [f"-{x}" for x in old_lines] + [f"+{x}" for x in new_lines]
        return (
            "Retune.\n\n```diff\n--- a/knobs.json\n+++ b/knobs.json\n@@ -1 +1 @@\n"
            + "\n".join(body_lines)
            + "\n```\n"
        )
    return f"Retune.\n\nknobs.json\n```json\n{json.dumps(new, indent=2)}\n```\n"


def study_config(proposer: str, base_url: str | None, expansions: int, seed: int) -> dict[str, Any]:
    options = dict(PROPOSERS[proposer])
    if options["name"] == "llm":
        options.update(reply_tokens=512, retries=1)
    config: dict[str, Any] = {
        "study": {"name": f"bench-{proposer}", "seed": seed, "workers": 2, "seeds": ["trainer"]},
        "budget": {"evaluations": 2 * (expansions + 1), "expansions": expansions, "wall_time_s": 3600},
        "scheduler": {"name": "greedy"},
        "proposer": options,
        "suite": {"name": "training", "subset": "smoke"},
        "sandbox": {"name": "auto", "cpus": 1, "memory_mb": 2048},
        "tracking": {"mlflow": {"enabled": False}},
    }
    if base_url is not None:
        config["llm"] = {"base_url": base_url, "api_key_env": None, "max_tokens": 512}
    return config


def run_one(
    proposer: str, model: str, base_url: str | None, expansions: int, seed: int, root: Path
) -> dict[str, Any]:
    import yaml

    path = root / f"{proposer}-{model}.yaml"
    path.write_text(yaml.safe_dump(study_config(proposer, base_url, expansions, seed)))
    started = time.monotonic()
    launched = launch.create(load_config(path), root / f"{proposer}-{model}")
    launched.study.scheduler = PairedScheduler(BaseScheduler.Config())
    try:
        launched.study.run(launched.runner, workers=2)
    finally:
        launched.close()
    return tally(launched, proposer, model, time.monotonic() - started)


def tally(launched: Any, proposer: str, model: str, seconds: float) -> dict[str, Any]:
    index = launched.archive.index
    seed = next(a for a in index.agents.values() if a.parent_id is None)
    scores: dict[str, dict[str, float]] = {}
    for ev in index.evaluations.values():
        scores.setdefault(ev.agent_id, {})[ev.task_id] = ev.score
    children = [a for a in index.agents.values() if a.parent_id is not None]
    better = 0
    for child in children:
        shared = sorted(set(scores.get(child.id, {})) & set(scores.get(seed.id, {})))
        if shared and np.mean([scores[child.id][t] for t in shared]) > np.mean(
            [scores[seed.id][t] for t in shared]
        ):
            better += 1
    kinds = Counter(str(f.get("kind", "other")) for f in index.failed_expansions)
    tokens_in = tokens_out = 0
    for log in (launched.archive.root / "logs").glob("*/*.jsonl"):
        for line in log.read_text().splitlines():
            entry = json.loads(line)
            tokens_in += int(entry.get("prompt_tokens") or 0)
            tokens_out += int(entry.get("completion_tokens") or 0)
    proposals = len(children) + len(index.failed_expansions)
    row: dict[str, Any] = {"proposer": proposer, "model": model, "proposals": proposals}
    row.update({k: kinds.get(k, 0) for k in CLASSES})
    row["other"] = sum(v for k, v in kinds.items() if k not in CLASSES)
    row.update(
        admitted=len(children),
        better=better,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        s_per_proposal=round(seconds / max(1, proposals), 1),
        tokens_per_child=round((tokens_in + tokens_out) / len(children)) if children else None,
    )
    return row


def serve(model: str, stack: ExitStack, root: Path) -> str | None:
    if model == "none":
        return None
    if model == "scripted":
        return stack.enter_context(ScriptedLLM(control, context_tokens=8192)).base_url
    section = ServeSection(
        model=f"local:{model}",
        python=str(ROOT / ".venv-vllm" / "bin" / "python"),
        gpus=[],
        max_model_len=4096,
        extra_args=["--dtype", "float32"],
        env={"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
        startup_timeout_s=900,
    )
    return stack.enter_context(VLLMServer(section, root / f"vllm-{model}.log")).base_url


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="metasearch bench proposers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="scripted,smollm2-135m,gemma3-270m")
    parser.add_argument("--proposers", default="llm-whole,llm-search_replace,llm-diff,self,knobs")
    parser.add_argument("--expansions", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jsonl", type=Path, help="append each row as JSON to this file")
    parser.add_argument("--keep", action="store_true", help="keep the studies (printed folder)")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="ms-bench-proposers-"))
    rows = []
    proposers = args.proposers.split(",")
    try:
        if "knobs" in proposers:
            rows.append(run_one("knobs", "none", None, args.expansions, args.seed, root))
            record(rows[-1], args.jsonl)
        for model in args.models.split(","):
            llm_driven = [p for p in proposers if p != "knobs"]
            if not llm_driven:
                continue
            with ExitStack() as stack:
                url = serve(model, stack, root)
                for proposer in llm_driven:
                    rows.append(run_one(proposer, model, url, args.expansions, args.seed, root))
                    record(rows[-1], args.jsonl)
    finally:
        if args.keep:
            print(f"studies kept in {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    print_table(rows)
    return 0


def record(row: dict[str, Any], jsonl: Path | None) -> None:
    print(json.dumps(row), file=sys.stderr, flush=True)
    if jsonl:
        with jsonl.open("a") as f:
            f.write(json.dumps(row) + "\n")


def print_table(rows: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    if not rows:
        return
    table = Table(*rows[0].keys())
    for row in rows:
        table.add_row(*("-" if v is None else str(v) for v in row.values()))
    Console(width=220).print(table)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
