"""What each meta-agent model spent and earned, folded from the journal (``ModelLedger``).

The journal holds, per expansion that called a model, a ``model_chosen`` event (the runner writes it
before the proposer starts), the ``usage`` of its calls and how it ended (``agent_added`` or
``expansion_failed``; ``job_abandoned`` when an infrastructure fault took it). From those and the
evaluations the ledger gives the model bandit (``schedulers.model_choice``) its ``Pull`` records and
``status`` and MLflow their per-model tallies. Folding the journal again rebuilds it exactly, so a study
killed at any point loses nothing of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from metasearch.types import CostBasis, Pull


@dataclass
class _Expansion:
    model: str
    tokens: int = 0
    cost_usd: float = 0.0
    parent: str | None = None
    child: str | None = None
    state: Literal["running", "admitted", "failed", "abandoned"] = "running"


@dataclass
class ModelLedger:
    """Per expansion job that chose a model: the model, its usage and its outcome; per agent its
    counted score per task (a flagged evaluation counts 0, as in the clade statistics). Fed every
    journal event in order (``apply``); not thread-safe (the index applies events under its lock)."""

    jobs: dict[str, _Expansion] = field(default_factory=dict)
    scores: dict[str, dict[str, float]] = field(default_factory=dict)

    def apply(self, event: Mapping[str, Any]) -> None:
        op = event.get("op")
        job_id = str(event.get("job_id") or "")
        if op == "evaluation_recorded":
            e = event["evaluation"]
            score = 0.0 if e.get("flags") else float(e["score"])
            self.scores.setdefault(str(e["agent_id"]), {})[str(e["task_id"])] = score
            return
        if op == "model_chosen":
            self.jobs[job_id] = _Expansion(str(event["model"]))
            return
        entry = self.jobs.get(job_id)
        if entry is None:
            return
        if op == "usage":
            entry.tokens += int(event.get("tokens", 0))
            entry.cost_usd += float(event.get("cost_usd", 0.0))
        elif op == "agent_added":
            entry.state, entry.child = "admitted", str(event["agent"]["id"])
            entry.parent = event["agent"].get("parent_id")
        elif op == "expansion_failed":
            entry.state, entry.parent = "failed", event.get("parent_id")
        elif op == "job_abandoned" and entry.state == "running":
            entry.state = "abandoned"

    def model_of(self, job_id: str) -> str | None:
        entry = self.jobs.get(job_id)
        return entry.model if entry is not None else None

    def gain(self, entry: _Expansion) -> float | None:
        """Child minus parent over the tasks both have a score on; 0.0 for a failure; None if unknown."""
        if entry.state == "failed":
            return 0.0
        if entry.state != "admitted" or entry.child is None or entry.parent is None:
            return None
        child, parent = self.scores.get(entry.child, {}), self.scores.get(entry.parent, {})
        shared = [t for t in child if t in parent]
        if not shared:
            return None
        return sum(child[t] - parent[t] for t in shared) / len(shared)

    def pulls(self, cost: CostBasis = "tokens") -> list[Pull]:
        """The bandit's records: every expansion that chose a model, except those abandoned."""
        return [
            Pull(e.model, float(e.tokens) if cost == "tokens" else e.cost_usd, self.gain(e))
            for e in self.jobs.values()
            if e.state != "abandoned"
        ]

    def tallies(self, models: list[str] | None = None) -> dict[str, dict[str, Any]]:
        """Per model (``models`` first, in their order, then any other the journal names): expansions
        finished, children admitted, children better than their parent on the same tasks, their mean gain
        (child minus parent, over the children graded on a task their parent was), the sum of positive
        gains per million tokens (what the bandit weighs), tokens and cost (running and abandoned
        expansions' included), and expansions running."""
        names = list(dict.fromkeys([*(models or []), *(e.model for e in self.jobs.values())]))
        out: dict[str, dict[str, Any]] = {}
        for name in names:
            mine = [e for e in self.jobs.values() if e.model == name]
            gains = [g for e in mine if e.state == "admitted" and (g := self.gain(e)) is not None]
            tokens = sum(e.tokens for e in mine)
            positive = sum(max(0.0, g) for g in gains)
            out[name] = {
                "expansions": sum(e.state in ("admitted", "failed") for e in mine),
                "children": sum(e.state == "admitted" for e in mine),
                "better": sum(g > 0 for g in gains),
                "mean_gain": round(sum(gains) / len(gains), 6) if gains else None,
                "gain_per_mtok": round(positive * 1e6 / tokens, 6) if tokens else None,
                "tokens": tokens,
                "cost_usd": round(sum(e.cost_usd for e in mine), 6),
                "running": sum(e.state == "running" for e in mine),
            }
        return out
