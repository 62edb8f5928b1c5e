"""The Proposer interface.

A proposer edits files in a writable workspace (a disposable checkout of the parent's commit). It never
touches git or the archive: the runner turns the workspace change into a diff, the gate decides whether
the child is admitted, and the archive commits it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from metasearch.sandboxes.protocol import Sandbox
from metasearch.types import Agent, Evaluation, Proposal


def module_available(name: str) -> bool:
    """Whether ``name`` can be imported (False also when a parent package is missing)."""
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


class ProposalFailed(Exception):
    """The proposer could not produce a child (garbage model output, tool loop gave up).

    A candidate-level failure: recorded as a failed expansion with this message as its reason.
    """


@dataclass(frozen=True)
class ProposalContext:
    """What a proposer may read about the search. Built by the runner for each expansion job."""

    job_id: str
    study_dir: Path
    log_dir: Path
    sandbox: Sandbox
    suite_description: str
    parent_evaluations: Sequence[Evaluation] = ()
    lineage: Sequence[Agent] = ()  # ancestors, oldest first, excluding the parent
    lineage_scores: Mapping[str, float] = field(default_factory=dict)  # agent id -> own mean score
    agents: Mapping[str, Agent] = field(default_factory=dict)  # every agent so far
    evaluations: Sequence[Evaluation] = ()  # every evaluation so far
    extra: Mapping[str, Any] = field(default_factory=dict)


class Proposer(Protocol):
    def propose(self, parent: Agent, workspace: Path, context: ProposalContext) -> Proposal:
        """Edit ``workspace`` in place; return what was done. Raise ProposalFailed for candidate failures,
        InfrastructureError when something outside the proposer failed."""
        ...
