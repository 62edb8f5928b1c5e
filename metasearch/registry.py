"""Short registry names for pluggable parts.

A pluggable config section names its implementation (``scheduler: {name: hgm, alpha: 0.6}``). The
registry maps that name to ``"module:Class"``; the class carries a pydantic ``Config`` model
(``extra="forbid"``) that validates the rest of the section. Imports are lazy so that the CLI starts
fast and optional dependencies are only needed when their plugin is chosen.

A plugin is built as ``cls(config, **keywords)`` with the keywords its kind is built with (none for
schedulers and suites; ``study_dir``, ``llm`` and ``knobs_host`` for proposers, see ``proposers.base``). Its
constructor names each keyword it takes: a ``**kwargs`` that swallows what it does not know would turn a
misspelt keyword into an option silently dropped. ``construct`` names any keyword a constructor does not take.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from metasearch.errors import ConfigError
from metasearch.manifest import format_validation_error


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

    def create(self, name: str, options: Mapping[str, Any] | None = None, **keywords: Any) -> Any:
        """Plugin ``name`` built with ``options`` (checked against its ``Config``) and ``keywords``.
        ConfigError names an unknown plugin, an option its ``Config`` refuses, or a keyword it does not take."""
        cls = self.resolve(name)
        try:
            config = cls.Config.model_validate(dict(options or {}))
        except ValidationError as exc:
            raise ConfigError(format_validation_error(exc, prefix=f"{self.kind} {name!r}")) from exc
        return construct(cls, config, f"{self.kind} {name!r}", **keywords)


def construct(cls: Any, config: Any, what: str, **keywords: Any) -> Any:
    """``cls(config, **keywords)``; ConfigError, naming ``what``, when the constructor takes no keyword of one
    of those names (a constructor with ``**kwargs`` is taken at its word)."""
    try:
        parameters = list(inspect.signature(cls).parameters.values())[1:]  # after the config
    except (TypeError, ValueError):  # no signature to read (a builtin): let the call decide
        parameters = None
    if parameters is not None and not any(p.kind is p.VAR_KEYWORD for p in parameters):
        takes = {p.name for p in parameters if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
        unknown = sorted(set(keywords) - takes)
        if unknown:
            raise ConfigError(
                f"{what}: {cls.__module__}:{cls.__qualname__} takes no keyword "
                f"{', '.join(repr(k) for k in unknown)}; it takes {', '.join(sorted(takes)) or 'none'}"
            )
    return cls(config, **keywords)


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
