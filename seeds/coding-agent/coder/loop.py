"""The tool loop: the model replies with one ```bash block per turn; SUBMIT ends the episode."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

FENCE = re.compile(r"```(?:bash|sh)\n(.*?)```", re.DOTALL)
SYSTEM = (
    "You are a careful software engineer working in a Linux shell. Each reply holds brief reasoning and exactly "
    "one ```bash block; you then see its output. Inspect before you edit; verify your change by running it. "
    "When the task is done, reply with a line `SUBMIT` followed by a one-line summary, and no code block."
)


def load_knobs(root: Path) -> dict:
    path = root / "knobs.json"
    return json.loads(path.read_text()) if path.exists() else {}


def run_command(command: str, cwd: Path, timeout: float, limit: int) -> str:
    try:
        done = subprocess.run(
            ["bash", "-c", command], cwd=cwd, capture_output=True, text=True, timeout=timeout
        )
        out = f"exit code {done.returncode}\n{done.stdout}{done.stderr}"
    except subprocess.TimeoutExpired:
        out = f"timed out after {timeout:.0f}s"
    return (
        out
        if len(out) <= limit
        else out[: limit // 2] + "\n[... output truncated ...]\n" + out[-limit // 2 :]
    )


def episode(task: str, cwd: Path, knobs: dict, chat: Callable[..., str], log=sys.stdout) -> str | None:
    """Work on ``task`` in ``cwd``; returns the submit summary, or None if the step limit ran out."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]
    unusable = 0  # replies in a row with no single command: a model that loops on one sentence never recovers
    for step in range(int(knobs.get("max_steps", 30))):
        reply = chat(
            messages,
            temperature=float(knobs.get("temperature", 0.2)),
            # a turn is brief reasoning and one command: a small model left uncapped fills its context
            max_tokens=int(knobs.get("max_reply_tokens", 768)),
        )
        messages.append({"role": "assistant", "content": reply})
        print(f"--- step {step} model:\n{reply}", file=log, flush=True)
        if re.search(r"^SUBMIT\b", reply, re.MULTILINE):
            return (
                reply.split("SUBMIT", 1)[1].strip().splitlines()[0]
                if reply.split("SUBMIT", 1)[1].strip()
                else "done"
            )
        blocks = FENCE.findall(reply)
        unusable = unusable + 1 if len(blocks) != 1 else 0
        if unusable >= int(knobs.get("max_unusable_replies", 3)):
            print(f"--- gave up: {unusable} replies in a row without one command", file=log, flush=True)
            return None
        if len(blocks) != 1:
            observation = "Reply with exactly one ```bash block, or SUBMIT when done."
        else:
            observation = run_command(
                blocks[0],
                cwd,
                float(knobs.get("step_timeout_s", 120)),
                int(knobs.get("max_output_chars", 6000)),
            )
        print(f"--- step {step} observation:\n{observation}", file=log, flush=True)
        messages.append({"role": "user", "content": observation})
    return None
