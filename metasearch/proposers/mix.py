"""``mix``: pick one of several proposers per expansion, by weight (``{llm: 0.8, knobs: 0.2}``).

The pick is a deterministic function of the job id, so a resumed study makes the same choices.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from metasearch.manifest import format_validation_error
from metasearch.proposers.base import ProposalContext, ProposalFailed, Proposer
from metasearch.registry import PROPOSERS
from metasearch.types import Agent, Proposal


class MixProposer:
    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid")
        weights: dict[str, float] = Field(default_factory=lambda: {"llm": 0.8, "knobs": 0.2})
        options: dict[str, dict[str, Any]] = Field(default_factory=dict)
        """Per-proposer options, e.g. ``{llm: {mode: tools}}``."""

        @field_validator("weights")
        @classmethod
        def _weights(cls, value: dict[str, float]) -> dict[str, float]:
            if not value or any(w < 0 for w in value.values()) or sum(value.values()) <= 0:
                raise ValueError("weights must be non-negative with a positive sum")
            unknown = sorted(set(value) - (set(PROPOSERS.names()) - {"mix"}))
            if unknown:
                raise ValueError(
                    f"unknown proposer(s) {unknown}; allowed: {sorted(set(PROPOSERS.names()) - {'mix'})}"
                )
            return value

        @field_validator("options")
        @classmethod
        def _options(
            cls, value: dict[str, dict[str, Any]], info: ValidationInfo
        ) -> dict[str, dict[str, Any]]:
            """Each member's options, checked against its own Config now rather than when the study starts."""
            weights = info.data.get("weights") or {}
            idle = sorted(set(value) - set(weights))
            if idle:
                raise ValueError(f"options for {idle}, which have no weight; members: {sorted(weights)}")
            for name, options in value.items():
                try:
                    PROPOSERS.resolve(name).Config.model_validate(options)
                except ValidationError as exc:
                    raise ValueError(format_validation_error(exc, prefix=name).replace("\n", "; ")) from exc
            return value

    def __init__(self, config: Config, *, study_dir: Path, llm: Any = None, knobs_host: Any = None) -> None:
        self.config = config
        self.members: dict[str, Proposer] = {
            name: PROPOSERS.create(
                name, config.options.get(name), study_dir=study_dir, llm=llm, knobs_host=knobs_host
            )
            for name in sorted(config.weights)
        }

    def choose(self, job_id: str) -> str:
        total = sum(self.config.weights.values())
        u = int.from_bytes(hashlib.sha256(job_id.encode()).digest()[:8], "big") / 2**64 * total
        for name in sorted(self.config.weights):
            u -= self.config.weights[name]
            if u < 0:
                return name
        return sorted(self.config.weights)[-1]

    def uses_model(self, job_id: str) -> bool:
        """Whether the member this job picks calls the study's LLM."""
        uses = getattr(self.members[self.choose(job_id)], "uses_model", None)
        return bool(callable(uses) and uses(job_id))

    def propose(self, parent: Agent, workspace: Path, context: ProposalContext) -> Proposal:
        name = self.choose(context.job_id)
        try:
            proposal = self.members[name].propose(parent, workspace, context)
        except ProposalFailed as exc:
            raise ProposalFailed(f"[{name}] {exc}", kind=exc.kind, tokens=exc.tokens) from exc
        return Proposal(
            diff=proposal.diff,
            summary=proposal.summary,
            rationale=proposal.rationale,
            tokens=proposal.tokens,
            cost_usd=proposal.cost_usd,
            transcript_path=proposal.transcript_path,
            meta={**proposal.meta, "proposer": name},
        )
