"""Handing an agent to production: its code as a folder with its own requirements, and task folders to run
it on.

``export_agent`` (``metasearch export``) writes an agent's files into an empty folder (``force`` empties a
used one first; merging two agents' files silently is never right) plus ``requirements.txt``: the agent's
own when it ships one, else ``agent_requirements`` (what its Python code imports, pinned to the versions
installed here). The promoted pyfunc declares the same list.

``prepare_task`` (``metasearch task prepare``) writes a task's visible files, as the agent sees them in its
sandbox, into ``DIR/task`` and the request body for the model into ``DIR/input.json``, ready for
``mlflow models predict -i DIR/input.json`` and for ``POST /invocations`` of ``mlflow models serve``.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import logging
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from metasearch.archive import GitArchive
from metasearch.config import build_suite, study_config
from metasearch.errors import ConfigError

log = logging.getLogger(__name__)

REQUIREMENTS = "requirements.txt"
_SKIP_DIRS = {"tests", "test", "__pycache__", ".git"}
_LOCAL_VERSION = re.compile(r"\+.*$")


def agent_requirements(agent_dir: Path) -> list[str]:
    """The agent's pip requirements: the lines of its own ``requirements.txt`` when it ships one; else one
    ``name==version`` per installed distribution its code imports (standard library, the agent's own
    modules and its tests left out; a local version label such as ``+cpu`` dropped, so the pin resolves
    on PyPI). A module not installed here is listed by its name, unpinned, with a warning; a ``.py`` file
    that cannot be read or parsed (bad syntax or encoding, nested too deeply) is skipped with a warning.
    ConfigError when the agent's own ``requirements.txt`` is not UTF-8."""
    agent_dir = Path(agent_dir)
    own = agent_dir / REQUIREMENTS
    if own.is_file() and not own.is_symlink():
        try:
            text = own.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{own}: the agent's {REQUIREMENTS} is not UTF-8 text ({exc.reason})") from exc
        lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
        return [line for line in lines if line]
    local = {p.stem for p in agent_dir.glob("*.py")} | {p.name for p in agent_dir.iterdir() if p.is_dir()}
    modules: set[str] = set()
    for path in sorted(agent_dir.rglob("*.py")):
        rel = path.relative_to(agent_dir)
        if _SKIP_DIRS & set(rel.parts[:-1]) or rel.name.startswith("test_") or path.is_symlink():
            continue
        try:  # the agent's own code: any failure (SyntaxError, RecursionError, MemoryError...) skips the file
            tree = ast.parse(path.read_text(), str(rel))
        except Exception as exc:
            log.warning("%s: not parsed for requirements: %s: %s", rel, type(exc).__name__, exc)
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    modules -= local | set(sys.stdlib_module_names) | {"__future__"}
    dists = importlib.metadata.packages_distributions()
    found: dict[str, str] = {}
    for module in sorted(modules):
        names = dists.get(module)
        if not names:
            log.warning("the agent imports %s, which is not installed here; listed unpinned", module)
            found.setdefault(module.lower(), module)
            continue
        for name in names:
            version = _LOCAL_VERSION.sub("", importlib.metadata.version(name))
            found.setdefault(name.lower(), f"{name}=={version}")
    return [found[k] for k in sorted(found)]


def export_agent(study_dir: Path, agent_id: str, dest: Path, *, force: bool = False) -> list[str]:
    """Write ``agent_id``'s files and its ``requirements.txt`` into ``dest``; returns the requirements.
    ConfigError when ``dest`` is a file, or a non-empty folder and ``force`` is not set (``force`` removes
    what the folder holds first); ArchiveError for an unknown agent."""
    dest = Path(dest)
    empty_folder(dest, force=force, option="--force")
    with GitArchive.open(study_dir, readonly=True) as archive:
        archive.export(agent_id, dest)
    requirements = agent_requirements(dest)
    if not (dest / REQUIREMENTS).exists():
        (dest / REQUIREMENTS).write_text("".join(f"{line}\n" for line in requirements))
    return requirements


def empty_folder(dest: Path, *, force: bool, option: str) -> None:
    """Make ``dest`` an empty folder: create it, or with ``force`` empty it; else refuse a used one."""
    if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
        raise ConfigError(f"{dest}: exists and is not a folder")
    if dest.is_dir() and any(dest.iterdir()):
        if not force:
            raise ConfigError(f"{dest}: folder is not empty; pick another or pass {option} to replace it")
        for child in dest.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
    dest.mkdir(parents=True, exist_ok=True)


def prepare_task(
    suite_name: str, task_id: str, dest: Path, *, study_dir: Path | None = None, force: bool = False
) -> dict[str, Any]:
    """Write task ``task_id`` of ``suite_name`` into ``dest/task`` and the model input into
    ``dest/input.json``; returns the paths. The suite takes the study's options when ``study_dir`` ran
    the same suite. ConfigError names the suite, or the task with the suite's task ids."""
    suite = build_suite(suite_name, study_config(study_dir) if study_dir is not None else None)
    ids = [t.id for t in suite.tasks("all")]
    if task_id not in ids and f"{suite_name}/{task_id}" in ids:
        task_id = f"{suite_name}/{task_id}"
    if task_id not in ids:
        raise ConfigError(
            f"task {task_id!r}: not a task of suite {suite_name!r}; its tasks: {', '.join(ids)}"
        )
    dest = Path(dest).absolute()
    empty_folder(dest, force=force, option="--force")
    task_dir = dest / "task"
    task_dir.mkdir()
    suite.prepare(task_id, task_dir)
    body = {"dataframe_records": [{"task_dir": str(task_dir)}]}
    (dest / "input.json").write_text(json.dumps(body, indent=1) + "\n")
    return {
        "suite": suite_name,
        "task_id": task_id,
        "task_dir": str(task_dir),
        "input": str(dest / "input.json"),
        "artifact_path": suite.artifact_path,
    }
