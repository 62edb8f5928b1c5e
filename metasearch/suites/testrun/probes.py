"""The questions the comparison checks (``comparisons.py``) ask of a class and its comparisons.

Each asks an instance made without ``__init__`` (or given its state by the base that defines the
comparison) about values made up just now: whether its own ``__eq__`` says "equal" to them (``__ne__``:
"not equal" to none), whether its ordering puts it on both sides of one value, whether its subtraction
ignores its operand, and the same of a comparison it inherits, written in Python outside the code under
test. Closures that look up no name when they run (what they call runs the code under test). Stdlib only,
loaded by ``harness.py`` as ``_ms_probes``.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # (where it runs, the harness loads each module by path)
    from .authorship import Authorship

_watching = sys.modules["_ms_watching"]  # loaded before this module (``harness._sibling``)
# a built-in type's own comparison (it looks at its own storage only)
DESCRIPTORS = (types.WrapperDescriptorType, types.MethodDescriptorType)


class Probes(NamedTuple):
    """The questions asked of a class and its comparisons (``probes``, ``orders``, ``inheritance``)."""

    unwrapped: Callable[[Any], Any]
    lies_about: Callable[..., bool]
    given_state: Callable[[Any, object], None]
    both_ways: Callable[[Any, object, object], bool]
    ignores_operand: Callable[[Any, Any], bool]
    inherited: Callable[[Any, str], Any]
    inherits_comparison: Callable[[Any], bool]
    inherited_lies: Callable[[Any], bool]


def probes(
    where: Authorship,
) -> tuple[Callable[[Any], Any], Callable[..., bool], Callable[[Any, object], None]]:
    """``(unwrapped, lies_about, given_state)``. ``lies_about(cls, method, lie, probes=())``: whether
    ``method`` (a comparison of ``cls``, not the tests' or a library's the tests name) answers ``lie`` about
    a value made up just now (or one of ``probes``), asked of an instance made without ``__init__``."""
    outside_root, in_tests, code_under_test, defined_in, named_by_tests, ours = (
        where.outside_root, where.in_tests, where.code_under_test, where.defined_in, where.named_by_tests,
        where.ours,
    )  # fmt: skip
    isinstance_, hasattr_, any_, list_, int_, object_, exception = (
        isinstance, hasattr, any, list, int, object, BaseException,
    )  # fmt: skip
    token_hex, descriptors = _watching.token_hex, DESCRIPTORS

    def instance_of(cls: Any) -> Any:
        try:
            return cls.__new__(cls)
        except exception:
            return object_.__new__(cls)

    def given_state(cls: Any, instance: object) -> None:
        """Run ``cls.__init__`` on ``instance`` with no argument, or else with one empty one."""
        arguments: tuple[tuple[Any, ...], ...] = ((), ("",), ([],), ({},), (0,))
        for args in arguments:
            try:
                cls.__init__(instance, *args)
                return
            except exception:
                continue

    def unwrapped(method: Any) -> Any:
        """The candidate's own method that our watch asks, in place of the watch."""
        return method.__defaults__[0] if ours(method) and code_under_test(method.__defaults__[0]) else method

    def lies_about(cls: Any, method: Any, lie: bool, probes: tuple[Any, ...] = ()) -> bool:
        if method is None or isinstance_(method, descriptors) or ours(method):
            return False  # absent, a built-in type's own comparison, or our watch
        where = defined_in(method)
        if in_tests(where) or (outside_root(where) and named_by_tests(cls)):
            return False  # the tests' own helpers, and a library's (unittest.mock.ANY) that the tests name
        try:
            instance = instance_of(cls)
        except exception:
            return False
        if (outside_root(where) or where.startswith("<frozen ")) and any_(
            code_under_test(member) for member in list_(cls.__dict__.values())
        ):
            # a library's class with a helper the code under test put in (UserList's cast): its comparison
            # reads the state the class's __init__ gives (UserList's data), so the instance gets it
            given_state(cls, instance)
        token = token_hex(8)
        for probe in probes or (object_(), f"probe-{token}", int_(token, 16), [token]):
            try:
                bound = method.__get__(instance, cls) if hasattr_(method, "__get__") else method
                if bound(probe) is lie:
                    return True
            except exception:  # refusing one kind of value does not excuse accepting another
                continue
        return False

    return unwrapped, lies_about, given_state


def orders(where: Authorship, lies_about: Callable[..., bool]) -> tuple[Callable[..., bool], ...]:
    """``(both_ways, ignores_operand)``: an ordering that puts an instance on both sides of one value, a
    subtraction that gives the same difference from numbers far apart."""
    outside_root, in_tests, defined_in, named_by_tests = (
        where.outside_root, where.in_tests, where.defined_in, where.named_by_tests,
    )  # fmt: skip
    isinstance_, hasattr_, any_, int_, float_, abs_, exception = (
        isinstance, hasattr, any, int, float, abs, BaseException,
    )  # fmt: skip
    token_hex, descriptors = _watching.token_hex, DESCRIPTORS

    def both_ways(cls: Any, one: object, other: object) -> bool:
        """Whether an instance is, by its own ordering methods, both less and greater than a value made
        up just now: it passes ``assertLess`` and ``assertGreater`` alike."""
        if one is None or other is None:
            return False
        token = token_hex(8)
        return any_(
            lies_about(cls, one, True, (probe,)) and lies_about(cls, other, True, (probe,))
            for probe in (int_(token, 16), f"probe-{token}")
        )

    def ignores_operand(cls: Any, method: Any) -> bool:
        """Whether an own ``__sub__``/``__rsub__`` (not the tests') gives the same difference from two
        numbers two million apart: a value every tolerance check (``assertAlmostEqual``,
        ``pytest.approx``: they subtract and compare the difference with a bound) takes for any number."""
        if method is None or isinstance_(method, descriptors):
            return False
        where = defined_in(method)
        if in_tests(where) or (outside_root(where) and named_by_tests(cls)):
            return False
        far = 1e6 + int_(token_hex(2), 16)
        try:
            instance = cls.__new__(cls)
            bound = method.__get__(instance, cls) if hasattr_(method, "__get__") else method
            low, high = float_(bound(-far)), float_(bound(far))
        except exception:
            return False  # refusing numbers, or needing state this instance lacks
        return abs_(high - low) < 1.0

    return both_ways, ignores_operand


def inheritance(
    where: Authorship, given_state: Callable[[Any, object], None]
) -> tuple[Callable[..., Any], ...]:
    """``(inherited, inherits_comparison, inherited_lies)``: the questions about a comparison a class
    inherits, written in Python outside the code under test."""
    outside_root, code_under_test, defined_in, module_file, file_under_test, ours = (
        where.outside_root, where.code_under_test, where.defined_in, where.module_file,
        where.file_under_test, where.ours,
    )  # fmt: skip
    isinstance_, any_, list_, int_, object_, exception = isinstance, any, list, int, object, BaseException
    dict_of, mro_of = vars(type)["__dict__"].__get__, vars(type)["__mro__"].__get__
    token_hex, descriptors = _watching.token_hex, DESCRIPTORS

    def inherited(cls: Any, name: str) -> Any:
        """The class in ``cls``'s MRO past itself that defines ``name`` in Python (None: none, built in,
        or the code under test's: asked as that class's own)."""
        if name in dict_of(cls):
            return None
        for base in mro_of(cls)[1:]:
            if name in dict_of(base):
                method = dict_of(base)[name]
                if base is object_ or isinstance_(method, descriptors) or ours(method):
                    return None  # a built-in type's own comparison looks at its own storage only
                where = defined_in(method)  # the standard library's frozen modules have no path
                return base if outside_root(where) or where.startswith("<frozen ") else None
        return None

    def inherits_comparison(cls: Any) -> bool:
        """A class of the code under test that compares by an ``__eq__``/``__ne__`` it inherits, written
        in Python outside that code: such a comparison calls methods the class can override
        (``_UserList__cast``, ``__iter__``, ``__len__``)."""
        own = cls.__dict__
        if "__eq__" in own and "__ne__" in own:
            return False
        if not any_(inherited(cls, n) is not None for n in ("__eq__", "__ne__")):
            return False
        where = module_file(cls)
        # its module's file, or (a class can name any module) the code of its own methods
        return file_under_test(where) or any_(code_under_test(member) for member in list_(own.values()))

    def inherited_lies(cls: Any) -> bool:
        """Whether an instance of ``cls``, given its state by the base that defines the comparison (its
        ``__init__`` with no argument, or one empty one), says it equals a value made up just now."""
        for name, lie in (("__eq__", True), ("__ne__", False)):
            base = inherited(cls, name)
            if base is None:
                continue
            try:
                instance = cls.__new__(cls)
            except exception:
                continue
            given_state(base, instance)
            token = token_hex(8)
            for probe in (object_(), f"probe-{token}", int_(token, 16), [token], {token}, {token: token}):
                try:
                    if base.__dict__[name](instance, probe) is lie:
                        return True
                except exception:
                    continue
        return False

    return inherited, inherits_comparison, inherited_lies


def asked(where: Authorship) -> Probes:
    """Every question, each closure built from ``where`` and the ones before it."""
    unwrapped, lies_about, given_state = probes(where)
    return Probes(
        unwrapped, lies_about, given_state, *orders(where, lies_about), *inheritance(where, given_state)
    )
