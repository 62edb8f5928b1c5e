"""Polyglot JavaScript and Java graded test by test, through ``exercise_grade.py`` as the sandbox runs it.

JavaScript uses the host's node with jest installed from the npm registry into pytest's cache (from the
fixture's ``package.json``); Java the host's JDK with Debian's ``junit5`` and ``libassertj-core-java``
jars. Each test skips, naming what is missing, when its toolchain is absent.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from metasearch.suites.testrun import channel, jest, junit, scan, verdict

SPACE_AGE = Path(__file__).resolve().parent / "polyglot_fixture" / "javascript" / "exercises" / "practice"
SPACE_AGE /= "space-age"
SCRIPT = str(Path(scan.__file__).parent / "exercise_grade.py")
TAMPER = "tamper_suspect"
WRONG = "export const age = () => 0;\n"
# the Function constructor reached without naming it where the scan looks (a template or .concat builds it)
FUNCTION = "Reflect.get([].map, 'constr'.concat('uctor'))"
GLOBAL = f"const g = {FUNCTION}('return th'.concat('is'))();\n"


def _grader(exercise: Path, spec: dict[str, Any]) -> Any:
    def run(mode: str, artifact: Path, **extra: object) -> dict:
        argv = [sys.executable, SCRIPT, mode, str(exercise), str(artifact), json.dumps({**spec, **extra})]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    return run


# ------------------------------------------------------------------ JavaScript, with jest


@pytest.fixture(scope="session")
def node_modules(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """jest and the Exercism babel preset, installed once into pytest's cache (or a temporary folder)."""
    npm = shutil.which("npm")
    if not shutil.which("node") or not npm:
        pytest.skip("no node/npm on this machine")
    cache = getattr(request.config, "cache", None)
    folder = cache.mkdir("polyglot-jest") if cache else tmp_path_factory.mktemp("polyglot-jest")
    if not (folder / "node_modules" / ".bin" / "jest").exists():
        shutil.copyfile(SPACE_AGE / "package.json", folder / "package.json")
        command = [npm, "install", "--no-audit", "--no-fund", "--ignore-scripts", "--prefer-offline"]
        try:
            done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            pytest.skip("npm install of jest timed out (no registry?)")
        if done.returncode != 0:
            pytest.skip(f"npm install of jest failed (no registry?): {done.stderr[-300:]}")
    return folder / "node_modules"


def test_javascript_is_graded_test_by_test(node_modules: Path, tmp_path: Path) -> None:
    exercise = tmp_path / "space-age"
    shutil.copytree(SPACE_AGE, exercise)
    (exercise / "node_modules").symlink_to(node_modules)
    config = json.loads((exercise / ".meta" / "config.json").read_text())["files"]
    spec = {"name": "space-age", "language": "javascript", "command": "false", "run_timeout": 240}
    run = _grader(exercise, {**spec, **config})
    expected = run("expect", tmp_path / "none")
    ids = [f"space-age.spec.js::Space Age {t}" for t in ("age on Earth", "age on Mercury")]
    assert expected["ids"] == sorted([*ids, "space-age.spec.js::Space Age outer planets age on Neptune"])
    assert expected["score"] == 1.0, expected["error"]
    artifact = tmp_path / "artifact"
    artifact.mkdir()
    assert run("grade", artifact, expected=expected["ids"])["score"] == 0.0  # no file: the stub
    example = (exercise / ".meta" / "proof.ci.js").read_text()
    cases = {
        "example": (example, 1.0, ""),
        "stub": ((exercise / "space-age.js").read_text(), 0.0, "3 of 3 tests failed"),
        "wrong": (example.replace("mercury: 0.2408467", "mercury: 1"), 0.0, "1 of 3 tests failed"),
        "plain exit": (example + "process.exit(0);\n", 0.0, "tamper_suspect: space-age.js: early exit"),
        # past the scan (the Function constructor reached through an array, the names built at run time);
        # the grader's setup file has taken exit away from the spec file's process object
        "hidden exit": (
            example + FUNCTION + "('return pro'.concat('cess'))().exit(0);\n",
            0.0,
            "tamper_suspect: the jest-json run: a grader-owned guard refused it: the code under test tried to"
            " make code from a string",
        ),
        # past the scan, the wrong answer with every test's body replaced by nothing: 1.0 before the guard
        "test replaced": (
            WRONG
            + GLOBAL
            + "const t = 'te'.concat('st');\nconst real = g[t];\ng[t] = (name) => real(name, () => {});\n",
            0.0,
            "make code from a string",
        ),
        # past the scan (the hook's name is built at run time): every toEqual would pass, but expect()
        # refuses the value in the grader's setup file
        "matches anything": (
            "const hook = 'asymmetric' + 'Match';\nexport const age = () => ({ [hook]: () => true });\n",
            0.0,
            "3 of 3 tests failed",
        ),
        # the same hook behind a getter that hides it from the first read (the guard's) and hands it to
        # the later ones (expect's): 3 of 3 passed before the guard read descriptors instead of values
        "matches anything on the second read": (
            "const hook = 'asymmetric' + 'Match';\nexport const age = () => {\n  let reads = 0;\n"
            "  return { get [hook]() { reads += 1; return reads > 1 ? () => true : undefined; } };\n};\n",
            0.0,
            "3 of 3 tests failed",
        ),
    }
    for name, (source, score, reason) in cases.items():
        (artifact / "space-age.js").write_text(source)
        result = run("grade", artifact, expected=expected["ids"])
        assert result["score"] == score and reason in (result["error"] or ""), (name, result)


# Each reaches the global object plainly (the scan would name it; here the runs skip the scan), then
# replaces what the verdict rests on. Each scored 1.0 on a wrong answer before the guard held it.
REFUSED = "a grader-owned guard refused it: the code under test tried to"
GUARDED = {
    "test bodies replaced": (
        "const real = globalThis.test;\nglobalThis.test = (n) => real(n, () => {});\n",
        REFUSED,
    ),
    "Object.is replaced": ("Object.is = () => true;\n", REFUSED),
    "matcher replaced": ("expect.extend({ toEqual: () => ({ pass: true, message: () => '' }) });\n", REFUSED),
    "matchers object written": (
        "const m = globalThis[Symbol.for('$$jest-matchers-object')].matchers;\n"
        "m.toEqual = () => ({ pass: true, message: () => '' });\n",
        REFUSED,
    ),
    "array method replaced": ("Array.prototype.every = () => true;\n", REFUSED),
    "code from a string": ("(0, eval)('1');\n", REFUSED),
    "built-in module through process": ("process.getBuiltinModule('child_process');\n", REFUSED),
    "spec rewritten": (
        "require('fs').appendFileSync(__dirname + '/space-age.spec.js', '// edited');\n",
        "spec file space-age.spec.js changed during the run",
    ),
}


def test_the_jest_guard_holds_where_the_scan_is_blind(node_modules: Path, tmp_path: Path) -> None:
    """The dynamic checks alone (no scan): the framework, its matchers and the built-ins cannot be replaced,
    code cannot be made from strings (``jest_guard.js``), the spec file cannot be rewritten, and each attempt
    is flagged with its reason; an honest solution that assigns a built-in's name on its own object still
    passes."""
    exercise = tmp_path / "space-age"
    shutil.copytree(SPACE_AGE, exercise)
    (exercise / "node_modules").symlink_to(node_modules)
    ids = None
    honest = (exercise / ".meta" / "proof.ci.js").read_text()
    honest += "export class Years { toString() { return 'y'; } }\nconst o = {};\no.toString = () => 'o';\n"
    for name, (source, reason) in {"honest": (honest, ""), **GUARDED}.items():
        work = tmp_path / name.replace(" ", "-") / "space-age"
        shutil.copytree(exercise, work, symlinks=True)
        (work / "space-age.js").write_text(honest if name == "honest" else WRONG + source)
        runs = jest.run_jest_tests(str(work), ["space-age.spec.js"], timeout_s=240)
        ids = ids or sorted(verdict.outcomes(runs[0]))
        result = verdict.judge(ids, runs, fractional=False, what="tests")
        if name == "honest":
            assert len(ids) == 3 and result["score"] == 1.0, result
            continue
        assert result["score"] == 0.0 and result["flags"] == [TAMPER], (name, result)
        assert reason in result["error"], (name, result)


WORKER = """const {{ Worker, isMainThread }} = require('worker_threads');
if (isMainThread) {{
  module.exports.age = () => 0;
  new Worker(__filename);
}} else {{
  {attack}
}}
"""


def test_worker_threads_start_under_the_guard_too(node_modules: Path, tmp_path: Path) -> None:
    """A worker thread runs outside jest's realm with Node's own require: it gets ``jest_worker_guard.js``
    first, so it cannot reach the system (here: write a file), make code from strings or start a worker
    from a string either; the refusal reaches the run and flags it."""
    exercise = tmp_path / "space-age"
    shutil.copytree(SPACE_AGE, exercise)
    (exercise / "node_modules").symlink_to(node_modules)
    marker = tmp_path / "written-by-a-worker"
    attacks = {
        "system module": f"require('fs').writeFileSync({str(marker)!r}, 'x');",
        "code from a string": "Reflect.get([].map, 'constructor')('return 1')();",
        "worker from a string": "new Worker('1', {{ eval: true }});",
    }
    for name, attack in attacks.items():
        work = tmp_path / name.replace(" ", "-") / "space-age"
        shutil.copytree(exercise, work, symlinks=True)
        (work / "space-age.js").write_text(WORKER.format(attack=attack.replace("{{", "{").replace("}}", "}")))
        runs = jest.run_jest_tests(str(work), ["space-age.spec.js"], timeout_s=240)
        ids = sorted(verdict.outcomes(runs[0])) or ["space-age.spec.js::Space Age age on Earth"]
        result = verdict.judge(ids, runs, fractional=False, what="tests")
        assert result["score"] == 0.0 and result["flags"] == [TAMPER], (name, result)
        assert REFUSED in result["error"], (name, result)
    assert not marker.exists()


def test_jest_reports_must_be_complete_and_agree() -> None:
    report = {
        "numTotalTests": 2,
        "numPassedTests": 1,
        "numFailedTests": 1,
        "numTotalTestSuites": 1,
        "wasInterrupted": False,
        "success": False,
        "testResults": [
            {
                "name": "/w/a.spec.js",
                "assertionResults": [
                    {"ancestorTitles": ["A"], "title": "one", "status": "passed"},
                    {"ancestorTitles": ["A", "B"], "title": "two", "status": "failed"},
                ],
            }
        ],
    }
    lines = "PASS ./a.spec.js\n  A\n    ✓ one (3 ms)\n    B\n      ✕ two\n\nTests:       1 failed, 1 passed, 2 total\n"
    ids = ["a.spec.js::A B two", "a.spec.js::A one"]
    runs = [channel.Run("jest-json", exit_code=1), channel.Run("jest-verbose", exit_code=1)]
    jest.read_report(runs[0], report, "/w", ["a.spec.js"])
    jest.read_verbose(runs[1], lines, ["a.spec.js"])
    assert verdict.outcomes(runs[0]) == verdict.outcomes(runs[1]) == {ids[0]: "failed", ids[1]: "passed"}
    assert (
        "1 of 2 tests failed: ['A B two']"
        in verdict.judge(ids, runs, fractional=False, what="tests")["error"]
    )
    # A count that does not match the list, a missing summary: no end record, the run ended early.
    short = channel.Run("jest-json", exit_code=1)
    jest.read_report(short, {**report, "numTotalTests": 3}, "/w", ["a.spec.js"])
    cut = channel.Run("jest-verbose", exit_code=1)
    jest.read_verbose(cut, lines.split("\nTests:")[0], ["a.spec.js"])
    assert not [r for run in (short, cut) for r in run.records if r["t"] == "end"]
    # A report that says success with a failed test is incomplete; one that says failure while jest
    # exited 0 is a forced exit.
    lying = channel.Run("jest-json", exit_code=0)
    jest.read_report(lying, {**report, "success": True}, "/w", ["a.spec.js"])
    assert not [r for r in lying.records if r["t"] == "end"]
    forced = channel.Run("jest-json", exit_code=0)
    jest.read_report(forced, report, "/w", ["a.spec.js"])
    assert verdict.judge(ids, [forced, runs[1]], fractional=False, what="tests")["flags"] == [TAMPER]


# ------------------------------------------------------------------ Java, with javac and JUnit 5

JAVA_TEST = """import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

public class AdderTest {
    @Test
    public void adds() {
        assertThat(new Adder().add(1, 2)).isEqualTo(3);
    }

    @Disabled("Remove to run test")
    @Test
    public void doubles() {
        assertThat(new Adder().twice(4)).isEqualTo(8);
    }
}
"""
JAVA_RIGHT = "class Adder {\n    int add(int a, int b) {\n        return a + b;\n    }\n\n"
JAVA_RIGHT += "    int twice(int a) {\n        return 2 * a;\n    }\n}\n"
JAVA_STUB = JAVA_RIGHT.replace("return a + b;", "throw new UnsupportedOperationException();")
JAVA_STUB = JAVA_STUB.replace("return 2 * a;", "throw new UnsupportedOperationException();")
HIDDEN_EXIT = (
    'try { Thread.currentThread().getContextClassLoader().loadClass("java.lang.Sys" + "tem")'
    '.getMethod("ex" + "it", int.class).invoke(null, 0); }'
)  # past the scan: the class loaded by a computed name
HIDDEN_EXIT += " catch (Exception e) { }\n        return 2 * a;"
JDK_MISSING = [tool for tool in ("javac", "java") if not shutil.which(tool)]
JARS_MISSING = [n for n in junit.REQUIRED if not os.path.isfile(os.path.join(junit.JARS, f"{n}.jar"))]


@pytest.mark.skipif(bool(JDK_MISSING), reason=f"no {JDK_MISSING} on this machine")
@pytest.mark.skipif(
    bool(JARS_MISSING), reason=f"jars {JARS_MISSING} not in {junit.JARS} (junit5, libassertj-core-java)"
)
def test_java_is_graded_test_by_test(tmp_path: Path) -> None:
    exercise = tmp_path / "java" / "exercises" / "practice" / "adder"
    for rel, text in {
        "src/main/java/Adder.java": JAVA_STUB,
        "src/test/java/AdderTest.java": JAVA_TEST,
        ".meta/src/reference/java/Adder.java": JAVA_RIGHT,
    }.items():
        (exercise / rel).parent.mkdir(parents=True, exist_ok=True)
        (exercise / rel).write_text(text)
    spec = {"name": "adder", "language": "java", "command": "false", "run_timeout": 240}
    spec |= {"solution": ["src/main/java/Adder.java"], "test": ["src/test/java/AdderTest.java"]}
    run = _grader(exercise, {**spec, "example": [".meta/src/reference/java/Adder.java"]})
    expected = run("expect", tmp_path / "none")
    ids = ["src/test/java/AdderTest.java::adds()", "src/test/java/AdderTest.java::doubles()"]
    assert expected["ids"] == ids and expected["score"] == 1.0, expected
    artifact = tmp_path / "artifact"
    (artifact / "src" / "main" / "java").mkdir(parents=True)
    assert run("grade", artifact, expected=ids)["score"] == 0.0  # no file: the stub
    cases = {
        "example": (JAVA_RIGHT, 1.0, ""),
        "stub": (JAVA_STUB, 0.0, "2 of 2 tests failed"),
        "wrong": (JAVA_RIGHT.replace("2 * a", "a + 1"), 0.0, "1 of 2 tests failed: ['doubles()']"),
        "no build": (JAVA_RIGHT.replace("a + b;", "a + b"), 0.0, "ended early"),
        "plain exit": (JAVA_RIGHT.replace("return 2 * a;", "System.exit(0); return 0;"), 0.0, "early exit"),
        "hidden exit": (JAVA_RIGHT.replace("return 2 * a;", HIDDEN_EXIT), 0.0, "ended early"),
    }
    for name, (source, score, reason) in cases.items():
        (artifact / "src" / "main" / "java" / "Adder.java").write_text(source)
        result = run("grade", artifact, expected=ids)
        assert result["score"] == score and reason in (result["error"] or ""), (name, result)


def test_the_junit_tree_is_read_like_the_xml() -> None:
    """The tree shows a slow test's time and cuts long names short; both still name the XML's test."""
    long = "aVeryLongTestNameThatTheConsoleLauncherCutsShortInItsTreeBecauseItIsLongerThanEightyChars()"
    tree = (
        "├─ JUnit Jupiter ✔\n│  └─ AdderTest ✔\n│     ├─ adds() 10362 ms ✔\n"
        f"│     └─ {long[:75]}... ✘ expected: 1\n└─ JUnit Vintage ✔\n\n"
        "[         2 tests found           ]\n[         0 tests skipped         ]\n"
        "[         0 tests aborted         ]\n[         1 tests successful      ]\n"
        "[         1 tests failed          ]\n[         0 containers failed     ]\n"
    )
    ids = {f"src/test/java/AdderTest.java::{name}" for name in ("adds()", long)}
    run = channel.Run("junit-tree", exit_code=1)
    junit.read_tree(run, tree, {"AdderTest": "src/test/java/AdderTest.java"}, ids)
    assert {r["id"]: r["outcome"] for r in run.records if r["t"] == "report"} == {
        f"src/test/java/AdderTest.java::{long}": "failed",
        "src/test/java/AdderTest.java::adds()": "passed",
    }
    assert run.records[-1] == {"t": "end", "exitstatus": 1}


BENT_SPEC = """import { counts, box } from './space-age';

describe('Values', () => {
  test('counts of a word', () => {
    expect(counts('aab')).toEqual(new Map([['a', 2], ['b', 1]]));
  });
  test('counts inside an object', () => {
    expect({ found: counts('xyz') }).toEqual({ found: new Map([['x', 1], ['y', 1], ['z', 1]]) });
  });
  test('a box', () => {
    expect(box(1)).toEqual({ inside: 1 });
  });
});
"""
# Wrong answers (right keys, wrong counts; a box holding 9) in values that bend expect's equality: a Map
# of Map's own constructor whose own iterator yields nothing (expect asks its size, then iterates it), and
# a box whose getter answers plainly on its first read (the guard's) and with a matcher hook on later ones
# (expect's). Before the guard held them, 3 of 3 passed.
BENT = (
    "const hook = 'asymmetric' + 'Match';\n"
    "export const counts = (w) => {{\n  const m = new Map([...w].map((c) => [c, 9]));\n{bend}  return m;\n}};\n"
    "export const box = (n) => {{\n  let reads = 0;\n"
    "  return {{ get inside() {{ reads += 1; return reads > 1{hook} ? {{ [hook]: () => true }} : 9; }} }};\n}};\n"
)


def test_values_that_bend_expects_equality_gain_nothing(
    node_modules: Path, tmp_path: Path, record_property: Any
) -> None:
    """The grader's setup file refuses a Map whose own iterator hides its entries, at any depth, and makes
    a getter answer expect what it answered the check. Honest Maps and getters pass."""
    honest = "export const counts = (w) => {\n  const m = new Map();\n  for (const c of w) m.set(c, (m.get(c) ?? 0) + 1);\n"
    honest += "  return m;\n};\nexport const box = (n) => ({ get inside() { return n; } });\n"
    cases = {
        "honest": (honest, 1.0, ""),
        "wrong": (BENT.format(bend="", hook=" && false"), 0.0, "3 of 3 tests failed"),
        "wrong, bent": (
            BENT.format(bend="  m[Symbol.iterator] = function* () {};\n", hook=""),
            0.0,
            "3 of 3 tests failed",
        ),
    }
    for name, (source, score, reason) in cases.items():
        work = tmp_path / name.replace(" ", "-").replace(",", "") / "space-age"
        shutil.copytree(SPACE_AGE, work)
        (work / "node_modules").symlink_to(node_modules)
        (work / "space-age.spec.js").write_text(BENT_SPEC)
        (work / "space-age.js").write_text(source)
        runs = jest.run_jest_tests(str(work), ["space-age.spec.js"], timeout_s=240)
        ids = sorted(verdict.outcomes(runs[0]))
        result = verdict.judge(ids, runs, fractional=False, what="tests")
        assert len(ids) == 3 and result["score"] == score, (name, result)
        assert reason in (result["error"] or ""), (name, result)
        if name == "wrong, bent":
            record_property("outcome", f"score {result['score']:.2f}: {result['error']}")
            assert "a value that equals anything" in runs[0].output, runs[0].output[-2000:]
