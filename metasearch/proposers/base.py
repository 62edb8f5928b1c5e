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

from metasearch.proposers.gate import ALWAYS_PROTECTED, protected_hit
from metasearch.sandboxes.protocol import Sandbox
from metasearch.types import Agent, Evaluation, Proposal


def module_available(name: str) -> bool:
    """Whether ``name`` can be imported (False also when a parent package is missing)."""
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


FAILURE_KINDS = (
    "no_edit",  # the reply holds no edit
    "unknown_file",  # an edit names a file the agent does not have
    "apply_failed",  # an edit's anchor is absent or ambiguous, a diff does not apply
    "no_change",  # the edits leave every file as it was
    "truncated",  # the reply hit max_tokens before an edit was complete
    "repetition",  # ... while repeating itself
    "llm_refused",  # the endpoint refused the request (4xx): e.g. a prompt longer than the context
    "tool_loop",  # the tool loop did not SUBMIT within its steps
    "self_improve",  # the agent's own self_improve entry point failed
    "budget",  # the job's token cap was spent
    "gate",  # the admission gate refused the child (protected path, size, manifest)
    "smoke",  # the child failed the parent's smoke command
    "tampered",  # the proposer tampered with the worktree's git link
    "other",
)


class ProposalFailed(Exception):
    """The proposer could not produce a child (garbage model output, tool loop gave up).

    A candidate-level failure: recorded as a failed expansion with this message as its reason and ``kind``
    (one of ``FAILURE_KINDS``) as its class; ``tokens`` were spent on it (already metered per call).
    """

    def __init__(self, message: str, *, kind: str = "other", tokens: int = 0) -> None:
        super().__init__(message)
        self.kind = kind if kind in FAILURE_KINDS else "other"
        self.tokens = tokens


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
    protected: tuple[str, ...] = ()  # the parent manifest's protected patterns (the gate refuses edits there)
    model: str | None = None  # the model this expansion calls (a name of llm.models), chosen by the runner

    def protected_files(self, workspace: Path) -> list[str]:
        """The workspace's files the gate would refuse an edit to."""
        patterns = (*ALWAYS_PROTECTED, *self.protected)
        files = (p.relative_to(workspace).as_posix() for p in workspace.rglob("*") if p.is_file())
        return [f for f in files if protected_hit([f], patterns)]


class Proposer(Protocol):
    """A proposer class is built as ``cls(config, *, study_dir, llm, knobs_host)``: its validated ``Config``,
    the study directory, the study's LLM (an ``LLMService``; on a Ray worker a ``RemoteLLM``; the ``llm``
    config section when the study only checks that it can be built) and, on a Ray worker, the study's host
    actor (``knobs_host``, else None). It takes each keyword, used or not, and no ``**kwargs``: the registry
    names a keyword a constructor does not take (``registry.construct``).

    Also, optionally, ``uses_model(job_id) -> bool``: whether the expansion ``job_id`` calls the study's
    LLM; the runner then chooses its model (``context.model``) and records it. Without it: none."""

    def propose(self, parent: Agent, workspace: Path, context: ProposalContext) -> Proposal:
        """Edit ``workspace`` in place; return what was done. Raise ProposalFailed for candidate failures,
        InfrastructureError when something outside the proposer failed."""
        ...
