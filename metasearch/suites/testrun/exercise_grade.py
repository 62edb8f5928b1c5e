"""The polyglot grader: ``python3 exercise_grade.py MODE EXERCISE ARTIFACT SPEC_JSON`` prints one contract line.

Runs in a fresh grading sandbox with the pristine exercise (``EXERCISE``, tests and ``.meta`` included)
and this package mounted read-only. ``SPEC_JSON`` holds the exercise's ``solution``/``test``/``example``
paths, its ``language``, the per-run timeout, the test ``command`` (other languages) and, in ``grade``
mode, the ``expected`` test ids. Modes:

- ``expect`` (a trusted run, no candidate code): the example solution in place, collect the test ids and
  run both harnesses; prints ``{"ids", "score", "error"}`` for the host to cache per exercise content;
  collecting its tests failing is a grader fault;
- ``grade``: the candidate's solution files (regular files only) in place of the stubs, the static scan
  of what they add over the stubs (``tamper_suspect``; Cargo.toml included) less what the example solution
  adds too (``allowed``, from the host: what the exercise itself asks for), then, against the expected
  ids (all-or-nothing): Python ``verdict.run_and_judge`` (two harnesses), Rust libtest's stdout and log
  file (``libtest.py``), C++ Catch2's JUnit and XML reports (``catch2.py``), JavaScript jest's JSON
  report and verbose lines (``jest.py``), Java the JUnit console launcher's XML reports of a grader-made
  build (``junit.py``). Without expected ids (Go, or a ``test_commands`` override) the test ``command``
  runs and its exit status decides: only the early-exit scan guards that.

The last line follows the grader contract (``metasearch/suites/contract.py``): a verdict, a candidate
failure, or ``{"grader_fault": ...}`` when the grader cannot grade here (a missing toolchain).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from testrun import (
    catch2,
    gotest,
    jest,
    junit,
    libtest,
    scan,
    verdict,
)  # the package's parent is only on sys.path from here

COMPILED = ("rust", "cpp", "javascript", "java", "go")  # per-test results from two reports of our own runs
JAVA_REFERENCE = ".meta/src/reference/java/"
RUST_EXAMPLE_MANIFEST = ".meta/Cargo-example.toml"  # Exercism builds the example with this Cargo.toml
NODE_MODULES = "/opt/metasearch/node/node_modules"  # jest and the babel preset in the polyglot image
TOOLS = {
    "python": ("python3",),
    "rust": ("cargo", "rustc"),
    "go": ("go",),
    "javascript": ("node",),
    "cpp": ("cmake", "make", "g++"),
    "java": ("javac", "java"),
}
JS_PACKAGES = ("jest", "babel-jest", "@exercism/babel-preset-javascript")


def main(argv: list[str]) -> dict[str, Any]:
    """One grading in a temporary folder of its own, removed when it ends: every file the runs make (the
    exercise's copy, its build, the reports) goes there, so nothing piles up where the sandbox's
    temporary folder is the host's (``LocalSandbox``)."""
    mode, exercise, artifact, spec = argv[1], argv[2], argv[3], json.loads(argv[4])
    own = tempfile.mkdtemp(prefix="polyglot-")
    tempfile.tempdir = own  # the runners' own temporary folders too
    try:
        return grade(mode, exercise, artifact, spec, os.path.join(own, spec.get("name") or "exercise"))
    finally:
        tempfile.tempdir = None
        shutil.rmtree(own, ignore_errors=True)


def grade(mode: str, exercise: str, artifact: str, spec: dict[str, Any], work: str) -> dict[str, Any]:
    # Named like the exercise: C++ projects take their target and file names from their folder's name.
    if problem := missing_toolchain(spec["language"], exercise):
        return {"grader_fault": problem}
    shutil.copytree(exercise, work, ignore=functools.partial(_not_copied, exercise))
    modules = os.path.join(os.path.abspath(exercise), "node_modules")
    if spec["language"] == "javascript":  # an installed jest: linked, never copied
        os.symlink(modules if os.path.isdir(modules) else NODE_MODULES, os.path.join(work, "node_modules"))
    tests = {rel: _read(os.path.join(exercise, rel)) for rel in spec["test"]}
    timeout = spec["run_timeout"]
    if mode == "expect":
        missing = [e for e in spec["example"] if not os.path.isfile(os.path.join(exercise, e))]
        if missing:
            return {"grader_fault": f"the example solution is missing: {', '.join(missing)}"}
        for example, rel in example_targets(spec["example"], spec["solution"]):
            shutil.copyfile(os.path.join(exercise, example), os.path.join(work, rel))
        manifest = os.path.join(exercise, RUST_EXAMPLE_MANIFEST)
        if spec["language"] == "rust" and os.path.isfile(manifest):  # the crates the example imports
            shutil.copyfile(manifest, os.path.join(work, "Cargo.toml"))
        if spec["language"] in COMPILED:
            runs = compiled_runs(work, spec)
            ids = sorted(verdict.outcomes(runs[-1]))
            result = verdict.judge(ids, runs, fractional=False, what="tests")
            if not ids:  # the build failed, a check before the run refused it, or the run failed: say how
                refused = [str(r.get("what")) for r in runs[0].records if r.get("t") == "tamper"]
                result["error"] = f"no test ran: {refused[0] if refused else runs[0].output[-800:]}"
        else:
            try:  # the example solution, no candidate code: a failure here is the grader's
                ids = verdict.collect(work, tests, timeout_s=timeout)
            except RuntimeError as exc:
                return {"grader_fault": f"collecting the tests failed: {exc}"[:2000]}
            result = verdict.run_and_judge(work, tests, ids, timeout_s=timeout, fractional=False)
        return {"ids": ids, "score": result["score"], "error": result.get("error")}
    taken, found = 0, []
    for rel in spec["solution"]:
        src = os.path.join(artifact, rel)
        if os.path.isfile(src) and not os.path.islink(src):
            stub = os.path.join(exercise, rel)
            before = _read(stub).decode("utf-8", "replace") if os.path.isfile(stub) else None
            text = _read(src)
            language = scan.language_of(rel)
            if language is not None:
                after = text.decode("utf-8", "replace")
                found += [f"{rel}: {f}" for f in scan.new_findings(before, after, language)]
            os.makedirs(os.path.dirname(os.path.join(work, rel)), exist_ok=True)
            with open(os.path.join(work, rel), "wb") as f:
                f.write(text)
            taken += 1
    metrics = {"solution_files": float(taken)}
    found = list((Counter(found) - Counter(spec.get("allowed") or [])).elements())
    if found:
        return {**verdict.failure(", ".join(found[:3]), [verdict.TAMPER]), "metrics": metrics}
    if spec.get("expected") is None:
        return run_command(work, spec["command"], timeout, metrics)
    if spec["language"] in COMPILED:
        result = verdict.judge(spec["expected"], compiled_runs(work, spec), fractional=False, what="tests")
    else:
        result = verdict.run_and_judge(work, tests, spec["expected"], timeout_s=timeout, fractional=False)
    result["metrics"] = {**metrics, **result.get("metrics", {})}
    return result


def missing_toolchain(language: str, exercise: str) -> str | None:
    """What this machine lacks to test ``language`` (a grader fault, never the candidate's), or None."""
    missing = [tool for tool in TOOLS.get(language, ()) if shutil.which(tool) is None]
    if language == "python":
        try:
            import pytest  # noqa: F401
        except ImportError:
            missing.append("pytest (python3 -m pytest)")
    if language == "javascript":
        local = os.path.join(exercise, "node_modules")
        modules = local if os.path.isdir(local) else NODE_MODULES
        missing += [f"{p} (in {modules})" for p in JS_PACKAGES if not os.path.isdir(os.path.join(modules, p))]
    if language == "java":
        missing += [
            f"{n}.jar" for n in junit.REQUIRED if not os.path.isfile(os.path.join(junit.JARS, f"{n}.jar"))
        ]
    if not missing:
        return None
    return f"the {language} toolchain is incomplete here: missing {', '.join(missing)}"


def example_targets(examples: list[str], solution: list[str]) -> list[tuple[str, str]]:
    """Which solution file each example file replaces: same name, else same suffix, else same position
    (``.meta/example.h`` -> ``x.h`` even when ``x.cpp`` is listed first; ``.meta/example.rs`` -> ``src/lib.rs``).
    A Java reference class without a solution file of its name is added beside them (``Frame.java``)."""
    pairs = []
    for n, example in enumerate(examples):
        name, suffix = os.path.basename(example), os.path.splitext(example)[1]
        same_name = [rel for rel in solution if os.path.basename(rel) == name]
        if not same_name and example.startswith(JAVA_REFERENCE):
            pairs.append((example, "src/main/java/" + example[len(JAVA_REFERENCE) :]))
            continue
        same_suffix = [rel for rel in solution if os.path.splitext(rel)[1] == suffix]
        targets = same_name or same_suffix or solution[n : n + 1]
        if targets:
            pairs.append((example, targets[0]))
    return pairs


def compiled_runs(work: str, spec: dict[str, Any]) -> list[Any]:
    """The two report transcripts of a Rust, C++, JavaScript, Java or Go exercise (see ``libtest.py``,
    ``catch2.py``, ``jest.py``, ``junit.py``, ``gotest.py``)."""
    if spec["language"] == "rust":
        return libtest.run_cargo_tests(work, spec["test"], timeout_s=spec["run_timeout"])
    if spec["language"] == "javascript":
        return jest.run_jest_tests(work, spec["test"], timeout_s=spec["run_timeout"])
    allowed = spec.get("test_names") or []  # names of the tests' that the example solution uses too
    if spec["language"] == "java":
        return junit.run_junit_tests(work, spec["test"], timeout_s=spec["run_timeout"], allowed=allowed)
    if spec["language"] == "go":
        return gotest.run_go_tests(work, timeout_s=spec["run_timeout"], allowed=allowed)
    return catch2.run_catch2_tests(work, spec["name"], spec["test"][0], timeout_s=spec["run_timeout"])


def run_command(work: str, command: str, timeout: float, metrics: dict[str, float]) -> dict[str, Any]:
    """Other languages: the test command's exit status decides (see the module docstring)."""
    try:
        run = subprocess.run(["sh", "-c", command], cwd=work, capture_output=True, text=True, timeout=timeout)
        code, out = run.returncode, (run.stdout + run.stderr)[-1500:]
    except subprocess.TimeoutExpired:
        code, out = None, f"tests timed out after {timeout}s"
    error = None if code == 0 else f"tests failed (exit {code}): {out}"
    return {"score": float(code == 0), "metrics": {**metrics, "passed": float(code == 0)}, "error": error}


def exercism_folder(name: str) -> bool:
    """Whether a top-level folder named ``name`` is one of Exercism's beside ``.docs`` (``.meta``,
    ``.approaches``, ``.articles``): reference material, never shown to the agent or to candidate code."""
    return name.startswith(".") and name != ".docs"


def _not_copied(exercise: str, folder: str, names: list[str]) -> list[str]:
    """Left out of the work tree: installed packages (linked instead), and the Exercism folders beside
    ``.docs`` (``.meta``, ``.approaches``, ``.articles``: reference material, which the mount of a run that
    grades candidate code does not even hold)."""
    if folder != exercise:
        return [n for n in names if n in ("node_modules", ".meta")]
    hidden = [n for n in names if exercism_folder(n) and os.path.isdir(os.path.join(folder, n))]
    return ["node_modules", *hidden]


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


if __name__ == "__main__":
    # The leading newline ends any partial line written to this stdout by someone else.
    print("\n" + json.dumps(main(sys.argv)))
