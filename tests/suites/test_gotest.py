"""Go's per-test transcripts from ``go test -json`` output (the event shape of Go 1.24's test2json)."""

from __future__ import annotations

from metasearch.suites.testrun import gotest, verdict
from metasearch.suites.testrun.channel import Run


def _events(results: dict[str, str], final: str) -> list[dict]:
    events = [{"Action": "start", "Package": "piglatin"}]
    for name, action in results.items():
        events.append({"Action": "run", "Package": "piglatin", "Test": name})
        events.append(
            {"Action": "output", "Package": "piglatin", "Test": name, "Output": f"=== RUN   {name}\n"}
        )
        indent = "    " * name.count("/")
        line = f"{indent}--- {action.upper()}: {name} (0.00s)\n"
        events.append({"Action": "output", "Package": "piglatin", "Test": name, "Output": line})
        events.append({"Action": action, "Package": "piglatin", "Test": name, "Elapsed": 0})
    last = "ok  \tpiglatin\t0.003s\n" if final == "pass" else "FAIL\tpiglatin\t0.003s\n"
    events.append({"Action": "output", "Package": "piglatin", "Output": last})
    events.append({"Action": final, "Package": "piglatin", "Elapsed": 0.003})
    return events


def _runs(events: list[dict], exit_code: int) -> list[Run]:
    runs = [Run("go-json", exit_code=exit_code), Run("go-verbose", exit_code=exit_code)]
    gotest.read_events(runs[0], events)
    gotest.read_lines(runs[1], "".join(str(e.get("Output") or "") for e in events))
    return runs


EXPECTED = [
    "go::TestPigLatin",
    "go::TestPigLatin/word_beginning_with_a",
    "go::TestPigLatin/word_beginning_with_p",
]


def test_a_passing_run_passes_every_test_parents_and_subtests() -> None:
    results = {"TestPigLatin/word_beginning_with_a": "pass", "TestPigLatin/word_beginning_with_p": "pass"}
    runs = _runs(_events({**results, "TestPigLatin": "pass"}, "pass"), 0)
    assert sorted(verdict.outcomes(runs[0])) == EXPECTED == sorted(verdict.outcomes(runs[1]))
    result = verdict.judge(EXPECTED, runs, fractional=False, what="tests")
    assert result["score"] == 1.0 and result["error"] is None


def test_a_failed_subtest_fails_the_task_and_is_named() -> None:
    results = {"TestPigLatin/word_beginning_with_a": "pass", "TestPigLatin/word_beginning_with_p": "fail"}
    runs = _runs(_events({**results, "TestPigLatin": "fail"}, "fail"), 1)
    result = verdict.judge(EXPECTED, runs, fractional=False, what="tests")
    assert result["score"] == 0.0 and "2 of 3 tests failed" in result["error"]
    assert "word_beginning_with_p" in result["error"]


def test_a_build_failure_has_no_test_and_a_forced_exit_is_caught() -> None:
    build = [{"Action": "output", "Package": "piglatin", "Output": "FAIL\tpiglatin [build failed]\n"}]
    build.append({"Action": "fail", "Package": "piglatin", "Elapsed": 0})
    failed = verdict.judge(EXPECTED, _runs(build, 1), fractional=False, what="tests")
    assert failed["score"] == 0.0 and "3 of 3 tests failed" in failed["error"]
    results = {name.removeprefix("go::"): "pass" for name in EXPECTED}
    forced = _runs(_events(results, "pass"), 3)  # a report of success, then exit status 3
    assert verdict.judge(EXPECTED, forced, fractional=False, what="tests")["flags"] == [verdict.TAMPER]


def test_the_two_transcripts_disagree_when_the_lines_are_forged() -> None:
    results = {name.removeprefix("go::"): "pass" for name in EXPECTED}
    events = _events(results, "pass")
    runs = _runs(events, 0)
    runs[1].records = [r for r in runs[1].records if "word_beginning_with_p" not in str(r.get("id"))]
    judged = verdict.judge(EXPECTED, runs, fractional=False, what="tests")
    assert judged["score"] == 0.0 and judged["flags"] == [verdict.INCONSISTENT]
