"""The check the runners make after collection, after every test and at the end (``integrity``).

It reports, once, as ``tamper``: a library's or this grader's name that no longer holds what it held
(``shape.Snapshot``), a test file's name or class that is not what its source makes (``shape.Shape``), and
a class that claims to equal anything (``comparisons.py``). At the first check, what the test modules name
of the code under test is put in ``entries.Entry`` (``entering_modules``), and what the tests rely on is
handed to the audit hook to compare around each call. Closures that look up no name when they run, held
only by the runners' locals (in the pytest run, by our plugin too). Stdlib only, loaded by ``harness.py``
as ``_ms_check``.
"""

from __future__ import annotations

import functools
import gc
import sys
import types
from collections.abc import Callable
from typing import Any

_shape = sys.modules["_ms_shape"]  # loaded before this module (``harness._sibling``)
_entries = sys.modules["_ms_entries"]
_holders = sys.modules["_ms_holders"]


def integrity(
    shape: Any,
    places: Any,
    always_equal: Callable[[], tuple[list[str], bool]],
    send: Callable[[dict], None],
    relied_on: tuple[list[Any], list[tuple[str, Any]]],
    entered: Callable[[list[Any]], list[Any]],
) -> tuple[Callable[[], None], dict[str, types.ModuleType]]:
    """The check the runners make after collection, after every test and at the end, and the dict they
    put the test modules into (path -> module, as the runner holds them). The check reports, once, as
    ``tamper``: a library's or this grader's name that no longer holds what it held (``shape.Snapshot``),
    a test file's name or class that is not what its source makes (``shape.Shape``), and a class that
    claims to equal anything (``comparisons.py``).

    Everything it uses is bound here, when it is made, and it is held only where candidate code cannot
    reach without a step the audit hook reports (the runners' locals; in the pytest run, our plugin): a
    module-level name rebound past the scan (ours, ``operator.is_``, ``builtins.all``) cannot blind it,
    and neither can a class method replaced (the held names are compared first, and again last, since the
    comparisons it asks run the code under test)."""
    gc.disable()  # a class made per call lives until the next check instead of a collection
    snapshot = _shape.Snapshot(places, shape.cells)
    take_new, moved, check_shape = snapshot.take_new, _holders.holding(snapshot), shape.check
    modules: dict[str, types.ModuleType] = {}
    reported, first = [False], [True]
    entering, holders, list_, type_ = entering_modules(places, entered), shape.holders, list, type
    values, classes = relied_on
    view = types.MappingProxyType

    def rely_on(found: list[tuple[str, Any, tuple[str, ...], tuple[Any, ...]]]) -> None:
        values.extend(found)
        classes.extend((label, space) for label, space, _, _ in found if type_(space) is view)

    def check() -> None:
        if reported[0]:
            return
        if first[0]:  # the tests are imported: what they call of the code under test is told to the hook
            rely_on(entering(list_(modules.values())))
        found = moved()
        if not found:
            take_new()
            liars, asked = always_equal()
            found = check_shape(modules) + liars
            found += moved() if asked else []  # the code under test ran in between
        if first[0]:  # the tests' names and classes, as the first check holds them
            first[0] = False
            rely_on(holders())
        if found:
            reported[0] = True
            send({"t": "tamper", "what": found[:5]})

    return check, modules


def entering_modules(
    places: Any, enter: Callable[[list[Any]], list[Any]]
) -> Callable[[list[types.ModuleType]], list[tuple[str, Any, tuple[str, ...], tuple[Any, ...]]]]:
    """``entering(tests)``: put each function of the code under test that a test module names (and each
    ``functools.cache`` or ``lru_cache`` of one) in an ``entries.Entry`` there, and the functions of each
    class of the code under test that a test module names (``enter``), so that the tests' calls of them
    are told to the audit hook; a module of the code under test that a test module names (``import sol``,
    called as ``sol.f``) gets the same in its own namespace. Otherwise the code under test's own calls of
    its functions do not go through them. Returns what those modules' and classes' names then hold, for
    the hook to compare around each call (one put back, to be called unseen, is reported). A closure that
    looks up no name when it runs (the first check calls it, after the code under test was imported)."""
    kind, of_module, candidate, later = places.kind, places.of_module, _shape.CANDIDATE, _entries.LATER
    entry, tools, function, module_type = _entries.Entry, _entries.TOOLS, types.FunctionType, types.ModuleType
    cache = type(functools.lru_cache(maxsize=None)(len))
    module_dict, class_type = vars(module_type)["__dict__"].__get__, type
    list_, isinstance_, type_, vars_, id_, str_, hold = list, isinstance, type, vars, id, str, _holders.hold

    def entering(tests: list[types.ModuleType]) -> list[tuple[str, Any, tuple[str, ...], tuple[Any, ...]]]:
        made: dict[int, Any] = {}
        classes, held = [], []
        named = [(module, False) for module in tests]
        seen = {id_(module) for module in tests}
        for module, own in named:  # (grows: the code under test's modules the tests name)
            space = module_dict(module)
            names = []
            for name, value in list_(space.items()):
                if isinstance_(value, class_type):
                    classes.append(value)
                    continue
                if type_(value) is module_type and id_(value) not in seen and of_module(value) == candidate:
                    seen.add(id_(value))
                    named.append((value, True))
                    continue
                if id_(value) not in made:
                    inner = vars_(value).get("__wrapped__") if type_(value) is cache else value
                    if type_(inner) is not function or inner.__code__.co_flags & later:
                        continue
                    if kind(inner.__code__.co_filename) != candidate:
                        continue
                    made[id_(value)] = entry((tools, value))
                space[name] = made[id_(value)]
                names.append(name)
            label = space.get("__name__")
            if own and names:
                held.append(hold(label if type_(label) is str_ else "?", space, names))
        return held + enter(classes)

    return entering
