"""Edits read from what a language model wrote, and applied to a workspace.

Three formats are read, whichever the prompt asked for (small models mix them up):

* whole file: a fenced block whose info string or preceding line names an existing file
  (``knobs.json`` / ``File: trainer/model.py`` / ```` ```json knobs.json ````): the block replaces it;
* search/replace: a file name, then ``<<<<<<< SEARCH``, the old lines, ``=======``, the new lines and
  ``>>>>>>> REPLACE``; the old lines are found exactly, else ignoring trailing whitespace, else ignoring
  indentation, and must be found once;
* unified diff in a ```` ```diff ```` block: ``git apply --recount``; when git refuses it, each hunk is
  applied as a search/replace of its context and removed lines (so wrong line numbers and counts do not
  matter, and an ambiguous or absent anchor is still refused).

Every refusal is an ``EditError`` whose ``kind`` classifies it (``no_edit``, ``unknown_file``,
``apply_failed``, ``no_change``, ``truncated``); the message is fit to show the model on a retry.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

FENCE = re.compile(r"^```[ \t]*([^\n`]*)\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
OPEN_FENCE = re.compile(r"^```", re.MULTILINE)
SEARCH_REPLACE = re.compile(
    r"^<{5,9} ?SEARCH[^\n]*\n(.*?)^={5,9}[ \t]*\n(.*?)^>{5,9} ?REPLACE[^\n]*$", re.DOTALL | re.MULTILINE
)
LANGS = {"json", "python", "py", "toml", "yaml", "yml", "text", "txt", "bash", "sh", "markdown", "md", "ini"}
DIFF_LANGS = {"diff", "patch", "udiff"}
NAME = r"[\w./-]+\.\w+|[\w./-]*Makefile"


class EditError(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Edit:
    path: str
    search: str | None  # None: replace the whole file with ``replace``
    replace: str


def parse(text: str, files: set[str]) -> tuple[list[Edit], list[str]]:
    """The edits in ``text`` and the unified diffs (applied by ``apply``); ``files`` are the workspace's
    paths, for resolving a file name the model wrote. EditError ``truncated`` for an unclosed block."""
    edits: list[Edit] = []
    diffs: list[str] = []
    consumed: list[tuple[int, int]] = []
    for match in SEARCH_REPLACE.finditer(text):
        path = _resolve(_name_before(text, match.start()), files)
        edits.append(Edit(path, match.group(1), match.group(2)))
        consumed.append(match.span())
    for match in FENCE.finditer(text):
        if any(a <= match.start() < b or match.start() <= a < match.end() for a, b in consumed):
            continue  # a search/replace block inside a fence: taken above
        info, body = match.group(1).strip(), match.group(2)
        lang, _, named = info.partition(" ")
        if lang.lower() in DIFF_LANGS or (not info and body.lstrip().startswith(("--- ", "diff --git"))):
            diffs.append(body)
            continue
        name = named.strip() or (lang if lang.lower() not in LANGS and "." in lang else "")
        name = name or _name_before(text, match.start())
        if not name:
            continue  # an example or a shell command, not an edit
        edits.append(Edit(_resolve(name, files), None, body))
    if not edits and not diffs:
        if "<<<<<<< SEARCH" in text or len(OPEN_FENCE.findall(text)) % 2:
            raise EditError("truncated", "the reply ends inside an edit block (unclosed ``` or SEARCH block)")
        raise EditError("no_edit", "no edit found: name the file on the line before each fenced block")
    return edits, diffs


def apply(workspace: Path, edits: list[Edit], diffs: list[str]) -> list[str]:
    """Apply everything or nothing; the paths changed. EditError when an edit does not apply or changes
    nothing (the workspace is then as it was)."""
    files = workspace_files(workspace)
    new: dict[str, str] = {}
    by_git: list[str] = []

    def current(path: str) -> str:
        if path not in new:
            new[path] = (workspace / path).read_text()
        return new[path]

    for diff in diffs:
        if _git_apply(workspace, diff, check=True):
            by_git.append(diff)
            continue
        for edit in hunks_as_edits(diff, files):
            new[edit.path] = _replace_once(current(edit.path), edit)
    for edit in edits:
        new[edit.path] = edit.replace if edit.search is None else _replace_once(current(edit.path), edit)
    changed = [p for p, body in new.items() if (workspace / p).read_text() != body]
    if not changed and not by_git:
        raise EditError("no_change", "the edit leaves every file as it was")
    touched = set(changed) | {p for diff in by_git for p in _diff_paths(diff, files)}
    before = {p: (workspace / p).read_bytes() for p in touched if (workspace / p).is_file()}
    try:
        for path in changed:
            (workspace / path).write_text(new[path])
        for diff in by_git:
            if not _git_apply(workspace, diff, check=False):
                raise EditError("apply_failed", "a diff no longer applies after the other edits of the reply")
    except EditError:
        for path in touched - set(before):
            (workspace / path).unlink(missing_ok=True)
        for path, data in before.items():
            (workspace / path).write_bytes(data)
        raise
    return sorted(touched)


def _diff_paths(diff: str, files: set[str]) -> set[str]:
    paths = set()
    for line in diff.splitlines():
        if line.startswith(("+++ ", "--- ")):
            name = line[4:].strip().split("\t")[0]
            if name != "/dev/null":
                paths.add(name.removeprefix("a/").removeprefix("b/"))
    return paths


def hunks_as_edits(diff: str, files: set[str]) -> list[Edit]:
    """A unified diff read as search/replace edits, one per hunk (line numbers ignored)."""
    edits: list[Edit] = []
    path = ""
    old: list[str] = []
    fresh: list[str] = []

    def flush() -> None:
        if old or fresh:
            if not path:
                raise EditError("apply_failed", "a diff hunk names no file (+++ b/PATH)")
            edits.append(Edit(path, "".join(old), "".join(fresh)))
        old.clear()
        fresh.clear()

    for line in diff.splitlines(keepends=True):
        if line.startswith("+++ "):
            flush()
            path = _resolve(line[4:].strip().split("\t")[0].removeprefix("b/"), files)
        elif line.startswith(("--- ", "diff --git", "index ", "@@")):
            flush()
        elif line.startswith("-"):
            old.append(line[1:])
        elif line.startswith("+"):
            fresh.append(line[1:])
        elif line.startswith(" ") or line in ("\n", ""):
            old.append(line[1:] if line.startswith(" ") else line)
            fresh.append(line[1:] if line.startswith(" ") else line)
    flush()
    if not edits:
        raise EditError("apply_failed", "the diff holds no hunk")
    return edits


def _replace_once(body: str, edit: Edit) -> str:
    assert edit.search is not None
    if not edit.search.strip():
        raise EditError("apply_failed", f"{edit.path}: an empty SEARCH part matches nowhere in particular")
    for normalise in (_exact, _rstrip, _strip):
        lines = body.splitlines(keepends=True)
        want = [normalise(x) for x in edit.search.splitlines()]
        have = [normalise(x) for x in lines]
        hits = [i for i in range(len(have) - len(want) + 1) if have[i : i + len(want)] == want]
        if len(hits) > 1:
            raise EditError(
                "apply_failed", f"{edit.path}: the SEARCH lines occur {len(hits)} times; quote more of them"
            )
        if hits:
            i = hits[0]
            replacement = (
                edit.replace if edit.replace.endswith("\n") or not edit.replace else edit.replace + "\n"
            )
            return "".join(lines[:i]) + replacement + "".join(lines[i + len(want) :])
    first = edit.search.strip().splitlines()[0][:80]
    raise EditError("apply_failed", f"{edit.path}: the SEARCH lines are not in the file (first: {first!r})")


def _exact(line: str) -> str:
    return line.rstrip("\n")


def _rstrip(line: str) -> str:
    return line.rstrip()


def _strip(line: str) -> str:
    return line.strip()


def _name_before(text: str, start: int) -> str:
    """The file name on the last non-empty line before ``start``, stripped of markdown around it."""
    for line in reversed(text[:start].splitlines()[-3:]):
        line = line.strip()
        if not line:
            continue
        line = re.sub(r"^([#*_`\s-]+|\d+\.\s*)", "", line)  # "**# Knobs.json**", "- `x.py`", "2. x.py"
        line = re.sub(r"^(file|path|filename|in)\s*:?\s*", "", line, flags=re.IGNORECASE)
        candidate = line.strip("`*_:'\"# ")
        if re.fullmatch(NAME, candidate):
            return candidate
        trailing = re.search(rf"`?({NAME})`?\s*:\s*$", line)  # "Here is the new `knobs.json`:"
        return trailing.group(1) if trailing else ""
    return ""


def _resolve(name: str, files: set[str]) -> str:
    """``name`` as one of ``files``: as written, without a leading ``./``, ``a/``, ``b/`` or ``/agent/``,
    or the one file with that base name. EditError ``unknown_file`` otherwise."""
    if not name:
        raise EditError(
            "unknown_file", "an edit block names no file; write the file's path on the line before it"
        )
    clean = name.strip().removeprefix("/agent/").removeprefix("./")
    for candidate in (clean, clean.removeprefix("a/"), clean.removeprefix("b/")):
        if candidate in files:
            return candidate
    folded = {f.lower(): f for f in files}
    if clean.lower() in folded:  # "Knobs.json"
        return folded[clean.lower()]
    base = PurePosixPath(clean).name.lower()
    same = [f for f in files if PurePosixPath(f).name.lower() == base]
    if len(same) == 1:
        return same[0]
    known = ", ".join(sorted(files)[:20])
    raise EditError("unknown_file", f"{name!r} is not a file of the agent (its files: {known})")


def workspace_files(workspace: Path) -> set[str]:
    """The workspace's regular files (no links: an edit never writes through one), relative paths."""
    return {
        p.relative_to(workspace).as_posix()
        for p in workspace.rglob("*")
        if p.is_file() and not p.is_symlink() and ".git" not in p.relative_to(workspace).parts
    }


def _git_apply(workspace: Path, diff: str, *, check: bool) -> bool:
    with tempfile.NamedTemporaryFile("w", suffix=".patch", delete=False) as f:
        f.write(diff if diff.endswith("\n") else diff + "\n")
    command = ["git", "-C", str(workspace), "apply", "--whitespace=nowarn", "--recount"]
    try:
        done = subprocess.run(
            [*command, *(["--check"] if check else []), f.name], capture_output=True, timeout=60
        )
    finally:
        Path(f.name).unlink()
    return done.returncode == 0
