"""Per-test results of Java exercises from a grader-made build and the JUnit console launcher (grader side, stdlib only).

No Gradle (its wrapper downloads Gradle): the pristine test files lose their ``@Disabled`` lines (Aider's
edit), ``javac`` compiles ``src/main/java`` and ``src/test/java`` into a directory the grader made outside
the exercise folder (and ``src/main/java`` once more alone: a solution that builds only with the tests
names what they declare, ``tamper_suspect``), against the JUnit 5 and AssertJ jars in ``JARS`` (Debian's ``junit5`` and
``libassertj-core-java``: ``REQUIRED``), then ``junit-platform-console-standalone.jar`` runs the test classes
(selected by name, one per test file) once with ``--details=tree --reports-dir=<grader dir>``. The run
becomes two ``channel.Run`` transcripts for ``verdict.judge``: ``junit-tree`` from its tree on stdout
and ``junit-xml`` from the launcher's ``TEST-junit-jupiter.xml``. Test ids are
``<test file>::<method>()`` (the XML's testcase name; the tree's display name, the same for plain
``@Test`` methods, the only kind the benchmark uses).

End records only for complete reports: the XML's ``tests``/``failures``/``errors``/``skipped`` must match
its testcases; the tree must end with the launcher's summary, whose test counts must match its lines.
Either says exit status 1 when a test (or, for the tree, a container) failed, else 0, which must match
the launcher's (``judge`` calls a difference a forced exit). An early ``System.exit(0)`` leaves neither
the XML nor the summary: the run ended early.

The JVM runs with a grader-owned agent (``EqualityGuard.java``, built here against Debian's ASM, which
``junit5`` brings): every ``equals`` the solution defines is wrapped, and one that says "equal" to values
made up on the spot (a new ``Object``; a near miss of a string, number or collection; a twin of the
solution's own value with every field changed, made without a constructor) flags the run (``tamper_suspect``),
however its body hides that from the scan.

Weaker than the Python harnesses, like ``libtest.py``: both reports come from the JVM that runs
candidate code, so a candidate that forges both (and evades the early-exit scan) can still lie.
Exercises that need other libraries (``hangman``: RxJava, ``rest-api``: org.json) or a newer AssertJ
(``mazy-mice``: ``hasDimensions``, the benchmark pins 3.25.1) do not compile here.
Tested with OpenJDK 17 and Debian bookworm's jars (JUnit 5.9.2, AssertJ 3.14.0) and in the polyglot image
(OpenJDK 21, Debian 13's JUnit 5.10 and AssertJ 3.26).
"""

from __future__ import annotations

import os
import re
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Collection

from . import verdict
from .channel import Run, guard_grader, kill_orphans
from .libtest import read_text, run_process

JARS = "/usr/share/java"
COMPILE = (
    "junit-jupiter-api",
    "junit-jupiter-params",
    "apiguardian-api",
    "opentest4j",
    "junit-platform-commons",
)
REQUIRED = (*COMPILE, "assertj-core", "junit-platform-console-standalone", "asm")
GUARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "EqualityGuard.java")
TREE_LINE = re.compile(r"^([│ ]*)[├└]─ (.+?)(?: \d+ ms)? ([✔✘■↷])(?: .*)?$")  # slow tests show their time
TREE_OUTCOME = {"✔": "passed", "✘": "failed", "■": "failed", "↷": "skipped"}
MISSING_SYMBOL = re.compile(r"symbol:\s+(?:class|variable|method)\s+(\w+)")
SUMMARY = re.compile(r"^\[\s+(\d+) (tests|containers) (found|skipped|aborted|successful|failed)\s+\]$", re.M)


def run_junit_tests(
    work: str,
    test_files: list[str],
    *,
    timeout_s: float,
    jars: str = JARS,
    allowed: Collection[str] = (),
) -> list[Run]:
    """Build the exercise in ``work`` and run its test classes; the two transcripts of that run."""
    guard_grader()
    xml, tree = Run("junit-xml"), Run("junit-tree")
    missing = [name for name in REQUIRED if not os.path.isfile(os.path.join(jars, f"{name}.jar"))]
    if missing:
        xml.output = tree.output = f"missing jars in {jars}: {missing}"
        return [tree, xml]
    for rel in test_files:
        path = os.path.join(work, rel)
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(line for line in lines if "@Disabled" not in line)
    own = tempfile.mkdtemp(prefix="junit-")
    classes, reports = os.path.join(own, "classes"), os.path.join(own, "reports")
    sources = sorted(
        os.path.join(folder, name)
        for top in ("src/main/java", "src/test/java")
        for folder, _, names in os.walk(os.path.join(work, top))
        for name in names
        if name.endswith(".java")
    )
    jar = {name: os.path.join(jars, f"{name}.jar") for name in REQUIRED}
    compile_path = ":".join([*(jar[n] for n in COMPILE), jar["assertj-core"]])
    javac = ["javac", "-encoding", "UTF-8", "-d", classes, "-cp", compile_path, *sources]
    out, code, timed_out = run_process(javac, work, timeout_s)
    if code != 0:
        for run in (xml, tree):
            run.output, run.exit_code, run.timed_out = out[-3000:], code, timed_out
        return [tree, xml]  # no end record: it did not compile
    main = [p for p in sources if "/src/main/java/" in p]  # the solution alone, when its text names a test's
    if main and verdict.names_tests(
        "java", map(read_text, main), map(read_text, set(sources) - set(main)), allowed
    ):
        alone = ["javac", "-encoding", "UTF-8", "-d", os.path.join(own, "alone"), "-cp", compile_path, *main]
        alone_out, alone_code, _ = run_process(alone, work, timeout_s)
        named = sorted(set(MISSING_SYMBOL.findall(alone_out)) - set(allowed))
        if alone_code != 0 and (named or not MISSING_SYMBOL.search(alone_out)):
            verdict.tampered(
                (xml, tree), f"{verdict.NAMES_TESTS}: {', '.join(named[:3]) or alone_out[-300:]}"
            )
    agent, out = _agent(own, jar["asm"], work, timeout_s)
    if agent is None:
        for run in (xml, tree):
            run.output = f"the grader's equality guard did not build: {out[-2000:]}"
        return [tree, xml]  # no end record
    names = {class_name(rel): rel for rel in test_files}
    main_sources = sorted({os.path.basename(p) for p in sources if "/src/main/java/" in p})
    command = ["java", f"-javaagent:{agent}={','.join(main_sources)}"]
    command += ["-jar", jar["junit-platform-console-standalone"], "--disable-banner"]
    command += ["--disable-ansi-colors", "--details=tree", f"--reports-dir={reports}"]
    command += ["--class-path", f"{classes}:{jar['assertj-core']}", *(f"--select-class={n}" for n in names)]
    out, code, timed_out = run_process(command, work, timeout_s)
    kill_orphans()
    for run in (xml, tree):
        run.output, run.exit_code, run.timed_out = out[-3000:], code, timed_out
    read_xml(xml, os.path.join(reports, "TEST-junit-jupiter.xml"), names)
    full = {str(r["id"]) for r in xml.records if r.get("t") == "report"}
    read_tree(tree, out, names, full)
    verdict.guard_refusals((xml, tree), out)
    return [tree, xml]


def _agent(own: str, asm: str, work: str, timeout_s: float) -> tuple[str | None, str]:
    """Build the equality guard's agent jar under ``own``: its path (None if it did not build) and the
    build's output."""
    classes, jar = os.path.join(own, "agent"), os.path.join(own, "equality-guard.jar")
    out, code, _ = run_process(["javac", "-d", classes, "-cp", asm, GUARD], work, timeout_s)
    if code != 0:
        return None, out
    manifest = os.path.join(own, "agent.mf")
    with open(manifest, "w") as f:
        f.write(f"Premain-Class: metasearch.EqualityGuard\nClass-Path: {asm}\n")
    out, code, _ = run_process(
        ["jar", "--create", f"--file={jar}", f"--manifest={manifest}", "-C", classes, "."], work, timeout_s
    )
    return (jar if code == 0 else None), out


def class_name(rel: str) -> str:
    """``src/test/java/a/BTest.java`` -> ``a.BTest``."""
    inner = rel.split("src/test/java/", 1)[-1]
    return os.path.splitext(inner)[0].replace("/", ".")


def read_xml(run: Run, path: str, names: dict[str, str]) -> None:
    """Add the records of the launcher's legacy XML report to ``run``; the end record only when complete."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return
    counts = {"failed": 0, "skipped": 0, "passed": 0}
    cases = list(root.iter("testcase"))
    for case in cases:
        tags = {child.tag for child in case}
        outcome = "failed" if tags & {"failure", "error"} else "skipped" if "skipped" in tags else "passed"
        counts[outcome] += 1
        rel = names.get(case.get("classname", ""), case.get("classname", "?"))
        if outcome != "skipped":
            run.records.append(_report(rel, case.get("name", "?"), outcome))
    try:
        said = {k: int(root.get(k, "-1")) for k in ("tests", "failures", "errors", "skipped")}
    except ValueError:
        return
    if (
        root.tag == "testsuite"
        and said["tests"] == len(cases)
        and said["skipped"] == counts["skipped"]
        and said["failures"] + said["errors"] == counts["failed"]
    ):
        run.records.append({"t": "end", "exitstatus": int(counts["failed"] > 0)})


def read_tree(run: Run, output: str, names: dict[str, str], full: set[str]) -> None:
    """Add the records of the launcher's tree to ``run``; the end record only after a summary whose test
    counts match the tree's test lines (depth 2: engine, class, method). The tree cuts long names short
    (``...``): such a name becomes the one id in ``full`` (the XML's) that it begins."""
    counts = {"failed": 0, "skipped": 0, "passed": 0}
    rel = None
    for line in output.splitlines():
        found = TREE_LINE.match(line)
        if not found:
            continue
        depth, name, outcome = len(found.group(1)) // 3, found.group(2), TREE_OUTCOME[found.group(3)]
        if depth == 1:
            rel = names.get(name)
        elif depth == 2 and rel is not None:
            counts[outcome] += 1
            test_id = f"{rel}::{name}"
            if name.endswith("..."):
                whole = [i for i in full if i.startswith(test_id[:-3])]
                test_id = whole[0] if len(whole) == 1 else test_id
            if outcome != "skipped":
                run.records.append({"t": "report", "id": test_id, "phase": "call", "outcome": outcome})
    said = {(what, state): int(n) for n, what, state in SUMMARY.findall(output)}
    if ("tests", "found") not in said:
        return
    tests_failed = said.get(("tests", "failed"), -1) + said.get(("tests", "aborted"), -1)
    if (
        said[("tests", "found")] == sum(counts.values())
        and said.get(("tests", "successful")) == counts["passed"]
        and tests_failed == counts["failed"]
    ):
        failed = said.get(("tests", "failed"), 0) + said.get(("containers", "failed"), 0)
        run.records.append({"t": "end", "exitstatus": int(failed > 0)})


def _report(rel: str, name: str, outcome: str) -> dict[str, str]:
    return {"t": "report", "id": f"{rel}::{name}", "phase": "call", "outcome": outcome}
