"""``polyglot``: Aider's polyglot benchmark (Exercism exercises) from a local checkout; tests stay hidden.

``suite.path`` is a polyglot-benchmark checkout: ``<language>/exercises/practice/<exercise>/`` with
``.docs/instructions.md`` (plus optional ``instructions.append.md``) and ``.meta/config.json`` listing
``files.solution``, ``files.test`` and ``files.example``. Tasks are ``polyglot/<language>/<exercise>``.
Nothing is downloaded; ``content_hash`` covers every file of the loaded exercises. Host side:
``PolyglotSuite`` here (a ``HiddenTestSuite``); grader side, mounted read-only into each grading run: the one
exercise and the shared ``testrun`` package, whose ``exercise_grade.py`` is the grader.

Variant: the agent does **not** see the tests (Aider shows them; we record the difference here). Visible
under ``/task/workspace``: the exercise without ``.meta/``, ``.approaches/``, ``.articles/``, the test and
example files and each language's test code and data (``hidden``, ``TEST_PATHS``: Go's ``cases_test.go``
included), with the stub solution files to edit; ``TASK.md`` holds the instructions. Subsets: ``all`` and
DGM's ``dgm-small`` (10) / ``dgm-medium`` (50) lists (jennyzzt/dgm ``polyglot/subsets/*.json`` at commit
d88fdd6).

Grading (``testrun/exercise_grade.py`` in a fresh sandbox) copies the pristine exercise into a folder named
like it (C++ CMake projects take their names from it), takes only the ``files.solution`` paths from the
artifact and scans what they add over the stubs (``testrun/scan.py``; a finding is flag
``tamper_suspect``, score 0). In every language the expected test ids come from a trusted run with the
exercise's example solution in place (cached per exercise content hash, one extra sandbox run the first
time), and the candidate passes only when two reports of its run agree that every expected test passed:
Python pytest with our reporter *and* our own unittest runner over private channels (``testrun/verdict.py``),
Rust libtest's stdout and ``--logfile`` (``testrun/libtest.py``; a Cargo.toml that changes the harness or
adds a build script is flagged), C++ Catch2's JUnit and XML reports (``testrun/catch2.py``), JavaScript one
jest run's ``--json`` report and verbose lines (``testrun/jest.py``), Java a grader-made ``javac`` build and
the JUnit console launcher's XML report and tree (``testrun/junit.py``; no Gradle), Go ``go test -json``'s
events and result lines (``testrun/gotest.py``). A language whose ``test_commands`` entry is overridden is
graded by that command's exit status. The toolchains are the polyglot image's (``metasearch images build
polyglot``, ``sandbox.image: polyglot``); a grader that finds one missing reports it as a grader fault and
``grade`` raises ``TaskUnfit`` naming that command (the study retires the task), never a 0.0. Exercises no
hidden test can grade here (the image's known gaps, ``OFFLINE_GAPS``, and exercises marked
``.meta/.skip_tests``) are left out of the tasks with a warning naming each, unless ``include_offline_gaps``
or ``exercises`` asks for them.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import tempfile
import threading
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ConfigDict, Field

from metasearch.errors import ConfigError, TaskUnfit
from metasearch.sandboxes.protocol import Mount, Sandbox
from metasearch.suites.contract import Judged
from metasearch.suites.exercise import Exercise, grading_view, hidden
from metasearch.suites.files import local_path
from metasearch.suites.grading import TESTRUN_MOUNT, run_budget
from metasearch.suites.hidden_tests import ARTIFACT_MOUNT, HiddenTestSuite
from metasearch.suites.protocol import hash_files
from metasearch.suites.testrun import scan, verdict
from metasearch.suites.testrun.exercise_grade import example_targets

log = logging.getLogger(__name__)
LANGUAGES = ("cpp", "go", "java", "javascript", "python", "rust")
PER_TEST = LANGUAGES  # test by test against expected ids, unless test_commands overrides the language
TEST_COMMANDS = {
    "python": "python3 -m pytest -q -p no:cacheprovider",
    "rust": "cargo test --offline -- --include-ignored",
    "go": "go test ./...",
    "javascript": "sed -i 's/\\bxtest(/test(/g' *.spec.js && npm test",
    "cpp": "cmake -S . -B build -DEXERCISM_RUN_ALL_TESTS=1 && cmake --build build "
    "&& cd build && ctest --output-on-failure --no-tests=ignore",
    "java": "find . -path '*src/test*' -name '*.java' -exec sed -i '/@Disabled/d' {} + && "
    "if [ -x ./gradlew ]; then ./gradlew test --offline; else gradle test --offline; fi",
}
DGM_SMALL = [
    "go__dominoes",
    "cpp__all-your-base",
    "python__dominoes",
    "java__sgf-parsing",
    "javascript__robot-name",
    "rust__variable-length-quantity",
    "python__beer-song",
    "go__book-store",
    "javascript__bottle-song",
    "rust__bowling",
]
DGM_MEDIUM = [
    "javascript__queen-attack",
    "rust__wordy",
    "python__dot-dsl",
    "java__satellite",
    "cpp__diamond",
    "rust__accumulate",
    "go__error-handling",
    "cpp__queen-attack",
    "rust__poker",
    "python__sgf-parsing",
    "rust__react",
    "java__ledger",
    "go__connect",
    "rust__macros",
    "javascript__triangle",
    "java__zipper",
    "java__bowling",
    "python__tree-building",
    "javascript__say",
    "java__wordy",
    "python__food-chain",
    "javascript__wordy",
    "python__poker",
    "javascript__grade-school",
    "cpp__gigasecond",
    "java__forth",
    "python__dominoes",
    "go__word-search",
    "javascript__simple-linked-list",
    "go__counter",
    "java__react",
    "javascript__ocr-numbers",
    "python__scale-generator",
    "java__go-counting",
    "rust__doubly-linked-list",
    "python__grade-school",
    "javascript__forth",
    "python__wordy",
    "java__mazy-mice",
    "cpp__bank-account",
    "python__zipper",
    "java__custom-set",
    "java__rest-api",
    "go__transpose",
    "rust__gigasecond",
    "rust__say",
    "go__food-chain",
    "rust__pig-latin",
    "go__markdown",
    "go__crypto-square",
]
SUBSETS = {"dgm-small": DGM_SMALL, "dgm-medium": DGM_MEDIUM}
# Exercises the polyglot image cannot grade offline, measured on the real benchmark (`metasearch bench
# polyglot`): their example solutions need libraries that no Debian package provides at a compatible
# version, so the trusted run finds no test. Left out of the tasks unless suite.include_offline_gaps.
OFFLINE_GAPS = {
    "rust/alphametics": "its example needs the crates itertools 0.5 and permutohedron (Debian: itertools 0.13)",
    "rust/pig-latin": "its example needs the crate regex 0.2 (Debian: 1.11)",
    "rust/poker": "its example needs the crate counter 0.5 (Debian: 0.6)",
    "rust/robot-name": "its example needs the crate rand 0.3 (Debian: 0.8)",
    "java/hangman": "it needs RxJava, which the grader's build does not put on the class path",
    "java/rest-api": "it needs org.json, which the grader's build does not put on the class path",
}
NO_HIDDEN_TESTS = ".meta/.skip_tests"  # the exercise asks for tests, not code (Go's counter)
GRADE_SCRIPT = f"{TESTRUN_MOUNT}/exercise_grade.py"
# Processes and threads of one grading run: java/bank-account's tests start 1,000 threads at once, over
# the sandbox's default of 256 (its example solution failed with "unable to create native thread").
GRADING_PIDS = 2048
IMAGE_FIX = (
    "grade in the polyglot image: `metasearch images build polyglot`, then set sandbox.image: polyglot"
)


class PolyglotSuite(HiddenTestSuite[Exercise]):
    """The exercises of a polyglot-benchmark checkout; an item is an ``Exercise`` (``exercises``, by task
    id, are the items)."""

    name = "polyglot"
    description = (
        "Exercism exercises in six languages: implement the stub solution files in /task/workspace "
        "following TASK.md; hidden tests decide pass or fail."
    )
    artifact_path = "workspace"
    needs_docker = True
    needs_gpu = False
    items_noun = "loaded exercises"
    named_subsets = SUBSETS

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid")
        path: str | None = None  # a polyglot-benchmark checkout
        languages: list[str] | None = None  # None = every language present in the checkout
        exercises: list[str] | None = None  # "python/dominoes" or "python__dominoes"; None = all
        subset: str = "all"
        include_offline_gaps: bool = False  # keep OFFLINE_GAPS (grading them raises TaskUnfit)
        test_commands: dict[str, str] = Field(default_factory=dict)  # per-language overrides (sh -c)
        grade_timeout_s: float = Field(600.0, gt=0)  # C++ compiles Catch2 (a 650 kB header) per run
        solve_timeout_s: float = Field(1200.0, gt=0)

    config: Config

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or PolyglotSuite.Config()
        cfg = self.config
        self.check_subset(cfg.subset)
        if unknown := sorted(set(cfg.test_commands) - set(LANGUAGES)):
            raise ConfigError(
                f"suite.test_commands: unknown languages {unknown}; allowed: {', '.join(LANGUAGES)}"
            )
        self.root = local_path(cfg.path, "suite.path", "a local polyglot-benchmark checkout")
        languages = cfg.languages or [lang for lang in LANGUAGES if (self.root / lang).is_dir()]
        self.exercises = _load(self.root, languages, cfg.exercises, cfg.subset)
        self.left_out = self._leave_out_ungradable()
        self.needs_docker = any(ex.language != "python" for ex in self.exercises.values())
        self.content_hash = hash_files(
            self.root, [p for ex in self.exercises.values() for p in ex.path.rglob("*") if p.is_file()]
        )
        self._lock = threading.Lock()
        self._expected_ids: dict[str, list[str]] = {}  # exercise content hash -> test ids
        super().__init__(self.exercises, subset=cfg.subset)

    def _leave_out_ungradable(self) -> dict[str, str]:
        """Drop the exercises no hidden test can grade here (each named, with its reason, in a warning);
        an exercise the config names explicitly is kept."""
        left_out = {}
        for task_id, ex in list(self.exercises.items()):
            key = f"{ex.language}/{ex.name}"
            if (ex.path / NO_HIDDEN_TESTS).is_file():
                reason = f"it asks for tests, not code ({NO_HIDDEN_TESTS})"
            elif key in OFFLINE_GAPS and not self.config.include_offline_gaps:
                reason = OFFLINE_GAPS[key]
            else:
                continue
            if self.config.exercises is None:
                left_out[task_id] = reason
                del self.exercises[task_id]
        if left_out:
            log.warning(
                "polyglot: left out %d exercises that cannot be graded here: %s",
                len(left_out),
                "; ".join(f"{t}: {r}" for t, r in left_out.items()),
            )
        if not self.exercises:
            raise ConfigError(f"suite: every selected exercise was left out: {left_out}")
        return left_out

    def subset_key(self, task_id: str, item: Exercise) -> str:
        return f"{item.language}__{item.name}"  # as DGM's lists name exercises

    def statement(self, item: Exercise) -> str:
        docs = item.path / ".docs"
        parts = [
            (docs / name).read_text().strip()
            for name in ("instructions.md", "instructions.append.md")
            if (docs / name).is_file()
        ]
        return (
            f"# polyglot/{item.language}/{item.name}\n\n" + "\n\n".join(parts) + "\n\n## What to do\n\n"
            f"Implement the solution in {item.language} by editing, under /task/workspace: "
            f"{', '.join(item.solution)}. Only these files are graded. The tests are hidden; they are run "
            f"with the exercise's standard {item.language} test command.\n"
        )

    def write_visible(self, item: Exercise, dest: Path) -> None:
        """``workspace/``: the exercise without ``.meta/`` and without its tests (``exercise.hidden``)."""
        shutil.copytree(
            item.path,
            dest / "workspace",
            ignore=lambda folder, names: [
                n for n in names if hidden(item, (Path(folder) / n).relative_to(item.path).as_posix())
            ],
        )

    def judge(self, item: Exercise, artifact_dir: Path, sandbox: Sandbox) -> Judged:
        spec = self._spec(item)
        if item.language in PER_TEST and item.language not in self.config.test_commands:
            spec["expected"] = self._expected(item, sandbox)
        spec["allowed"] = example_findings(item)  # what the benchmark's own solution needs (rust/grep: files)
        return self._run(item, "grade", spec, artifact_dir, sandbox)

    def _spec(self, ex: Exercise) -> dict[str, object]:
        timeout = self.config.grade_timeout_s
        return {
            "name": ex.name,
            "language": ex.language,
            "solution": list(ex.solution),
            "test": list(ex.tests),
            "example": list(ex.examples),
            "command": self.config.test_commands.get(ex.language, TEST_COMMANDS[ex.language]),
            "run_timeout": run_budget(timeout, 2 if ex.language == "python" else len(ex.tests) or 1),
            "test_names": example_test_names(ex),
        }

    def _run(
        self, ex: Exercise, mode: str, spec: dict[str, object], artifact: Path, sandbox: Sandbox
    ) -> Judged:
        """One grading (``run_test_grader``: a grader fault such as a missing toolchain is retried, then
        ``TaskUnfit`` naming the fix). A ``grade`` run, which runs candidate code, sees the exercise without
        its reference material (``grading_view``); the trusted ``expect`` run sees all of it."""
        command = ["python3", GRADE_SCRIPT, mode, "/exercise", ARTIFACT_MOUNT, json.dumps(spec)]
        modules = ex.path / "node_modules"  # installed packages, never copied
        with tempfile.TemporaryDirectory(prefix="ms-polyglot-view-") as tmp:
            source = ex.path if mode == "expect" else grading_view(ex, Path(tmp))
            grader_side = [Mount(source, "/exercise")]
            if source != ex.path and modules.is_dir():
                if sandbox.name == "docker":
                    grader_side.append(Mount(modules, "/exercise/node_modules"))
                else:  # the local sandbox maps a mount to a link, and /exercise is one already
                    (source / "node_modules").symlink_to(modules.resolve())
            return self.run_test_grader(
                sandbox,
                command,
                grader_side,
                artifact,
                memory_mb=4096,
                pids=GRADING_PIDS,
                workdir="/exercise",
                what=(
                    f"polyglot: the trusted run of {ex.language}/{ex.name}'s example solution"
                    if mode == "expect"
                    else f"polyglot: cannot grade {ex.language}/{ex.name}"
                ),
                runs_candidate=mode != "expect",
                hint=IMAGE_FIX,
            )

    def _expected(self, ex: Exercise, sandbox: Sandbox) -> list[str]:
        """The test ids of ``ex``, from a trusted run of its example solution; cached by content hash."""
        key = hash_files(ex.path, sorted(p for p in ex.path.rglob("*") if p.is_file()))
        with self._lock:
            if key in self._expected_ids:
                return self._expected_ids[key]
        ids, score, error = self.example_run(f"polyglot/{ex.language}/{ex.name}", sandbox)
        if not ids:  # the toolchain is there (the grader checks it first): this exercise cannot build here
            raise TaskUnfit(
                f"polyglot: the trusted run of {ex.language}/{ex.name}'s example solution found no tests "
                f"(a missing toolchain or crate? {IMAGE_FIX}): {error}"
            )
        if score < 1.0:
            log.warning("polyglot: %s/%s: the example solution fails here: %s", ex.language, ex.name, error)
        return ids

    def example_run(self, task_id: str, sandbox: Sandbox) -> tuple[list[str], float, str | None]:
        """The trusted run of the exercise's example solution: (test ids, score, error); the ids it finds
        become the exercise's expected ids. A missing toolchain or a grader that fails raises ``TaskUnfit``."""
        ex = self.item(task_id)
        key = hash_files(ex.path, sorted(p for p in ex.path.rglob("*") if p.is_file()))
        with tempfile.TemporaryDirectory(prefix="ms-polyglot-") as empty:
            found = self._run(ex, "expect", self._spec(ex), Path(empty), sandbox)
        ids, score, error = list(found.ids), found.score, found.error
        if ids:
            with self._lock:
                self._expected_ids[key] = ids
        return ids, score, None if error is None else str(error)


def example_findings(ex: Exercise) -> list[str]:
    """What the tamper scan finds in the exercise's example solution handed in as a candidate's: each example
    file against the stub it replaces, paired as grading pairs them. Most have none; what one has is what the
    exercise itself asks for (reading files in ``rust/grep``, worker threads in
    ``javascript/parallel-letter-frequency``), and grading allows it to every candidate of that exercise."""
    found = []
    for example, target in example_targets(list(ex.examples), list(ex.solution)):
        language = scan.language_of(target)
        if language and (ex.path / example).is_file():
            stub = ex.path / target
            before = stub.read_text() if stub.is_file() else None
            after = (ex.path / example).read_text()
            found += [f"{target}: {f}" for f in scan.new_findings(before, after, language)]
    return found


def example_test_names(ex: Exercise) -> list[str]:
    """The names the tests declare that the exercise's own example solution uses (``go/bottle-song``'s
    test file offers ``Title``): a candidate may use them too; any other name of the tests' it uses makes
    its solution build only with the tests (the graders' ``NAMES_TESTS``)."""
    if ex.language not in verdict.TEST_DECLARATIONS:
        return []
    texts = [(ex.path / rel).read_text(errors="replace") for rel in ex.tests if (ex.path / rel).is_file()]
    declared = verdict.declared_names(ex.language, texts)
    used = {
        word
        for rel in ex.examples
        if (ex.path / rel).is_file()
        for word in re.findall(r"\w+", (ex.path / rel).read_text(errors="replace"))
    }
    return sorted(declared & used)


def _load(root: Path, languages: list[str], names: list[str] | None, subset: str) -> dict[str, Exercise]:
    found: dict[str, Exercise] = {}
    for lang in languages:
        if lang not in LANGUAGES:
            raise ConfigError(f"suite.languages: unknown language {lang!r}; allowed: {', '.join(LANGUAGES)}")
        practice = root / lang / "exercises" / "practice"
        if not practice.is_dir():
            raise ConfigError(
                f"suite.languages: {lang!r} not found in suite.path ({practice} does not exist)"
            )
        for folder in sorted(p for p in practice.iterdir() if p.is_dir()):
            found[f"polyglot/{lang}/{folder.name}"] = _read_exercise(lang, folder)
    if not found:
        raise ConfigError(
            f"suite.path: no exercises under {root} (expected <language>/exercises/practice/*/)"
        )
    wanted = set(SUBSETS[subset]) if subset != "all" else None
    if names is not None:
        keys = {n.replace("__", "/", 1) for n in names}
        if missing := sorted(k for k in keys if f"polyglot/{k}" not in found):
            raise ConfigError(f"suite.exercises: not found in suite.path: {missing}")
        found = {t: ex for t, ex in found.items() if t.split("/", 1)[1] in keys}
    if wanted is not None:
        loaded = {f"{ex.language}__{ex.name}" for ex in found.values()}
        if missing := sorted(i for i in wanted - loaded if i.split("__")[0] in languages and names is None):
            raise ConfigError(f"suite.subset: {subset} exercises missing from suite.path: {missing}")
        found = {t: ex for t, ex in found.items() if f"{ex.language}__{ex.name}" in wanted}
    return found


def _read_exercise(language: str, folder: Path) -> Exercise:
    config = folder / ".meta" / "config.json"
    try:
        files = json.loads(config.read_text())["files"]
        lists = [tuple(str(p) for p in files[key]) for key in ("solution", "test", "example")]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"suite.path: {config}: unreadable files.solution/test/example: {exc}") from exc
    for rel in (p for group in lists for p in group):
        if PurePosixPath(rel).is_absolute() or ".." in PurePosixPath(rel).parts:
            raise ConfigError(f"suite.path: {config}: path {rel!r} leaves the exercise folder")
    return Exercise(language, folder.name, folder, *lists)
