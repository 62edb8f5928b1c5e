"""Sandboxes run untrusted agent code: Docker (the real boundary) or local processes (trusted code only)."""

from metasearch.sandboxes.protocol import ExecResult, Limits, Mount, RunSpec, Sandbox, Session

__all__ = ["ExecResult", "Limits", "Mount", "RunSpec", "Sandbox", "Session"]
