"""Polyglot on exercises copied from the real benchmark (``polyglot_real/``), one per language.

What the agent sees is checked file by file; grading runs in the offline-built polyglot image (each
language: the example passes, the stub and a wrong solution fail); a toolchain the image lacks is an
infrastructure error naming the fix. The polyglot image tests skip, saying why, when the image is
absent (``metasearch images build polyglot``, about 15 minutes), unless ``METASEARCH_POLYGLOT_IMAGE`` is
set, as it is where ``.ci/setup`` was asked to build the image.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from metasearch.errors import InfrastructureError
from metasearch.suites.polyglot import PolyglotSuite, example_test_names
from metasearch.suites.testrun import scan, verdict
from metasearch.suites.testrun.exercise_grade import example_targets

ROOT = Path(__file__).resolve().parent / "polyglot_real"
EXERCISES = {
    "go": "pig-latin",
    "rust": "gigasecond",
    "cpp": "perfect-numbers",
    "java": "kindergarten-garden",
    "javascript": "grep",
    "python": "transpose",
}
VISIBLE = {
    "go": [".docs/instructions.md", ".docs/introduction.md", "go.mod", "pig_latin.go"],
    "rust": [
        ".docs/instructions.append.md",
        ".docs/instructions.md",
        ".docs/introduction.md",
        "Cargo.toml",
        "src/lib.rs",
    ],
    "cpp": [".docs/instructions.md", "CMakeLists.txt", "perfect_numbers.cpp", "perfect_numbers.h"],
    "java": [
        ".docs/instructions.md",
        ".docs/introduction.md",
        "build.gradle",
        "src/main/java/KindergartenGarden.java",
        "src/main/java/Plant.java",
    ],
    "javascript": [
        ".docs/instructions.append.md",
        ".docs/instructions.md",
        ".eslintrc",
        ".npmrc",
        "LICENSE",
        "babel.config.js",
        "grep.js",
        "package.json",
    ],
    "python": [".docs/instructions.md", "transpose.py"],
}
# A wrong solution per language: the example with one behaviour broken.
BREAK = {
    "go": ('"ay"', '"ey"'),
    "rust": ("1_000_000_000", "1_000_000_001"),
    "cpp": ("classification::abundant;", "classification::deficient;"),
    "java": ("PER_ROW = 2", "PER_ROW = 1"),
    "javascript": ("isOptionSet('l')", "isOptionSet('L')"),
    "python": ("row.rstrip()", "row"),
}


def _suite(language: str) -> PolyglotSuite:
    return PolyglotSuite(PolyglotSuite.Config(path=str(ROOT), languages=[language], grade_timeout_s=900))


def _task(language: str) -> str:
    return f"polyglot/{language}/{EXERCISES[language]}"


def _files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def test_fixtures_keep_the_real_layout() -> None:
    for language, name in EXERCISES.items():
        ex = _suite(language).exercises[_task(language)]
        assert ex.name == name and ex.solution and ex.tests and ex.examples
        assert all((ex.path / rel).is_file() for rel in (*ex.solution, *ex.tests, *ex.examples))


@pytest.mark.parametrize("language", sorted(EXERCISES))
def test_only_solution_editor_build_and_docs_files_reach_the_workspace(language: str, tmp_path: Path) -> None:
    suite = _suite(language)
    suite.prepare(_task(language), tmp_path)
    assert _files(tmp_path / "workspace") == VISIBLE[language]
    assert (tmp_path / "TASK.md").is_file()


# ------------------------------------------------------------------ in the polyglot image


@pytest.fixture(scope="module")
def polyglot_sandbox(docker_sandbox_factory: object) -> Iterator[object]:
    """A Docker sandbox on the polyglot image (``docker_sandbox_factory`` checks the daemon first)."""
    from metasearch.sandboxes.images import build_hint, image_exists, image_tag

    if not image_exists(image_tag("polyglot")):
        reason = f"polyglot image {image_tag('polyglot')} missing (build it with {build_hint('polyglot')})"
        if os.environ.get("METASEARCH_POLYGLOT_IMAGE"):  # .ci/setup was asked to build it
            pytest.fail(f"the polyglot image tests must run here, but {reason}")
        pytest.skip(reason)
    from metasearch.sandboxes.docker import DockerSandbox

    sandbox = DockerSandbox(DockerSandbox.Config(image="polyglot"), study="pytest-polyglot")
    yield sandbox
    sandbox.sweep()


def _solve(suite: PolyglotSuite, task_id: str, workspace: Path, edit: tuple[str, str] | None) -> None:
    """Put the exercise's example (``edit`` applied to it: a wrong one) in place of the stub."""
    ex = suite.exercises[task_id]
    edited = 0
    for example, rel in example_targets(list(ex.examples), list(ex.solution)):
        text = (ex.path / example).read_text()
        if edit is not None and rel in ex.solution and edit[0] in text:
            text, edited = text.replace(edit[0], edit[1], 1), edited + 1
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_text(text)
    assert edit is None or edited == 1, f"no solution file of {task_id} holds {edit[0]!r}"


@pytest.mark.docker
@pytest.mark.parametrize("language", sorted(EXERCISES))
def test_each_language_grades_in_the_polyglot_image(
    language: str, polyglot_sandbox: object, tmp_path: Path
) -> None:
    suite, task_id = _suite(language), _task(language)
    ids, score, error = suite.example_run(task_id, polyglot_sandbox)  # type: ignore[arg-type]
    assert ids and score == 1.0, error
    suite.prepare(task_id, tmp_path)
    workspace = tmp_path / "workspace"
    stub = suite.grade(task_id, workspace, polyglot_sandbox)  # type: ignore[arg-type]
    assert stub.score == 0.0 and stub.error, stub
    _solve(suite, task_id, workspace, BREAK[language])
    wrong = suite.grade(task_id, workspace, polyglot_sandbox)  # type: ignore[arg-type]
    assert wrong.score == 0.0 and "failed" in (wrong.error or ""), wrong
    _solve(suite, task_id, workspace, None)
    right = suite.grade(task_id, workspace, polyglot_sandbox)  # type: ignore[arg-type]
    assert right.score == 1.0 and not right.flags, right
    assert right.metrics["total"] == len(ids)


@pytest.mark.docker
def test_a_missing_toolchain_is_an_infrastructure_error(
    docker_sandbox_factory: object, tmp_path: Path
) -> None:
    """The default image has no Go: grading says so and names the fix, instead of scoring 0."""
    suite = _suite("go")
    suite.prepare(_task("go"), tmp_path)
    with pytest.raises(InfrastructureError, match=r"missing go.*metasearch images build polyglot"):
        suite.grade(_task("go"), tmp_path / "workspace", docker_sandbox_factory())  # type: ignore[operator]


def test_exercises_that_cannot_be_graded_here_are_left_out_and_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An exercise that asks for tests (``.meta/.skip_tests``) and one the image cannot build offline are no
    tasks, each named with its reason; asked for by name, or with ``include_offline_gaps``, they stay."""
    import shutil

    root = tmp_path / "pg"
    shutil.copytree(ROOT / "go", root / "go")
    shutil.copytree(ROOT / "rust", root / "rust")
    practice = root / "go" / "exercises" / "practice"
    shutil.copytree(practice / "pig-latin", practice / "counter")
    (practice / "counter" / ".meta" / ".skip_tests").write_text("asks for tests\n")
    rust = root / "rust" / "exercises" / "practice"
    shutil.copytree(rust / "gigasecond", rust / "robot-name")
    with caplog.at_level("WARNING"):
        suite = PolyglotSuite(PolyglotSuite.Config(path=str(root)))
    assert sorted(t.id for t in suite.tasks()) == ["polyglot/go/pig-latin", "polyglot/rust/gigasecond"]
    assert suite.left_out == {
        "polyglot/go/counter": "it asks for tests, not code (.meta/.skip_tests)",
        "polyglot/rust/robot-name": "its example needs the crate rand 0.3 (Debian: 0.8)",
    }
    assert "left out 2 exercises" in caplog.text and "polyglot/rust/robot-name" in caplog.text
    kept = PolyglotSuite(PolyglotSuite.Config(path=str(root), include_offline_gaps=True))
    assert "polyglot/rust/robot-name" in {t.id for t in kept.tasks()} and list(kept.left_out) == [
        "polyglot/go/counter"
    ]
    named = PolyglotSuite(PolyglotSuite.Config(path=str(root), exercises=["go/counter", "rust/robot-name"]))
    assert len(named.tasks()) == 2 and named.left_out == {}


def _forged_go_results(ids: list[str], exit_call: str) -> str:
    """An ``init`` that prints test2json-framed PASS lines for every expected test, then ends the test
    binary with exit status 0 before any test runs."""
    names = sorted((i.split("::", 1)[1] for i in ids), key=lambda n: -n.count("/"))
    lines = [
        f'fmt.Printf("\\x16=== RUN   {n}\\n{"    " * n.count("/")}\\x16--- PASS: {n} (0.00s)\\n")'
        for n in names
    ]
    return (
        "func init() {\n\t" + "\n\t".join(lines) + '\n\tfmt.Printf("\\x16PASS\\n")\n\t' + exit_call + "\n}\n"
    )


@pytest.mark.docker
@pytest.mark.parametrize(
    "imports,exit_call", [('o "os"', "o.Exit(0)"), ('. "os"', "Exit(0)")], ids=["alias", "dot-import"]
)
def test_forged_go_results_gain_nothing(
    imports: str, exit_call: str, polyglot_sandbox: object, tmp_path: Path
) -> None:
    """A wrong Go solution that forges every expected PASS line (both transcripts come from the test
    binary's stdout) and exits 0 through ``os`` under another name scored 1.0 when the scan looked for
    ``os.Exit`` by name; a Go solution may now import only packages of pure computation."""
    suite, task_id = _suite("go"), _task("go")
    ids, score, error = suite.example_run(task_id, polyglot_sandbox)  # type: ignore[arg-type]
    assert ids and score == 1.0, error
    suite.prepare(task_id, tmp_path)
    workspace = tmp_path / "workspace"
    _solve(suite, task_id, workspace, BREAK["go"])
    solution = workspace / "pig_latin.go"
    wrong = solution.read_text()
    forged = wrong.replace("import (\n", f'import (\n\t"fmt"\n\t{imports}\n', 1)
    solution.write_text(forged + _forged_go_results(ids, exit_call))
    result = suite.grade(task_id, workspace, polyglot_sandbox)  # type: ignore[arg-type]
    assert result.score == 0.0 and result.flags == ("tamper_suspect",), result
    assert "pig_latin.go: file, process or environment access: import os" in (result.error or ""), result


def test_the_names_of_the_tests_an_example_uses_are_allowed(tmp_path: Path) -> None:
    """Go's ``bottle-song`` test file offers ``Title`` and its example uses it: that name is allowed to every
    candidate of the exercise; the tests' other names (the case table, the test functions) are not."""
    assert example_test_names(_suite("go").exercises[_task("go")]) == []
    assert example_test_names(_suite("java").exercises[_task("java")]) == []
    real = _suite("go").exercises[_task("go")]
    shutil.copytree(real.path, tmp_path / "ex")
    test = tmp_path / "ex" / "pig_latin_test.go"
    test.write_text(
        test.read_text() + "\nfunc Title(s string) string { return s }\n\nvar (\n\tspare = 1\n)\n"
    )
    example = tmp_path / "ex" / real.examples[0]
    example.write_text(example.read_text() + "\nfunc shout(s string) string { return Title(s) }\n")
    ex = dataclasses.replace(real, path=tmp_path / "ex")
    assert example_test_names(ex) == ["Title"]
    names = verdict.declared_names("go", [test.read_text()])
    assert {"TestPigLatin", "BenchmarkSentence", "Title", "spare"} <= names


# A solution that names what the tests declare (they share its package and build), per language: the
# edit to a solution (the wrong one for Go, where it gains: 1.0 before; the example for Java) and the name.
NAMING_THE_TESTS = {
    "go": (
        "pig_latin.go",
        BREAK["go"],
        lambda text: (
            text + "\nfunc init() {\n\tfor i := range testCases {\n"
            "\t\ttestCases[i].expected = Sentence(testCases[i].input)\n\t}\n}\n"
        ),
        "testCases",
    ),
    "java": (
        "src/main/java/KindergartenGarden.java",
        None,
        lambda text: text.replace(
            "{", "{\n    static final String TESTS = KindergartenGardenTest.class.getSimpleName();", 1
        ),
        "KindergartenGardenTest",
    ),
}


@pytest.mark.docker
@pytest.mark.parametrize("language", sorted(NAMING_THE_TESTS))
def test_a_solution_that_names_what_the_tests_declare_gains_nothing(
    language: str, polyglot_sandbox: object, tmp_path: Path, record_property: Any
) -> None:
    """Go's tests share the solution's package, Java's its build: a wrong Go solution whose ``init`` sets
    every case's expected value to its own answer (``testCases`` is the tests' table) scored 1.0, and a
    Java solution can reach a test class the same way. Neither names anything the scan looks at. The
    grader builds the solution alone as well when its text holds a name the tests declare; one that
    builds only with the tests is flagged (the honest examples build alone)."""
    rel, edit, change, name = NAMING_THE_TESTS[language]
    suite, task_id = _suite(language), _task(language)
    suite.prepare(task_id, tmp_path)
    workspace = tmp_path / "workspace"
    _solve(suite, task_id, workspace, edit)
    solution = workspace / rel
    before = solution.read_text()
    solution.write_text(change(before))
    assert scan.new_findings(before, change(before), language) == []
    result = suite.grade(task_id, workspace, polyglot_sandbox)  # type: ignore[arg-type]
    record_property("outcome", f"score {result.score:.2f} flags {','.join(result.flags)}: {result.error}")
    assert result.score == 0.0 and result.flags == ("tamper_suspect",), result
    assert f"the solution builds only with the test files, whose names it uses: {name}" in (
        result.error or ""
    )


@pytest.mark.docker
def test_a_cpp_comparison_replaced_at_link_time_gains_nothing(
    polyglot_sandbox: object, tmp_path: Path
) -> None:
    """A wrong C++ solution whose object file defines, under C linkage, the mangled name of Catch's
    comparison (which the tests' object file holds only weakly) passed every test and scored 1.0: the
    scan names both the C linkage and the mangled name."""
    suite, task_id = _suite("cpp"), _task("cpp")
    suite.prepare(task_id, tmp_path)
    workspace = tmp_path / "workspace"
    _solve(suite, task_id, workspace, BREAK["cpp"])
    solution = workspace / "perfect_numbers.cpp"
    mangled = "_ZN5Catch12compareEqualIN15perfect_numbers14classificationES2_EEbRKT_RKT0_"
    forged = f'\nextern "C" bool {mangled}(const void*, const void*) {{ return true; }}\n'
    solution.write_text(solution.read_text() + forged)
    result = suite.grade(task_id, workspace, polyglot_sandbox)  # type: ignore[arg-type]
    assert result.score == 0.0 and result.flags == ("tamper_suspect",), result
    assert f"perfect_numbers.cpp: link-time symbol replacement: {mangled}" in (result.error or ""), result


# The real exercise's own equals, then ones the scan cannot see through (they read their operand and
# return no literal): one says "equal" to anything, one to any Rational, one to any Rational a constructor
# made (a twin made without one has the marker field unset).
RATIONAL_EQUALS = """    public boolean equals(Object obj) {
        if (obj == null || !this.getClass().isAssignableFrom(obj.getClass())) {
            return false;
        }
"""
RATIONAL_COMPARED = """        return this.getNumerator() == other.getNumerator()
            && this.getDenominator() == other.getDenominator();"""
FORGED_EQUALS = {
    "equal to anything": [
        (
            RATIONAL_EQUALS,
            "    public boolean equals(Object obj) {\n        if (obj == null || obj != null) {\n"
            "            return obj == obj;\n        }\n",
        )
    ],
    "equal to any Rational": [(RATIONAL_COMPARED, "        return other == other;")],
    "equal to any Rational a constructor made": [
        (RATIONAL_COMPARED, "        return other.made;"),
        (
            "    @Override\n    public boolean equals",
            "    private boolean made = true;\n\n    @Override\n    public boolean equals",
        ),
    ],
}


@pytest.mark.docker
def test_a_java_equals_that_says_equal_to_anything_gains_nothing(
    polyglot_sandbox: object, tmp_path: Path
) -> None:
    """java/rational-numbers with ``add`` broken: every test of ``add`` fails, unless ``equals`` says
    "equal" to anything, which the scan does not see here. The grader's agent asks each equals the
    solution defines about a value made up on the spot, and flags the run; the honest example passes."""
    suite, task_id = _suite("java"), "polyglot/java/rational-numbers"
    ids, score, error = suite.example_run(task_id, polyglot_sandbox)  # type: ignore[arg-type]
    assert len(ids) == 41 and score == 1.0, error
    results = {}
    for name, edits in {"wrong": [], **FORGED_EQUALS}.items():
        task = tmp_path / name.replace(" ", "-")
        suite.prepare(task_id, task)
        solution = task / "workspace" / "src" / "main" / "java" / "Rational.java"
        source = (suite.exercises[task_id].path / ".meta/src/reference/java/Rational.java").read_text()
        source = source.replace("this.numerator * that.denominator + that.numerator", "1 + that.numerator")
        for old, new in edits:
            assert source.count(old) == 1, old
            source = source.replace(old, new)
        solution.write_text(source)
        assert scan.new_findings(None, source, "java") == []
        results[name] = suite.grade(task_id, task / "workspace", polyglot_sandbox)  # type: ignore[arg-type]
    wrong = results.pop("wrong")
    assert wrong.score == 0.0 and wrong.flags == () and "tests failed" in (wrong.error or ""), wrong
    for name, forged in results.items():
        assert forged.score == 0.0 and forged.flags == ("tamper_suspect",), (name, forged)
        assert "a value that equals anything: Rational.equals" in (forged.error or ""), (name, forged)


# Values compared the way JUnit's assertEquals(expected, actual) does (the test's value asks the solution's),
# many times over. Honest: a fraction kept unreduced (2/4 equals 1/2: several made values are equal to
# each other) and a point. Lying: an equals trusting a marker its constructor sets (a twin made without
# the constructor lacks it); one that answers "not equal" whenever it is asked twice with the same receiver
# (as a guard asking about made-up values right after the test's question would); one that says "equal"
# only to values whose fields stay as small as a test's; a map that inherits HashMap's equals and hides its
# entries from it (AssertJ's isEqualTo asks the solution's value: java/word-search returns such a map).
GUARDED = """
import java.util.HashMap;
import java.util.Map;
import java.util.Random;
import java.util.Set;

class Frac {
    final int n, d;
    Frac(int n, int d) { if (d == 0) throw new IllegalArgumentException(); this.n = n; this.d = d; }
    @Override public boolean equals(Object o) { return o instanceof Frac f && (long) n * f.d == (long) f.n * d; }
    @Override public int hashCode() { return 0; }
}

class Point {
    final int x, y;
    Point(int x, int y) { this.x = x; this.y = y; }
    Point moved(int dx) { return new Point(x + dx, y); }
    @Override public boolean equals(Object o) { return o instanceof Point p && p.x == x && p.y == y; }
    @Override public int hashCode() { return 31 * x + y; }
}

class Marked {
    final int v;
    boolean made;
    Marked(int v) { this.v = v; made = v < 1000; }
    Marked wrong() { return new Marked(v + 1); }
    @Override public boolean equals(Object o) { return o instanceof Marked m && m.made == made; }
}

class Once {
    static Object last;
    final int v;
    Once(int v) { this.v = v; }
    Once wrong() { return new Once(v + 1); }
    @Override public boolean equals(Object o) {
        boolean again = this == last;
        last = this;
        return o instanceof Once m && (!again || m.v == v);
    }
}

class Small {
    final int v;
    Small(int v) { this.v = v; }
    Small wrong() { return new Small(v + 1); }
    @Override public boolean equals(Object o) { return o instanceof Small s && s.v > -4 && s.v < 9; }
}

class Found extends HashMap<String, Integer> {
    Found(Map<String, Integer> m) { super(m); }
    @Override public Set<Map.Entry<String, Integer>> entrySet() { return Set.of(); }
}

class Counts extends HashMap<String, Integer> {
    Counts(Map<String, Integer> m) { super(m); }
}

public class Cases {
    static void same(Object expected, Object actual) {
        if (!expected.equals(actual)) throw new AssertionError(expected + " vs " + actual);
    }

    public static void main(String[] args) {
        Random random = new Random(7);
        for (int i = 0; i < 2000; i++) {
            int a = random.nextInt(1, 9), b = random.nextInt(1, 9), k = random.nextInt(1, 4);
            same(new Frac(a, b), new Frac(k * a, k * b));
            same(new Point(a, b).moved(k), new Point(a + k, b));
            same(new Counts(Map.of("a", a, "b", b)), Map.of("a", a, "b", b));
        }
        for (int i = 0; i < 20; i++) {
            int a = random.nextInt(0, 8);
            same(new Marked(a), new Marked(a).wrong());
            same(new Once(a), new Once(a).wrong());
            same(new Small(a), new Small(a).wrong());
            same(new Found(Map.of("a", a, "b", a + 1)), Map.of("a", a + 1, "b", a));
        }
        System.out.println("compared");
    }
}
"""


@pytest.mark.docker
def test_the_java_equality_guard_asks_values_the_constructors_make(
    polyglot_sandbox: object, tmp_path: Path, record_property: Any
) -> None:
    """The agent on its own, outside JUnit: the liars are named, the honest classes never, in 6,000
    honest "equal" answers (each one asked about a dozen values made from random arguments)."""
    from metasearch.sandboxes.protocol import Limits, Mount, RunSpec
    from metasearch.suites.grading import TESTRUN_MOUNT, testrun_mount

    (tmp_path / "Cases.java").write_text(GUARDED)
    tmp_path.chmod(0o755)  # the sandbox's user reads it
    script = (
        f"set -e; cd /tmp; javac -d agent -cp /usr/share/java/asm.jar {TESTRUN_MOUNT}/EqualityGuard.java;"
        " printf 'Premain-Class: metasearch.EqualityGuard\\nClass-Path: /usr/share/java/asm.jar\\n' > mf;"
        " jar --create --file=guard.jar --manifest=mf -C agent .; javac -d cases /cases/Cases.java;"
        " java -javaagent:guard.jar=Cases.java -cp cases Cases"
    )
    result = polyglot_sandbox.run(  # type: ignore[attr-defined]
        RunSpec(
            command=["bash", "-c", script],
            mounts=(testrun_mount(), Mount(tmp_path, "/cases")),
            workdir="/tmp",
            limits=Limits(timeout_s=300, memory_mb=2048),
        )
    )
    assert result.ok and "compared" in result.stdout, (result.reason, result.stderr[-2000:])
    named = {line.rsplit(" ", 1)[-1] for line in result.stderr.splitlines() if "equals anything" in line}
    record_property("outcome", f"refused: {', '.join(sorted(named))}")
    liars = {"Marked.equals", "Once.equals", "Small.equals", "Found.equals"}
    assert named == liars, result.stderr[-2000:]
