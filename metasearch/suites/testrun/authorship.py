"""Whose a file, a class member or a comparison is, as the comparison checks (``comparisons.py``) ask it.

The folder under test is the code under test's, but for the test files; a library's or this grader's file
is outside it; code compiled from a string is the code under test's. Each answer is remembered per path
(every check asks about every class). Closures that look up no name when they run (the audit hook calls
some of them). Stdlib only, loaded by ``harness.py`` as ``_ms_authorship``.
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Callable
from typing import Any, NamedTuple

_watching = sys.modules["_ms_watching"]  # loaded before this module (``harness._sibling``)


class Authorship(NamedTuple):
    """Whose a file, a class member or a comparison is (``authorship``); each remembers per path."""

    outside_root: Callable[[str], bool]
    in_tests: Callable[[str], bool]
    file_under_test: Callable[[str], bool]
    code_under_test: Callable[[object], bool]
    defined_in: Callable[[object], str]
    named_by_tests: Callable[[Any], bool]
    module_file: Callable[[Any], str]
    written_here: Callable[[Any, object], bool]
    ours: Callable[[object], bool]


def files(
    root: str, tests: frozenset[str]
) -> tuple[Callable[[str], bool], Callable[[str], bool], Callable[[str], bool], Callable[[object], bool]]:
    """``(outside_root, in_tests, file_under_test, code_under_test)``, remembered per path (every check asks
    about every class)."""
    getattr_, str_, bool_ = getattr, str, bool
    isabs, realpath, sep = os.path.isabs, os.path.realpath, os.sep
    outside: dict[str, bool] = {}  # per path
    testing: dict[str, bool] = {}

    def outside_root(filename: str) -> bool:
        """An absolute path outside the folder under test (code compiled from a string has no such path);
        remembered per path (every check asks about every class)."""
        found = outside.get(filename)
        if found is None:
            found = outside[filename] = isabs(filename) and not realpath(filename).startswith(root + sep)
        return found

    def in_tests(filename: str) -> bool:
        found = testing.get(filename)
        if found is None:
            found = testing[filename] = isabs(filename) and realpath(filename) in tests
        return found

    def file_under_test(where: str) -> bool:
        return bool_(where) and not outside_root(where) and not in_tests(where)

    def code_under_test(member: object) -> bool:
        """Whether a class member is a function (method, static or class method, property) whose code
        the code under test wrote: in one of its files, or compiled from a string."""
        for inner in (getattr_(member, "__func__", None), getattr_(member, "fget", None), member):
            code = getattr_(inner, "__code__", None)
            if code is not None:
                where = str_(code.co_filename)
                return not outside_root(where) and not in_tests(where) and not where.startswith("<frozen ")
        return False

    return outside_root, in_tests, file_under_test, code_under_test


def authorship(
    root: str, tests: frozenset[str], text: tuple[str, ...], trusted_class: Callable[[Any], bool]
) -> Authorship:
    """Whose a file, a class member or a comparison is: ``files``' closures and the ones below."""
    outside_root, in_tests, file_under_test, code_under_test = files(root, tests)
    getattr_, any_, type_, str_, bool_, range_ = getattr, any, type, str, bool, range
    modules, isabs, function_type, module_type = (
        sys.modules,
        os.path.isabs,
        types.FunctionType,
        types.ModuleType,
    )
    module_of, module_dict = vars(type)["__module__"].__get__, vars(module_type)["__dict__"].__get__
    watch_code = _watching.WATCH_CODE

    def defined_in(method: object) -> str:
        """The file that defines a comparison: its code's, through method, partial and wrapper layers; for
        a callable object without code (``unittest.mock``'s proxies), its type's module's file."""
        for _ in range_(8):
            inner = getattr_(method, "__func__", None) or getattr_(method, "func", None)
            inner = inner or getattr_(method, "__wrapped__", None)
            if inner is None or inner is method:
                break
            method = inner
        code = getattr_(method, "__code__", None)
        if code is not None:
            return str_(code.co_filename)
        module = modules.get(getattr_(type_(method), "__module__", ""))
        return str_(getattr_(module, "__file__", "") or "")

    def named_by_tests(cls: Any) -> bool:
        """Whether the test files name the module that defines ``cls`` (``mock`` for ``unittest.mock``):
        a library's always-equal helper is the tests' only when they use that library."""
        name = str_(getattr_(cls, "__module__", "") or "").rsplit(".", 1)[-1]
        return bool_(name) and any_(name in one for one in text)

    def module_file(cls: Any) -> str:
        name = module_of(cls)
        module = modules.get(name) if type_(name) is str_ else None  # (a class body may bind any object)
        return str_(module_dict(module).get("__file__") or "") if type_(module) is module_type else ""

    def written_here(cls: Any, member: object) -> bool:
        """A comparison of a class of the code under test's, written by it: in one of its files, or
        compiled from a string (a dataclass's) for a class of its module (never a library's class, which
        the snapshot holds as it is)."""
        if trusted_class(cls) or not code_under_test(member):
            return False
        code = getattr_(getattr_(member, "__func__", member), "__code__", None)
        where = str_(getattr_(code, "co_filename", ""))
        return file_under_test(where) if isabs(where) else file_under_test(module_file(cls))

    def ours(method: object) -> bool:
        return type_(method) is function_type and getattr_(method, "__code__", None) is watch_code

    return Authorship(
        outside_root, in_tests, file_under_test, code_under_test, defined_in, named_by_tests, module_file,
        written_here, ours,
    )  # fmt: skip
