"""Short registry names for pluggable parts.

A pluggable config section names its implementation (``scheduler: {name: hgm, alpha: 0.6}``). The
registry maps that name to ``"module:Class"``; the class carries a pydantic ``Config`` model
(``extra="forbid"``) that validates the rest of the section. Imports are lazy so that the CLI starts
fast and optional dependencies are only needed when their plugin is chosen.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from metasearch.errors import ConfigError


class Registry:
    def __init__(self, kind: str, entries: Mapping[str, str]) -> None:
        self.kind = kind
        self._entries = dict(entries)

    def names(self) -> list[str]:
        return sorted(self._entries)

    def register(self, name: str, target: str) -> None:
        """Add ``name`` -> ``"module:Class"`` (for users' own plugins)."""
        self._entries[name] = target

    def resolve(self, name: str) -> Any:
        """The class registered as ``name``; a dotted ``module:Class`` path is accepted too."""
        target = self._entries.get(name)
        if target is None and ":" in name:
            target = name
        if target is None:
            raise ConfigError(
                f"{self.kind}.name: unknown {self.kind} {name!r}; allowed: {', '.join(self.names())}"
            )
        module_name, _, attr = target.partition(":")
        try:
            return getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"{self.kind}.name: cannot load {name!r} ({target}): {exc}") from exc


SCHEDULERS = Registry(
    "scheduler",
    {
        "hgm": "metasearch.schedulers.hgm:HGMScheduler",
        "hgm-paper": "metasearch.schedulers.hgm:HGMPaperScheduler",
        "mcts": "metasearch.schedulers.mcts:MCTSScheduler",
        "dgm": "metasearch.schedulers.dgm:DGMScheduler",
        "gea": "metasearch.schedulers.gea:GEAScheduler",
        "greedy": "metasearch.schedulers.greedy:GreedyScheduler",
        "random": "metasearch.schedulers.random:RandomScheduler",
    },
)

PROPOSERS = Registry(
    "proposer",
    {
        "knobs": "metasearch.proposers.knobs:KnobsProposer",
        "llm": "metasearch.proposers.llm:LLMProposer",
        "self": "metasearch.proposers.self_modify:SelfModifyProposer",
        "mix": "metasearch.proposers.mix:MixProposer",
    },
)

SUITES = Registry(
    "suite",
    {
        "training": "metasearch.suites.training:TrainingSuite",
        "kernels": "metasearch.suites.kernels:KernelsSuite",
        "code-edit": "metasearch.suites.code_edit:CodeEditSuite",
        "kernelbench": "metasearch.suites.kernelbench:KernelBenchSuite",
        "polyglot": "metasearch.suites.polyglot:PolyglotSuite",
        "swebench": "metasearch.suites.swebench:SWEBenchSuite",
    },
)

SANDBOXES = Registry(
    "sandbox",
    {
        "docker": "metasearch.sandboxes.docker:DockerSandbox",
        "local": "metasearch.sandboxes.local:LocalSandbox",
    },
)
