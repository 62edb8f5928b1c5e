"""Per-test results of C++ exercises from Catch2's JUnit and XML reporters (grader side, stdlib only).

The exercise's CMake project is configured with ``EXERCISM_RUN_ALL_TESTS`` and only the test executable is
built (the project's own ``ALL`` target would run it and report by exit status alone). The executable then
runs twice, once per reporter (``-r junit -o <file>``, ``-r xml -o <file>``), each writing to a file in a
directory the grader made for that run, so what the tests print never mixes with the report. Both become
``channel.Run`` transcripts for ``verdict.judge``: test ids ``<test file>::<test case name>`` (JUnit's
``case/section`` names folded into their case), an end
record only when the report is complete (``</testsuites>``, ``OverallResultsCases``), and a report with
failures must come with a non-zero exit status and one without with 0 (Catch2 exits with its count of
failed assertions).

Before the executable runs, its object files' symbol tables are read (``nm``; the code under test has
not run yet, so it cannot have touched them): a symbol the code under test defines in place of another
(a strong definition of a name another object also defines, such as the framework's comparison that the
tests' object holds only weakly; a name the C or C++ runtime defines, such as libc's; a name in the
framework's or the standard library's namespace) is ``link-time symbol replacement`` and the tests never
run.

Weaker than the Python harnesses, like ``libtest.py``: both reports are files the test process could
write, so a candidate that forges both (and evades the early-exit scan) can still lie. Checked with the
host's cmake and g++ and in the polyglot image (CMake 3.31, g++ 14) on benchmark exercises.
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
import xml.etree.ElementTree as ET

from . import verdict
from .channel import Run, guard_grader, kill_orphans
from .libtest import run_process
from .scan import LINKING


def run_catch2_tests(work: str, name: str, test_file: str, *, timeout_s: float) -> list[Run]:
    """Build the exercise's test executable ``name`` in ``work``, run it under both reporters."""
    guard_grader()
    junit, xml = Run("catch2-junit"), Run("catch2-xml")
    for step in (
        ["cmake", "-S", ".", "-B", "build", "-DEXERCISM_RUN_ALL_TESTS=1"],
        ["cmake", "--build", "build", "--target", name],
    ):
        out, code, timed_out = run_process(step, work, timeout_s)
        if code != 0:
            for run in (junit, xml):
                run.output, run.exit_code, run.timed_out = out[-3000:], code, timed_out
            return [junit, xml]  # no end record: it did not build
    if replaced := replaced_symbols(os.path.join(work, "build", "CMakeFiles", f"{name}.dir"), test_file):
        verdict.tampered((junit, xml), f"{LINKING}: {', '.join(replaced[:3])}")
        return [junit, xml]
    for run in (junit, xml):
        reporter = run.mode.split("-", 1)[1]
        with tempfile.TemporaryDirectory(prefix="catch2-", ignore_cleanup_errors=True) as own:
            report = os.path.join(own, "report.xml")
            command = [f"build/{name}", "-r", reporter, "-o", report]
            out, run.exit_code, run.timed_out = run_process(command, work, timeout_s)
            kill_orphans()
            run.output = out[-3000:]
            read_report(run, report, test_file)
        settle_exit(run)
    fold_sections(junit, {str(r["id"]) for r in xml.records if r.get("t") == "report"})
    return [junit, xml]


STRONG = set("TDBRGSCi")  # nm's kinds of a global definition that wins over a weak one
# the framework's, the C++ runtime's and the standard library's namespaces, as mangled names begin
RESERVED = (
    "_ZN5Catch",
    "_ZNK5Catch",
    "_ZSt",
    "_ZNSt",
    "_ZNKSt",
    "_ZN9__gnu_cxx",
    "_ZNK9__gnu_cxx",
    "_ZN10__cxxabiv1",
)
# the exercise's own Catch main: the one object without code under test
FRAMEWORK_OBJECT = os.path.join("test", "tests-main.cpp.o")
RUNTIME_LIBRARIES = ("libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1")


def replaced_symbols(objects_dir: str, test_file: str) -> list[str]:
    """The global symbols the code under test defines in another's place, read from the object files under
    ``objects_dir``: every object but the framework's holds code under test (the tests' object includes the
    solution's header). A definition of a name that a runtime library (libc, libstdc++ ...) defines (strong,
    or any of a C name: the executable's own definition is the one every caller gets); a strong definition
    of a name another object also defines; a strong one in the framework's, the C++ runtime's or the standard
    library's namespace; and, in the solution's own objects, any name in Catch's namespace."""
    objects = sorted(glob.glob(os.path.join(objects_dir, "**", "*.o"), recursive=True))
    defined = {os.path.relpath(path, objects_dir): _defined(path) for path in objects}
    owners: dict[str, list[str]] = {}  # symbol -> the objects that define it
    for rel, symbols in defined.items():
        for symbol in symbols:
            owners.setdefault(symbol, []).append(rel)
    runtime = _runtime_symbols()
    found = []
    for rel, symbols in defined.items():
        if rel == FRAMEWORK_OBJECT:
            continue
        solution_object = rel != test_file + ".o"
        for symbol, kind in symbols.items():
            strong = kind in STRONG
            elsewhere = [owner for owner in owners[symbol] if owner != rel]
            if symbol in runtime and (strong or not symbol.startswith("_Z")):  # an inline C function too
                found.append(f"{symbol} (in {rel}, also defined by the C or C++ runtime)")
            elif strong and symbol.startswith(RESERVED):
                found.append(f"{symbol} (a reserved namespace, in {rel})")
            elif solution_object and symbol.startswith(RESERVED[:2]):  # the solution never includes Catch
                found.append(f"{symbol} (the framework's namespace, in {rel})")
            elif strong and elsewhere:
                found.append(f"{symbol} (in {rel}, also defined in {elsewhere[0]})")
    return found


def _defined(path: str, dynamic: bool = False) -> dict[str, str]:
    """Global symbols defined in the object file (or, ``dynamic``, exported by the shared library) at
    ``path``: name (without a symbol version) -> nm's kind letter."""
    command = ["nm", "--defined-only", "--extern-only", "--portability", *(["-D"] if dynamic else []), path]
    out, code, _ = run_process(command, ".", 120)
    if code != 0:
        raise RuntimeError(f"nm could not read {path}: {out[-300:]}")
    return {f[0].split("@", 1)[0]: f[1] for f in (line.split() for line in out.splitlines()) if len(f) >= 2}


def _runtime_symbols() -> set[str]:
    """What the C and C++ runtime libraries the test executable links against define, where the compiler
    finds them."""
    compiler = shutil.which("c++") or shutil.which("g++")
    found: set[str] = set()
    for library in RUNTIME_LIBRARIES if compiler else ():
        out, code, _ = run_process([str(compiler), f"-print-file-name={library}"], ".", 60)
        path = out.strip()
        if code == 0 and os.path.isabs(path) and os.path.exists(path):
            found |= set(_defined(path, dynamic=True))
    return found


def settle_exit(run: Run) -> None:
    """Catch2 exits with its count of failed assertions, so only "any failed" can be compared: a report
    whose verdict matches the exit status takes that status as its own (``judge`` then sees them agree)."""
    for end in (r for r in run.records if r.get("t") == "end"):
        if end["exitstatus"] == int(run.exit_code not in (0, None)):
            end["exitstatus"] = run.exit_code


def fold_sections(run: Run, cases: set[str]) -> None:
    """JUnit names a test case with sections ``case/section``; the XML reporter names the case. Rename
    ``case/...`` records to ``case`` when ``case`` is a test case the XML report names (the fold of the
    outcomes then fails the case if any of its sections failed)."""
    for record in run.records:
        name = str(record.get("id", ""))
        if record.get("t") == "report" and name not in cases:
            owner = [case for case in cases if name.startswith(case + "/")]
            if owner:
                record["id"] = max(owner, key=len)


def read_report(run: Run, path: str, test_file: str) -> None:
    """Add the records of the report at ``path`` (reporter named by ``run.mode``) to ``run``; the end
    record only when the report is complete, with exit status 1 if any test case failed, else 0."""
    junit = run.mode.endswith("junit")
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return
    results = _junit(root) if junit else _xml(root)
    run.records += [
        {"t": "report", "id": f"{test_file}::{case}", "phase": "call", "outcome": outcome}
        for case, outcome in results
    ]
    if _complete(root, "junit" if junit else "xml"):
        run.records.append({"t": "end", "exitstatus": int(any(o == "failed" for _, o in results))})


def _junit(root: ET.Element) -> list[tuple[str, str]]:
    found = []
    for case in root.iter("testcase"):
        tags = {child.tag for child in case}
        outcome = "failed" if tags & {"failure", "error"} else "skipped" if "skipped" in tags else "passed"
        found.append((case.get("name", "?"), outcome))
    return found


def _xml(root: ET.Element) -> list[tuple[str, str]]:
    found = []
    for case in root.iter("TestCase"):
        result = case.find("OverallResult")
        passed = result is not None and result.get("success") == "true"
        found.append((case.get("name", "?"), "passed" if passed else "failed"))
    return found


def _complete(root: ET.Element, reporter: str) -> bool:
    if reporter == "junit":
        return root.tag == "testsuites"
    return root.tag == "Catch" and root.find("OverallResultsCases") is not None
