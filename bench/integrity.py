"""Integrity benchmark: `python bench/integrity.py [pytest options]` (or `metasearch bench integrity`).

Runs every hostile candidate the project keeps (the kernels scorer's attacks, the test-based suites' attacks
on code-edit and polyglot, the sandbox and study cases), each through the public API it attacks, and prints
one table: case, suite, what was recorded (score, flags, reason), whether the attack gained nothing, and the
time it took. The cases and their exact expectations live in the tests named below; this runs them (Docker
cases need a daemon and the sandbox image) and exits non-zero when any attack gained something.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from metasearch.sim.table import print_table

ROOT = Path(__file__).resolve().parents[1]
CASES = {
    "kernels": "tests/suites/test_kernels.py::test_attacks_on_the_grader_are_caught",
    "kernels (Docker)": "tests/suites/test_kernels.py::test_attacks_in_docker",
    "kernels (CUDA GPU)": "tests/suites/test_kernels.py::test_attacks_on_the_grader_are_caught_on_cuda",
    "code-edit": "tests/suites/test_tests_verdict.py::test_code_edit_attacks_gain_nothing",
    "polyglot": "tests/suites/test_tests_verdict.py::test_polyglot_attacks_gain_nothing",
    "code-edit + polyglot (Docker)": "tests/suites/test_tests_verdict.py::test_attacks_gain_nothing_in_docker",
    "polyglot (JavaScript)": "tests/suites/test_polyglot_js_java.py::test_javascript_is_graded_test_by_test",
    "polyglot (Java)": "tests/suites/test_polyglot_js_java.py::test_java_is_graded_test_by_test",
    "scan (Go, Rust, JS, Java, C++)": "tests/suites/test_tests_verdict.py::test_scan_other_languages",
    "scan (under another name)": "tests/suites/test_tests_verdict.py::test_the_scan_sees_a_route_under_another_name",
    "polyglot (JavaScript, guard alone)": (
        "tests/suites/test_polyglot_js_java.py::test_the_jest_guard_holds_where_the_scan_is_blind"
    ),
    "polyglot (JavaScript, worker threads)": (
        "tests/suites/test_polyglot_js_java.py::test_worker_threads_start_under_the_guard_too"
    ),
    "polyglot (Go, polyglot image)": "tests/suites/test_polyglot_real.py::test_forged_go_results_gain_nothing",
    "polyglot (C++, link check)": (
        "tests/suites/test_tests_verdict.py::test_a_symbol_put_in_the_frameworks_place_is_found_before_the_tests_run"
    ),
    "polyglot (C++, polyglot image)": (
        "tests/suites/test_polyglot_real.py::test_a_cpp_comparison_replaced_at_link_time_gains_nothing"
    ),
    "polyglot (Java equality, polyglot image)": (
        "tests/suites/test_polyglot_real.py::test_a_java_equals_that_says_equal_to_anything_gains_nothing"
    ),
    "polyglot (Java equality guard alone, polyglot image)": (
        "tests/suites/test_polyglot_real.py::test_the_java_equality_guard_asks_values_the_constructors_make"
    ),
    "polyglot (JavaScript, bent equality)": (
        "tests/suites/test_polyglot_js_java.py::test_values_that_bend_expects_equality_gain_nothing"
    ),
    "Python (inherited comparisons)": (
        "tests/suites/test_tests_verdict.py::test_a_comparison_inherited_from_the_standard_library_cannot_be_bent"
    ),
    "Python (a comparison that tells the probes apart)": (
        "tests/suites/test_tests_verdict.py::test_a_value_that_tells_the_probes_apart_is_caught_by_its_real_comparisons"
    ),
    "Python (tolerance, membership, order)": (
        "tests/suites/test_tests_verdict.py::test_a_value_that_takes_any_assertion_at_its_word_is_flagged"
    ),
    "code-edit (what the tests are made of)": (
        "tests/suites/test_test_shape.py::test_changing_what_the_tests_are_made_of_gains_nothing_in_code_edit"
    ),
    "polyglot Python (what the tests are made of)": (
        "tests/suites/test_test_shape.py::test_changing_what_the_tests_are_made_of_gains_nothing_in_polyglot"
    ),
    "Python (a change put back when first used)": (
        "tests/suites/test_test_shape.py::test_a_change_that_puts_itself_back_when_used_gains_nothing"
    ),
    "polyglot Python (unittest's fail put back when used)": (
        "tests/suites/test_test_shape.py::test_unittests_fail_put_back_when_used_gains_nothing_through_grade"
    ),
    "polyglot (Go, Java: the tests' names, polyglot image)": (
        "tests/suites/test_polyglot_real.py::test_a_solution_that_names_what_the_tests_declare_gains_nothing"
    ),
    "sandbox / study": "tests/sandboxes/test_hostile.py::test_hostile_case",
    "code-edit (other tasks' tests)": (
        "tests/suites/test_tests_verdict.py::test_a_code_edit_grading_run_holds_no_other_tasks_tests"
    ),
    "training (public generator)": (
        "tests/suites/test_training.py::test_a_study_key_keeps_the_held_out_labels_out_of_the_public_generator"
    ),
    "kernelbench (grader's memory)": (
        "tests/suites/test_adapters.py::test_kernelbench_grading_room_follows_what_the_reference_needs"
    ),
}


class Table:
    """A pytest plugin that keeps one row per case."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call" and not (report.when == "setup" and report.outcome != "passed"):
            return
        test, _, case = report.nodeid.partition("[")
        suite = next((name for name, node in CASES.items() if node == test), test)
        recorded = dict(report.user_properties).get("outcome", "")
        outcome = {"passed": "gained nothing", "skipped": "skipped"}.get(report.outcome, "GAINED / FAILED")
        self.rows.append({
            "case": case.rstrip("]")[:34],
            "suite": suite,
            "recorded": str(recorded).replace("\n", " ")[:90],
            "verdict": outcome,
            "time_s": f"{report.duration:.1f}",
        })  # fmt: skip


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="metasearch bench integrity", description=__doc__.splitlines()[0])
    parser.add_argument("--suite", action="append", choices=sorted(CASES), help="only these (repeatable)")
    args, extra = parser.parse_known_args(argv)
    table = Table()
    started = time.perf_counter()
    nodes = [str(ROOT / node) for name, node in CASES.items() if not args.suite or name in args.suite]
    options = ["-q", "-p", "no:randomly", "--no-header", "--rootdir", str(ROOT)]
    code = pytest.main([*options, *nodes, *extra], plugins=[table])
    print()
    print_table(table.rows, ["case", "suite", "recorded", "verdict", "time_s"])
    failed = sum(r["verdict"].startswith("GAINED") for r in table.rows)
    print(f"\n{len(table.rows)} cases, {failed} not stopped, {time.perf_counter() - started:.0f} s")
    return int(code)


if __name__ == "__main__":
    sys.exit(run())
