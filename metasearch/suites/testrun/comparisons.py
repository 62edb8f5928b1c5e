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
in ``authorship.py``: whose a file or member is; ``Probes`` in ``probes.py``: the questions asked of a
class). Everything they use, built-ins and memos included, is bound when they are made (none is looked up
by name when it runs), so code that rebinds a module's name, or runs in the middle of a check (a comparison
it asks), cannot change what the check does. Stdlib only, loaded by ``harness.py`` as ``_ms_comparisons``.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (where it runs, the harness loads each module by path: ``_authorship`` below)
    from .authorship import Authorship
    from .probes import Probes

_shape = sys.modules["_ms_shape"]  # loaded before this module (``harness._sibling``)
_entries = sys.modules["_ms_entries"]
_holders = sys.modules["_ms_holders"]
_watching = sys.modules["_ms_watching"]
_authorship = sys.modules["_ms_authorship"]
_probes = sys.modules["_ms_probes"]
Holder = tuple[str, Any, tuple[str, ...], tuple[Any, ...]]  # as ``holders.hold`` makes them
COMPARING = tuple(_watching.WATCHED)  # __eq__, __ne__, __contains__, the orders, __sub__, __rsub__


def comparisons(
    root: str, tests: frozenset[str], text: tuple[str, ...], trusted_class: Callable[[Any], bool]
) -> tuple[Callable[[], tuple[list[str], bool]], Callable[[Any], None], Callable[[list[Any]], list[Holder]]]:
    """``(always_equal, watch_new, enter)`` as the module's docstring says, for the folder under test
    ``root``, the test files ``tests`` (real paths) with their sources ``text``; ``trusted_class``: a class
    that existed before the code under test ran or that library or test code made (``shape.Shape``)."""
    where = _authorship.authorship(root, tests, text, trusted_class)
    asked = _probes.asked(where)
    watched: dict[int, tuple[Any, dict[str, Any]]] = {}  # id(class) -> (class, the comparisons given it)
    watch, watch_new = watcher(where, asked.inherited, watched)
    return always_equal(where, asked, watch, watched), watch_new, entering(where, trusted_class)


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
