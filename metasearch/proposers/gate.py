"""The admission gate: the checks a proposed child must pass before it enters the tree.

In order: the diff is non-empty and within size limits; it touches no protected path (the parent's
manifest declares them; ``agent.toml``'s identity and grader files are always protected); the child's
manifest still parses and keeps the parent's rules (same name and smoke command, every protected pattern);
the parent's smoke command passes on the child's code in a sandbox. The rules always come from the
parent's manifest as the archive holds it, never from the child's: a child that set its smoke to ``true``
or unprotected its tests would otherwise admit itself and weaken every descendant's gate. The first failing
check is the rejection reason, recorded as a failed expansion with the diff kept in the logs.

The path rules apply to the changed paths as git lists them (``GitArchive.workspace_change``), not as the
diff's text shows them: git quotes unusual names in a diff header, and a header the gate cannot read would
be a change it never sees. The manifest and the smoke run are checked on the files the child's commit will
hold, not on the proposer's workspace, where a file the child's own ``.gitignore`` hides would still count.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from metasearch.errors import ConfigError
from metasearch.manifest import Manifest, load_manifest
from metasearch.sandboxes.protocol import Limits, Mount, RunSpec, Sandbox

ALWAYS_PROTECTED = ("grader/**", ".grader/**", "**/hidden/**", ".git/**")
_DIFF_PATH = re.compile(r"^diff --git a/(.+?) b/(.+?)$", re.MULTILINE)


class GateConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_diff_bytes: int = Field(200_000, ge=1)
    max_files_changed: int = Field(50, ge=1)
    smoke: bool = True
    smoke_timeout_s: float = Field(300, gt=0)


@dataclass(frozen=True)
class Verdict:
    admitted: bool
    reason: str = ""
    kind: str = "gate"  # the failure class a refusal is recorded with: "gate" or "smoke"


def changed_paths(diff: str) -> list[str] | None:
    """Paths named by a git-style diff's headers (both sides of renames), or None when a header names a
    path git quoted (non-ASCII, ``"``, tab, newline): then only git's own listing can say what changed."""
    headers = [line for line in diff.splitlines() if line.startswith("diff --git ")]
    found = _DIFF_PATH.findall("\n".join(h for h in headers if '"' not in h))
    if len(found) != len(headers):
        return None
    paths: list[str] = []
    for a, b in found:
        paths.extend(p for p in (a, b) if p not in paths)
    return paths


def protected_hit(paths: Sequence[str], patterns: tuple[str, ...] | list[str]) -> str | None:
    for path in paths:
        for pattern in patterns:
            if fnmatch.fnmatch(path, pattern) or path == pattern.rstrip("/*"):
                return f"{path} (protected by {pattern!r})"
    return None


def check(
    diff: str,
    workspace: Path,
    parent_manifest: Manifest,
    sandbox: Sandbox | None,
    config: GateConfig,
    labels: dict[str, str] | None = None,
    *,
    paths: Sequence[str] | None = None,
) -> Verdict:
    """Decide whether a proposed child may enter the tree. Never raises for bad children.

    ``workspace`` holds the child's files exactly as its commit will (``GitArchive.workspace_change``
    writes them); ``paths`` are the changed paths as git lists them. Without ``paths`` they are read from
    the diff's headers, and a header naming a quoted path is a rejection (the gate could not check it)."""
    if not diff.strip():
        return Verdict(False, "empty diff: the proposer changed nothing")
    size = len(diff.encode())
    if size > config.max_diff_bytes:
        return Verdict(False, f"diff too large: {size} bytes > limit {config.max_diff_bytes}")
    if paths is None:
        paths = changed_paths(diff)
        if paths is None:
            return Verdict(False, "the diff names a path the gate cannot read (quoted by git)")
    if len(paths) > config.max_files_changed:
        return Verdict(False, f"too many files changed: {len(paths)} > limit {config.max_files_changed}")
    hit = protected_hit(paths, (*ALWAYS_PROTECTED, *parent_manifest.protected))
    if hit:
        return Verdict(False, f"edits a protected path: {hit}")
    try:
        child_manifest = load_manifest(workspace)
    except ConfigError as exc:
        return Verdict(False, f"manifest no longer valid: {exc}")
    if child_manifest.name != parent_manifest.name:
        return Verdict(
            False, f"manifest name changed from {parent_manifest.name!r} to {child_manifest.name!r}"
        )
    if child_manifest.entry.smoke != parent_manifest.entry.smoke:
        return Verdict(
            False,
            f"manifest weakens the gate: smoke changed from {parent_manifest.entry.smoke!r} "
            f"to {child_manifest.entry.smoke!r}",
        )
    dropped = [p for p in parent_manifest.protected if p not in child_manifest.protected]
    if dropped:
        return Verdict(False, f"manifest weakens the gate: unprotects {dropped}")
    if sandbox is not None:
        return smoke_check(workspace, parent_manifest, sandbox, config, labels)
    return Verdict(True)


def smoke_spec(
    workspace: Path, parent_manifest: Manifest, config: GateConfig, labels: dict[str, str] | None = None
) -> RunSpec | None:
    """The parent's smoke command run on the child's code, or None when the gate runs no smoke check."""
    if not (config.smoke and parent_manifest.entry.smoke):
        return None
    return RunSpec(
        command=parent_manifest.command("smoke", agent_dir="/agent"),
        mounts=(Mount(workspace, "/agent", read_only=True),),
        workdir="/agent",
        env={"PYTHONPATH": "/agent", "HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1"},
        limits=Limits(timeout_s=config.smoke_timeout_s),  # the rest: the sandbox's configured limits
        labels=labels or {},
    )


def smoke_check(
    workspace: Path,
    parent_manifest: Manifest,
    sandbox: Sandbox,
    config: GateConfig,
    labels: dict[str, str] | None = None,
) -> Verdict:
    """The gate's last check (after the static ones): the parent's smoke command passes on the child."""
    spec = smoke_spec(workspace, parent_manifest, config, labels)
    if spec is None:
        return Verdict(True)
    result = sandbox.run(spec)
    if not result.ok:
        tail = (result.stdout + result.stderr)[-1500:]
        return Verdict(
            False,
            f"smoke check failed ({result.reason or 'exit ' + str(result.exit_code)}): {tail}",
            kind="smoke",
        )
    return Verdict(True)
