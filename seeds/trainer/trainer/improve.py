"""Self-improvement: ``python3 -m trainer.improve PROBLEM_FILE`` asks the LLM for better knob values.

The agent shows the model its knobs (``knobs.json``), their legal ranges (``agent.toml``) and the
problem statement's summary, and asks for a JSON object of new values. Values outside a knob's range are
clipped to it; unknown keys are dropped. Two tries; exit 1 with the reason when neither reply holds JSON
that changes a knob. Standard library only; the LLM is reached through metasearch's gateway socket.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import re
import socket
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OBJECT = re.compile(r"\{[^{}]*\}", re.DOTALL)


class _Unix(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=600)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


def chat(prompt: str) -> str:
    conn = _Unix(os.environ.get("METASEARCH_LLM_SOCKET", "/run/metasearch/llm.sock"))
    body = {"messages": [{"role": "user", "content": prompt}], "temperature": 0.8, "max_tokens": 300}
    conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read().decode("utf-8", "replace")
    if response.status != 200:
        raise RuntimeError(f"LLM endpoint answered {response.status}: {data[:300]}")
    return json.loads(data)["choices"][0]["message"]["content"] or ""


def legal(params: dict, name: str, value: object) -> object | None:
    """``value`` made legal for knob ``name`` (clipped, rounded, or a listed choice), or None."""
    spec = params[name]
    try:
        if spec["type"] == "categorical":
            return next((c for c in spec["choices"] if str(c).lower() == str(value).lower()), None)
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    if not math.isfinite(number):
        return None
    number = min(max(number, spec["low"]), spec["high"])
    return round(number) if spec["type"] == "int" else number


def propose(reply: str, knobs: dict, params: dict) -> dict:
    for match in reversed(OBJECT.findall(reply)):
        try:
            values = json.loads(match)
        except ValueError:
            continue
        if not isinstance(values, dict):
            continue
        new = dict(knobs)
        for name, value in values.items():
            fixed = legal(params, name, value) if name in params else None
            if fixed is not None:
                new[name] = fixed
        if new != knobs:
            return new
    return {}


def main(argv: list[str]) -> int:
    problem = Path(argv[1]).read_text() if len(argv) > 1 else ""
    params = tomllib.loads((ROOT / "agent.toml").read_text())["knobs"]["params"]
    knobs = json.loads((ROOT / "knobs.json").read_text())
    ranges = "\n".join(
        f"- {n}: one of {s['choices']}"
        if s["type"] == "categorical"
        else f"- {n}: {s['type']} in [{s['low']}, {s['high']}]"
        for n, s in params.items()
    )
    scores = "\n".join(line for line in problem.splitlines() if "score" in line.lower())[:1500]
    prompt = (
        "You tune a neural network classifier's training settings. Higher test accuracy is better.\n"
        f"How the current settings scored:\n{scores or '(no scores yet)'}\n\n"
        f"Current settings:\n{json.dumps({k: knobs[k] for k in params if k in knobs})}\n\n"
        f"Allowed values:\n{ranges}\n\n"
        "Reply with one JSON object holding the settings you change and their new values, e.g. "
        '{"lr": 0.01, "epochs": 60}'
    )
    reason = "no reply"
    for _ in range(2):
        reply = chat(prompt)
        new = propose(reply, knobs, params)
        if new:
            (ROOT / "knobs.json").write_text(json.dumps(new, indent=2, sort_keys=True) + "\n")
            changed = {k: new[k] for k in new if new[k] != knobs.get(k)}
            print(f"retuned {', '.join(f'{k}={v}' for k, v in changed.items())}")
            return 0
        reason = f"no JSON object that changes a knob in the reply: {reply[:300]!r}"
        prompt += f"\n\nYour previous reply held no usable JSON object. {reply[:200]!r} is not one."
    print(reason, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
