"""Polyglot check: `metasearch bench polyglot --root DIR [--language L] [--image polyglot]`.

Against a checkout of github.com/Aider-AI/polyglot-benchmark, every exercise goes through the suite's
public API in a Docker sandbox on the polyglot image: ``prepare`` (and a check, independent of the suite's
own rule, that no test, test-data, example or ``.meta`` file reached the workspace), the trusted run of
the example solution (``expect``: it must find tests and pass them all), and ``grade`` of the untouched
stub workspace (it must fail). Prints one table per language (examples passed/total, stubs failed/total,
leaks, time) and every exercise that did not behave, with the reason; ``--jsonl FILE`` appends one line
per exercise, so a long run can be split (``--language``, ``--exercise``) and resumed (``--skip-done``).
Exits non-zero when any exercise misbehaved.

``--scan`` runs no sandbox: it reads every exercise's example solution as a candidate would hand it in and
prints, per language, how many the static tamper scan (``testrun/scan.py``) flags over their stubs, with each
finding: grading allows exactly those to every candidate of that exercise (the exercise asks for them).
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from collections import defaultdict
from pathlib import Path, PurePosixPath
from typing import Any

from metasearch.errors import MetasearchError
from metasearch.sandboxes.docker import DockerSandbox
from metasearch.sim.table import print_table
from metasearch.suites.polyglot import LANGUAGES, Exercise, PolyglotSuite, example_findings

# Independent of polyglot.TEST_PATHS on purpose: any path part that names a test, a spec or test data.
LEAK = re.compile(r"(^|[_\-./])(tests?|spec|cases)([_\-./]|$)|Test\.java$|^data$", re.IGNORECASE)


def leaks(ex: Exercise, workspace: Path) -> list[str]:
    """Files in ``workspace`` that are tests, test data, examples or Exercism metadata."""
    found = []
    for path in sorted(p for p in workspace.rglob("*") if p.is_file()):
        rel = path.relative_to(workspace).as_posix()
        parts = PurePosixPath(rel).parts
        if (
            rel in ex.tests
            or rel in ex.examples
            or parts[0] in (".meta", ".approaches", ".articles")
            or any(LEAK.search(part) for part in parts)
        ):
            found.append(rel)
    return found


def check(suite: PolyglotSuite, task_id: str, sandbox: DockerSandbox) -> dict[str, Any]:
    ex = suite.exercises[task_id]
    row: dict[str, Any] = {"task": task_id, "language": ex.language, "exercise": ex.name}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="i21-polyglot-check-") as tmp:
        suite.prepare(task_id, Path(tmp))
        workspace = Path(tmp) / suite.artifact_path
        row["leaks"] = leaks(ex, workspace)
        row["solution_visible"] = all((workspace / rel).is_file() for rel in ex.solution)
        try:
            ids, score, error = suite.example_run(task_id, sandbox)
            row["tests"], row["example_passed"] = len(ids), bool(ids) and score == 1.0
            row["example_error"] = None if row["example_passed"] else (error or "no tests found")[-600:]
        except MetasearchError as exc:
            row["tests"], row["example_passed"], row["example_error"] = 0, False, str(exc)[-600:]
        if row["example_passed"]:
            row.update(_grade(suite, task_id, workspace, sandbox, "stub"))
        else:
            row["stub_failed"], row["stub_error"] = None, "not graded: the example did not pass"
    row["time_s"] = round(time.perf_counter() - started, 1)
    return row


def _grade(suite: PolyglotSuite, task_id: str, workspace: Path, sandbox: DockerSandbox, what: str) -> dict:
    try:
        result = suite.grade(task_id, workspace, sandbox)
    except MetasearchError as exc:
        return {f"{what}_failed": False, f"{what}_error": f"grading raised: {exc}"}
    return {f"{what}_failed": result.score == 0.0, f"{what}_error": (result.error or "")[:300]}


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_language: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_language[row["language"]].append(row)
    table = []
    for language in sorted(by_language):
        group = by_language[language]
        table.append({
            "language": language,
            "exercises": len(group),
            "examples_passed": f"{sum(bool(r['example_passed']) for r in group)}/{len(group)}",
            "stubs_failed": f"{sum(bool(r.get('stub_failed')) for r in group)}/{len(group)}",
            "leaks": sum(len(r["leaks"]) for r in group),
            "time_s": f"{sum(r['time_s'] for r in group):.0f}",
        })  # fmt: skip
    return table


def scan_examples(root: Path, languages: list[str]) -> int:
    """The tamper scan over every example solution, as if each were a candidate's. What an example adds over
    its stub is allowed to every candidate of that exercise (the exercise asks for it): listed, not a failure."""
    table, flagged = [], []
    for language in languages:
        start = time.perf_counter()
        config = PolyglotSuite.Config(path=str(root), languages=[language], include_offline_gaps=True)
        exercises = PolyglotSuite(config).exercises.values()
        hits = 0
        for exercise in exercises:
            if found := example_findings(exercise):
                hits += 1
                flagged.append(f"{language}/{exercise.name}: {'; '.join(found[:3])}")
        table.append({"language": language, "exercises": len(exercises), "examples_flagged": hits,
                      "time_s": round(time.perf_counter() - start, 2)})  # fmt: skip
    print_table(table, ["language", "exercises", "examples_flagged", "time_s"])
    for line in flagged:
        print(f"allowed for every candidate of {line}")
    return 0


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="metasearch bench polyglot", description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="a polyglot-benchmark checkout")
    parser.add_argument("--language", action="append", choices=LANGUAGES, help="only these (repeatable)")
    parser.add_argument("--exercise", action="append", help="only these, e.g. go/bowling (repeatable)")
    parser.add_argument("--image", default="polyglot", help="sandbox image (a tag or a recipe name)")
    parser.add_argument("--jsonl", help="append one JSON line per exercise to this file")
    parser.add_argument("--skip-done", action="store_true", help="skip exercises already in --jsonl")
    parser.add_argument("--grade-timeout", type=float, default=600.0, help="seconds per grading run")
    parser.add_argument("--only-done", action="store_true", help="run nothing: report --jsonl's rows")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown too")
    parser.add_argument("--scan", action="store_true", help="only the tamper scan of the example solutions")
    args = parser.parse_args(argv)
    if args.scan:
        return scan_examples(Path(args.root), args.language or list(LANGUAGES))
    config = PolyglotSuite.Config(
        path=args.root,
        languages=args.language,
        exercises=args.exercise,
        grade_timeout_s=args.grade_timeout,
        include_offline_gaps=True,  # the table shows them, with why they fail
    )
    suite = PolyglotSuite(config)
    sandbox = DockerSandbox(DockerSandbox.Config(image=args.image), study="bench-polyglot")
    done: dict[str, dict[str, Any]] = {}
    if args.jsonl and (args.skip_done or args.only_done) and Path(args.jsonl).is_file():
        for line in Path(args.jsonl).read_text().splitlines():
            row = json.loads(line)
            done[row["task"]] = row
    rows = []
    try:
        for task in suite.tasks():
            if args.only_done and task.id not in done:
                continue
            if task.id in done:
                rows.append(done[task.id])
                continue
            row = check(suite, task.id, sandbox)
            rows.append(row)
            print(json.dumps({k: row[k] for k in ("task", "example_passed", "stub_failed", "time_s")}))
            if args.jsonl:
                with open(args.jsonl, "a") as f:
                    f.write(json.dumps(row) + "\n")
    finally:
        sandbox.sweep()
    columns = ["language", "exercises", "examples_passed", "stubs_failed", "leaks", "time_s"]
    print_table(summary(rows), columns)
    if args.markdown:
        print("| " + " | ".join(columns) + " |\n|" + "---|" * len(columns))
        for line in summary(rows):
            print("| " + " | ".join(str(line[c]) for c in columns) + " |")
    bad = [r for r in rows if not r["example_passed"] or not r.get("stub_failed") or r["leaks"]]
    for row in bad:
        if row["leaks"]:
            reason = f"files that must stay hidden reached the workspace: {row['leaks']}"
        elif not row["example_passed"]:
            reason = str(row["example_error"])
        else:
            reason = f"the stub did not fail: {row.get('stub_error') or 'it passed every test'}"
        print(f"{row['task']}: {reason.splitlines()[0][:200]}")
    return int(bool(bad))


if __name__ == "__main__":
    raise SystemExit(run())
