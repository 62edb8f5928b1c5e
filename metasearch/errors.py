"""The small exception hierarchy.

Candidate failures are data (recorded, the search goes on); the exceptions here are for the cases
where something other than the candidate is wrong.
"""

from __future__ import annotations


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


class SandboxViolation(MetasearchError):
    """Sandboxed code broke a rule of the sandbox (filled its disk area, planted a link out of a writable
    mount, wrote ``.git``). The candidate's failure, recorded with this message as the reason."""


class BudgetExhausted(MetasearchError):
    """A study-wide budget (tokens, cost) ran out while a job was running."""
