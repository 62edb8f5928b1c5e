"""What each party may see of an Exercism exercise folder (the polyglot suite's layout).

``hidden``: what stays out of the agent's workspace (tests, test data, examples, the Exercism folders
beside ``.docs``); ``reference_material``: what shows how to solve it (examples, ``.meta``, ``.approaches``,
``.articles``); ``grading_view``: the copy a grading run that executes candidate code mounts (everything
but the reference material: stubs, tests and build files).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from metasearch.suites.testrun.exercise_grade import exercism_folder

# Test code and test data beyond files.test, by language: Go's cases_test.go (an "editor" file) and other
# *_test.go, Rust's tests/ (tests/invalid/ data), C++'s test/ (Catch2), Java's src/test/, JavaScript's
# specs and data/ (the files grep's tests search), Python's test modules.
TEST_PATHS = {
    "go": lambda parts: parts[-1].endswith("_test.go"),
    "rust": lambda parts: parts[0] == "tests",
    "cpp": lambda parts: parts[0] == "test",
    "java": lambda parts: parts[:2] == ("src", "test"),
    "javascript": lambda parts: parts[-1].endswith(".spec.js") or parts[0] == "data",
    "python": lambda parts: parts[-1].endswith("_test.py") or parts[-1].startswith("test_"),
}


@dataclass(frozen=True)
class Exercise:
    language: str
    name: str
    path: Path
    solution: tuple[str, ...]
    tests: tuple[str, ...]
    examples: tuple[str, ...]


def hidden(ex: Exercise, rel: str) -> bool:
    """Whether ``rel`` (a path in ``ex``'s folder) stays out of the agent's workspace: ``.meta`` and the
    other Exercism folders (``.approaches`` and ``.articles`` hold solutions; ``.docs`` is in TASK.md),
    the test and example files and the language's test code and data (``TEST_PATHS``)."""
    parts = PurePosixPath(rel).parts
    folder = len(parts) > 1 or (ex.path / rel).is_dir()
    if exercism_folder(parts[0]) and folder:
        return True
    return rel in ex.tests or rel in ex.examples or TEST_PATHS[ex.language](parts)


def reference_material(ex: Exercise, rel: str) -> bool:
    """Whether ``rel`` shows how to solve ``ex``: the example solutions and the Exercism folders beside
    ``.docs`` (``.meta`` holds the examples, ``.approaches`` and ``.articles`` solutions with prose)."""
    parts = PurePosixPath(rel).parts
    return (exercism_folder(parts[0]) and (ex.path / parts[0]).is_dir()) or rel in ex.examples


def grading_view(ex: Exercise, tmp: Path) -> Path:
    """A copy of ``ex`` under ``tmp`` without its reference material, readable by the sandbox user: what a
    grading run that executes candidate code may see (it needs the stubs, tests and build files only)."""
    dest = tmp / ex.name

    def skip(folder: str, names: list[str]) -> list[str]:
        rel = Path(folder).relative_to(ex.path)
        # installed packages are mounted beside the copy (``PolyglotSuite._run``), never copied
        top = ["node_modules"] if rel == Path(".") else []
        return top + [n for n in names if reference_material(ex, (rel / n).as_posix())]

    shutil.copytree(ex.path, dest, symlinks=True, ignore=skip)
    for path in [tmp, *dest.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() or path.stat().st_mode & 0o100 else 0o644)
    return dest
