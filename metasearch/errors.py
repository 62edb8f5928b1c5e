"""The small exception hierarchy.

Candidate failures are data (recorded, the search goes on); the exceptions here are for the cases
where something other than the candidate is wrong.
"""

from __future__ import annotations

from typing import Any


class MetasearchError(Exception):
    """Base class for every error metasearch raises on purpose."""


class ConfigError(MetasearchError):
    """A configuration is invalid. The message names the key path and, where known, the allowed values."""


class ArchiveError(MetasearchError):
    """The archive is missing, corrupt or was used against its contract."""


class InfrastructureError(MetasearchError):
    """Something outside the candidate failed (Docker daemon down, disk full, LLM upstream down).

    The job that met it is abandoned and re-queued, never recorded as a task failure. ``retryable``
    says whether trying again later may help; ``transient`` that the job was lost with a machine that
    went away (a Ray node) and may simply run elsewhere: it does not count toward stopping the study.
    """

    def __init__(self, message: str, *, retryable: bool = True, transient: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.transient = transient

    def to_dict(self) -> dict[str, Any]:
        """The error as plain data, to cross a process boundary (a Ray task's result)."""
        return {"message": str(self), "retryable": self.retryable, "task_unfit": isinstance(self, TaskUnfit)}

    @staticmethod
    def from_dict(data: dict[str, Any]) -> InfrastructureError:
        """The error ``to_dict`` described."""
        if data.get("task_unfit"):
            return TaskUnfit(str(data["message"]))
        return InfrastructureError(str(data["message"]), retryable=bool(data.get("retryable", True)))


class TaskUnfit(InfrastructureError):
    """One task cannot be graded here, whoever the candidate (its grading needs more memory than the cap, its
    reference solution fails on this machine). The study retires that task (journaled, so a resumed study
    keeps it retired) and goes on with the others; it stops only when no task is left."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


class SandboxViolation(MetasearchError):
    """Sandboxed code broke a rule of the sandbox (filled its disk area, planted a link out of a writable
    mount, wrote ``.git``). The candidate's failure, recorded with this message as the reason."""


class BudgetExhausted(MetasearchError):
    """A study-wide budget (tokens, cost) ran out while a job was running."""
