"""Classes that claim to equal anything: found by probing, then watched (``watching.py``) as the tests run.

``comparisons(...)`` makes the three closures the harness needs:

- ``always_equal()`` (each check): the live classes (known before the code under test ran or not) whose
  own ``__eq__`` says an instance equals a value made up just now (a fresh object, a random string, number
  or list), whose own ``__ne__`` says it differs from none of them, whose own subtraction ignores its
  operand, whose ordering puts an instance on both sides of one value, or whose comparison inherited from
  library code says so. Each class of the code under test that compares by its own ``__eq__``/``__ne__``
  or by one written in Python outside it (``collections.UserList``'s, the abstract ``Set``'s) is given a
  watched comparison: probing a made-up instance with made-up values misses a liar that tells probes apart,
  the watch asks its real instances about the tests' own values (caught, it is reported through the hook).
- ``watch_new(cls)`` (the audit hook, at each class statement): the same watch, before any instance exists.
- ``enter(classes)`` (the first check): the functions of the classes the tests name, put in
  ``entries.Entry`` so that the hook sees each call the tests make into them.

Each closure is built by a small factory below from the closures of the ones before it (``Authorship``
in ``authorship.py``: whose a file or member is; ``Probes``: the questions asked of a class). Everything
they use, built-ins and memos included, is bound when they are made (none is looked up by name when it
runs), so code that rebinds a module's name, or runs in the middle of a check (a comparison it asks),
cannot change what the check does. Stdlib only, loaded by ``harness.py`` as ``_ms_comparisons``.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # (where it runs, the harness loads each module by path: ``_authorship`` below)
    from .authorship import Authorship

_shape = sys.modules["_ms_shape"]  # loaded before this module (``harness._sibling``)
_entries = sys.modules["_ms_entries"]
_holders = sys.modules["_ms_holders"]
_watching = sys.modules["_ms_watching"]
_authorship = sys.modules["_ms_authorship"]
Holder = tuple[str, Any, tuple[str, ...], tuple[Any, ...]]  # as ``holders.hold`` makes them
# a built-in type's own comparison (it looks at its own storage only)
DESCRIPTORS = (types.WrapperDescriptorType, types.MethodDescriptorType)
COMPARING = tuple(_watching.WATCHED)  # __eq__, __ne__, __contains__, the orders, __sub__, __rsub__


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


def comparisons(
    root: str, tests: frozenset[str], text: tuple[str, ...], trusted_class: Callable[[Any], bool]
) -> tuple[Callable[[], tuple[list[str], bool]], Callable[[Any], None], Callable[[list[Any]], list[Holder]]]:
    """``(always_equal, watch_new, enter)`` as the module's docstring says, for the folder under test
    ``root``, the test files ``tests`` (real paths) with their sources ``text``; ``trusted_class``: a class
    that existed before the code under test ran or that library or test code made (``shape.Shape``)."""
    where = _authorship.authorship(root, tests, text, trusted_class)
    unwrapped, lies_about, given_state = probes(where)
    asked = Probes(
        unwrapped, lies_about, given_state, *orders(where, lies_about), *inheritance(where, given_state)
    )
    watched: dict[int, tuple[Any, dict[str, Any]]] = {}  # id(class) -> (class, the comparisons given it)
    watch, watch_new = watcher(where, asked.inherited, watched)
    return always_equal(where, asked, watch, watched), watch_new, entering(where, trusted_class)


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


def watcher(
    where: Authorship, inherited: Callable[[Any, str], Any], watched: dict[int, tuple[Any, dict[str, Any]]]
) -> tuple[Callable[..., list[str]], Callable[[Any], None]]:
    """``(watch, watch_new)``: give a class watched comparisons (``watching.watching``), remembered in
    ``watched`` (id(class) -> (class, the comparisons given it))."""
    written_here = where.written_here
    id_, any_, type_, exception, issubclass_ = id, any, type, BaseException, issubclass
    watching, class_label, comparing = _watching.watching, _watching.class_label, COMPARING
    function_type, type_setattr, dict_of = (
        types.FunctionType,
        type.__setattr__,
        vars(type)["__dict__"].__get__,
    )

    def watch(cls: Any, own_code: bool, in_hook: bool = False) -> list[str]:
        """Give ``cls`` watched comparisons (``watching.watching``) in place of its own plain functions that
        the code under test wrote (``own_code``), or of the ``__eq__``/``__ne__`` it inherits; one the class
        lost since (its own put back over ours) is reported. The class is read through ``type``'s own
        descriptors (a metaclass's ``__dict__`` or ``__qualname__`` would run its code); ``in_hook``: only
        its own functions (``watch_new``)."""
        space = dict_of(cls)
        label = class_label(cls)
        given = watched.get(id_(cls), (cls, {}))[1]
        found = [
            f"{label}.{name} is no longer the harness's watch"
            for name in given
            if space.get(name) is not given[name]
        ]
        for name in comparing:
            if name in given:
                continue
            own = space.get(name)
            if own_code and type_(own) is function_type and written_here(cls, own):
                compared = own
            elif not in_hook and name in ("__eq__", "__ne__") and (base := inherited(cls, name)) is not None:
                compared = dict_of(base)[name]
            else:
                continue
            try:
                type_setattr(cls, name, watching(compared, name, label))
            except exception:
                continue  # a class that takes no attribute
            given[name] = space.get(name)
        watched[id_(cls)] = (cls, given)
        return found

    def watch_new(cls: Any) -> None:
        """Watch a class the moment its statement made it (the audit hook calls this, for every class
        statement): a class made per call is compared before the next check. Only its plain functions are
        looked at, through built-in descriptors: no code of the candidate's may run in the hook."""
        if not issubclass_(type_(cls), type_):
            return
        own = dict_of(cls)
        plain = [own.get(name) for name in comparing if type_(own.get(name)) is function_type]
        if plain and any_(written_here(cls, member) for member in plain):
            watch(cls, True, in_hook=True)

    return watch, watch_new


def always_equal(
    where: Authorship,
    questions: Probes,
    watch: Callable[..., list[str]],
    watched: dict[int, tuple[Any, dict[str, Any]]],
) -> Callable[[], tuple[list[str], bool]]:
    """``always_equal()``: the findings about every live class (``ALWAYS_EQUAL`` and the class), each
    asked once per class and comparison, and whether any class's own code was asked; each class of the
    code under test that compares (or is watched already) is watched."""
    written_here = where.written_here
    unwrapped, lies_about, both_ways, ignores_operand, inherits_comparison, inherited_lies = (
        questions.unwrapped, questions.lies_about, questions.both_ways, questions.ignores_operand,
        questions.inherits_comparison, questions.inherited_lies,
    )  # fmt: skip
    hasattr_, id_, any_, tuple_, list_ = hasattr, id, any, tuple, list
    all_classes, class_label, always, comparing = (
        _shape.all_classes, _watching.class_label, _watching.ALWAYS_EQUAL, COMPARING,
    )  # fmt: skip
    lies = (("__eq__", True), ("__ne__", False), ("__contains__", True))
    opposites = (("__lt__", "__gt__"), ("__le__", "__ge__"))  # never both true of one value and another
    probed: dict[
        tuple[Any, ...], tuple[bool, bool]
    ] = {}  # (class, its comparisons[, members]) -> (lies, ours)

    def always_equal() -> tuple[list[str], bool]:
        found: list[str] = []
        asked = False  # whether a class's own code was asked (the code under test may have run)
        for cls in all_classes():
            raw = cls.__dict__
            # asked once per class and comparison (classes live on: the collector is off); a comparison
            # attached later is asked anew, and so is a class of the code under test whose members change
            key: tuple[Any, ...] = (id_(cls), *(id_(raw.get(name)) for name in comparing))
            inherits = inherits_comparison(cls)
            if inherits or any_(hasattr_(raw.get(name), "__code__") for name in ("__eq__", "__ne__")):
                # a comparison written in Python calls helpers that can be replaced (UserList's cast)
                key += tuple_((k, id_(v)) for k, v in list_(raw.items()) if k not in comparing)
            if key not in probed:
                asked = True
                own = {name: unwrapped(raw.get(name)) for name in comparing}
                probed[key] = (
                    any_(lies_about(cls, own[name], lie) for name, lie in lies)
                    or any_(ignores_operand(cls, own[name]) for name in ("__sub__", "__rsub__"))
                    or any_(both_ways(cls, own[a], own[b]) for a, b in opposites)
                    or (inherits and inherited_lies(cls)),
                    any_(written_here(cls, own[name]) for name in comparing),
                )
            said, own_code = probed[key]
            if said:
                found.append(f"{always} {class_label(cls)}")
            if inherits or own_code or id_(cls) in watched:
                found += watch(cls, own_code)
        return found, asked

    return always_equal


def entering(where: Authorship, trusted_class: Callable[[Any], bool]) -> Callable[[list[Any]], list[Holder]]:
    """``enter(classes)``, remembering the classes entered (never twice)."""
    written_here = where.written_here
    id_, list_, exception = id, list, BaseException
    class_label, comparing, wrap, hold = _watching.class_label, COMPARING, _entries.wrapped, _holders.hold
    type_setattr, dict_of, mro_of = (
        type.__setattr__,
        vars(type)["__dict__"].__get__,
        vars(type)["__mro__"].__get__,
    )
    entered: dict[int, Any] = {}  # id(class) -> a class the tests name, whose functions are in entries

    def enter(classes: list[Any]) -> list[Holder]:
        """Put each function the code under test wrote for each of ``classes`` and for the classes of its
        own they are built on (a method, a static or class method, a property's; not a comparison, which
        is watched) in an ``entries.Entry``: the tests' calls of them are told to the audit hook. Returns
        what each such class then holds (a holder each, for the hook to compare around each call: one put
        back, to be called unseen, is reported)."""
        found = []
        for named in classes:
            for cls in mro_of(named):
                if id_(cls) in entered or trusted_class(cls):
                    continue
                entered[id_(cls)] = cls
                space = dict_of(cls)

                def mine(function: Any, cls: Any = cls) -> bool:
                    return written_here(cls, function)

                names = []
                for name, member in list_(space.items()):
                    new = None if name in comparing else wrap(member, mine)
                    if new is not None:
                        try:
                            type_setattr(cls, name, new)
                        except exception:
                            continue
                        names.append(name)
                if names:
                    found.append(hold(class_label(cls), space, names))
        return found

    return enter
