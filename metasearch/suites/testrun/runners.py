"""The two test runners of the harness, and what they report over the channel.

- ``run_pytest``: pytest with ``Reporter`` as a plugin object; each report's (nodeid, phase, outcome). With
  ``collect_only``, the pristine tests' ids (no candidate code runs).
- ``run_direct``: our own runner, no pytest machinery: every test file's source is read before any of it
  runs, then plain ``test*`` functions and ``unittest.TestCase`` methods are called directly (setUp, the
  method, tearDown, cleanups). Fixtures and parametrization are not supported; such tests fail here.

Both call ``integrity()`` (``check.py``, bound by ``harness.main``) for their check and run it after
collection, after every test and at the end; the session ends with an ``end`` record. Stdlib only (pytest
is imported when run), loaded by ``harness.py`` as ``_ms_runners``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import types
from collections.abc import Callable
from typing import Any


class Reporter:
    """A pytest plugin object: streams collection, each phase's report and the end of the session.
    Pytest holds it where any code can find it (its plugin manager), and with it the channel and the
    check: this run's residual risk, which the direct run, whose are locals, does not share."""

    def __init__(self, send: Callable[[dict], None], integrity: Callable[[], Any]) -> None:
        self.send, self.integrity = send, integrity
        self.check: Callable[[], None] | None = None
        self.modules: dict[str, types.ModuleType] = {}

    def pytest_sessionstart(self, session: object) -> None:
        self.check, self.modules = self.integrity()

    def pytest_collectreport(self, report: types.SimpleNamespace) -> None:
        if report.outcome == "failed":
            self.send({"t": "collect_error", "id": report.nodeid})

    def pytest_collection_finish(self, session: types.SimpleNamespace) -> None:
        self.send({"t": "collected", "ids": [item.nodeid for item in session.items]})
        if self.check is not None:  # the code under test is imported: its classes are watched now
            for item in session.items:  # the test modules as pytest holds them (not as named in sys.modules)
                with contextlib.suppress(Exception):
                    self.modules[os.path.realpath(str(item.path))] = item.module
            self.check()

    def pytest_runtest_logreport(self, report: types.SimpleNamespace) -> None:
        self.send({"t": "report", "id": report.nodeid, "phase": report.when, "outcome": report.outcome})

    def pytest_runtest_logfinish(self, nodeid: str, location: object) -> None:
        if self.check is not None:
            self.check()

    def pytest_sessionfinish(self, session: object, exitstatus: int) -> None:
        if self.check is not None:
            self.check()
        self.send({"t": "end", "exitstatus": int(exitstatus)})


def run_pytest(
    send: Callable[[dict], None],
    root: str,
    files: list[str],
    collect_only: bool,
    integrity: Callable[[], Any],
) -> int:
    import pytest

    sys.path.append(root)
    # Plugins installed beside pytest are not loaded: the run is the same wherever it happens (the sandbox
    # image installs none; a local sandbox's environment may hold many), and none of their code runs in it.
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    # A grader-owned configuration, read before candidate code exists: repository ini files cannot add
    # options or plugins.
    with tempfile.TemporaryDirectory(prefix="harness-", ignore_cleanup_errors=True) as own:
        ini = os.path.join(own, "pytest.ini")
        with open(ini, "w") as f:
            f.write("[pytest]\naddopts =\n")
        args = ["-q", "-p", "no:cacheprovider", "-c", ini, "--rootdir", root, "--confcutdir", root]
        args += ["--collect-only"] if collect_only else []
        return int(pytest.main([*args, *files], plugins=[Reporter(send, integrity)]))


def run_direct(
    send: Callable[[dict], None],
    root: str,
    files: list[str],
    integrity: Callable[[], Any],
    freeze: Callable[[type], bool] | None = None,
) -> int:
    """Our own runner. What it decides with (the channel, the check, the tests and their outcomes) lives
    in its locals, which code can reach only through a frame: what the audit hook reports. A test class,
    and the classes of its test files it is built on, are frozen (``frozen.py``) once set up, before its
    first test runs: code under test cannot give it a method that hides the assertion it inherits."""
    import unittest

    with contextlib.suppress(ImportError):  # watched from the start when the tests use it (pytest.raises)
        import pytest  # noqa: F401
    sources = {}
    for rel in files:
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            sources[rel] = f.read()
    sys.path.append(root)
    check, modules = integrity()
    call, outcome_of, tests_of, case = _call, _outcome, _tests_of, unittest.TestCase
    tests: list[tuple[str, Any]] = []
    for rel, source in sources.items():
        path = os.path.join(root, rel)
        folder = os.path.dirname(path)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        module = types.ModuleType(os.path.basename(rel)[:-3])
        module.__file__ = path
        sys.modules[module.__name__] = module
        try:
            exec(compile(source, path, "exec"), module.__dict__)
        except BaseException:  # an import failure fails the file's tests, whatever it is
            send({"t": "collect_error", "id": rel})
            continue
        modules[os.path.realpath(path)] = module
        tests += tests_of(rel, module, case)
    send({"t": "collected", "ids": [test_id for test_id, _ in tests]})
    check()  # the code under test is imported: its classes are watched now
    names = frozenset(module.__name__ for module in modules.values())
    module_of = vars(type)["__module__"].__get__

    def settle(cls: type) -> None:
        for base in cls.__mro__:
            if freeze is not None and module_of(base) in names:
                freeze(base)

    failed = 0
    ready: dict[type, bool] = {}
    for test_id, target in tests:
        outcome = call(target, ready, case, settle)
        failed += outcome == "failed"
        send({"t": "report", "id": test_id, "phase": "call", "outcome": outcome})
        check()
    for cls in ready:
        outcome_of(getattr(cls, "tearDownClass", lambda: None))
    check()
    send({"t": "end", "exitstatus": int(failed > 0)})
    return int(failed > 0)


def _tests_of(rel: str, module: types.ModuleType, case: Any) -> list[tuple[str, Any]]:
    """What pytest would collect from ``module``: ``test*`` functions, TestCase and ``Test*`` classes."""
    found: list[tuple[str, Any]] = []
    for name, obj in list(vars(module).items()):
        if isinstance(obj, types.FunctionType) and name.startswith("test"):
            found.append((f"{rel}::{name}", obj))
        elif isinstance(obj, type) and issubclass(obj, case) and getattr(obj, "__test__", True):
            import unittest

            for method in unittest.TestLoader().getTestCaseNames(obj):
                found.append((f"{rel}::{name}::{method}", (obj, method)))
        elif isinstance(obj, type) and name.startswith("Test") and getattr(obj, "__test__", True):
            for method in (m for m in dir(obj) if m.startswith("test")):
                found.append((f"{rel}::{name}::{method}", (obj, method)))
    return found


def _call(target: Any, ready: dict[type, bool], base: Any, settle: Callable[[type], None]) -> str:
    if isinstance(target, types.FunctionType):
        return _outcome(target)
    cls, method = target
    if not issubclass(cls, base):
        settle(cls)
        return _outcome(lambda: getattr(cls(), method)())
    if cls not in ready:
        ready[cls] = _outcome(getattr(cls, "setUpClass", lambda: None)) == "passed"
        settle(cls)  # what setUpClass gives the class is in place; nothing changes it from here on
    if not ready[cls]:
        return "failed"
    if getattr(cls, "__unittest_skip__", False):
        return "skipped"
    case = cls(method)
    expecting = getattr(getattr(cls, method), "__unittest_expecting_failure__", False)

    def run() -> None:
        case.setUp()
        try:
            getattr(case, method)()
        finally:
            case.tearDown()
            case.doCleanups()

    outcome = _outcome(run)
    if expecting:
        return "skipped" if outcome == "failed" else "failed"
    return outcome


def _outcome(
    call: Callable[[], object], _exception: type[BaseException] = BaseException, _type: type = type
) -> str:
    """A test's outcome; what it uses after the test has run is bound in its defaults."""
    try:
        call()
    except _exception as exc:  # SystemExit and the like fail the test, as under pytest
        return "skipped" if _type(exc).__name__ in ("SkipTest", "Skipped") else "failed"
    return "passed"
