"""Holders: a namespace's names and the identities they held, compared without looking up a name.

``hold`` makes one; ``holding`` is the check's comparison of a snapshot's holders (``shape.Snapshot``);
``while_running`` is the audit hook's comparison of what the tests rely on (``relied_on``) around each call
they make into the code under test. Stdlib only, loaded by ``harness.py`` as ``_ms_holders``.
"""

from __future__ import annotations

import operator
import sys
import types
from collections.abc import Callable, Iterable
from typing import Any

# the modules whose names the runner's assertions and the tests' helpers look up as they run, beside the
# modules these import and the ones the tests import (``relied_on``)
RUNNER_MODULES = frozenset({
    "builtins", "unittest", "unittest.case", "unittest.util", "pytest", "_pytest.python_api",
    "_pytest.raises", "_pytest.recwarn", "_pytest.outcomes", "_pytest.approx",
})  # fmt: skip


def holding(snapshot: Any) -> Callable[[], list[str]]:
    """``moved()``: the names of the snapshot's holders (and ``sys.modules`` entries) that no longer hold
    what they held. A closure that looks up no name when it runs: every built-in and library function it
    calls is bound here, so code that rebinds one (``operator.is_``, ``builtins.all``, this module's
    ``Snapshot.moved``) cannot blind the check that reports the rebinding."""
    modules, holders, live, cells = snapshot.modules, snapshot.holders, sys.modules, snapshot.cells
    held = tuple(cell.cell_contents for cell in cells)
    tuple_, list_, map_, all_, zip_, type_, is_ = tuple, list, map, all, zip, type, operator.is_

    def moved() -> list[str]:
        found = []
        for name, (module, kind) in list_(modules.items()):
            if live.get(name) is not module or type_(module) is not kind:
                found.append(f"sys.modules[{name!r}]")
        for label, space, keys, values in holders:
            current = tuple_(map_(space.get, keys))
            if not all_(map_(is_, current, values)):
                found += [
                    f"{label}.{k}" for k, a, b in zip_(keys, current, values, strict=True) if a is not b
                ]
        for cell, value in zip_(cells, held, strict=True):
            if cell.cell_contents is not value:
                found.append("builtins.__build_class__'s own names")
        return found

    return moved


def hold(
    label: str, space: Any, keys: Iterable[str], _tuple: type = tuple, _map: type = map
) -> tuple[str, Any, tuple[str, ...], tuple[Any, ...]]:
    """A holder as the snapshot keeps them: (label, namespace, names, what they hold now). Looks up no
    name when it runs (the harness's checks call it)."""
    names = _tuple(keys)
    return label, space, names, _tuple(_map(space.get, names))


def relied_on(imported: frozenset[str]) -> frozenset[str]:
    """The names of the modules whose names a test relies on as it runs: the runner's assertion modules
    (``RUNNER_MODULES``), the modules they import (``collections`` for ``assertCountEqual``, ``re`` for
    ``assertRegex``) and ``imported``, what the test files import."""
    found = set(RUNNER_MODULES | imported)
    for name in RUNNER_MODULES:
        module = sys.modules.get(name)
        if isinstance(module, types.ModuleType):
            found.update(v.__name__ for v in list(vars(module).values()) if isinstance(v, types.ModuleType))
    return frozenset(found)


def while_running(
    holders: list[tuple[str, Any, tuple[str, ...], tuple[Any, ...]]],
    classes: list[tuple[str, Any]],
) -> tuple[Callable[[], tuple[Any, ...]], Callable[[tuple[Any, ...]], list[str]]]:
    """``take()``: what ``holders`` hold now, and the names ``classes`` (label, namespace) have;
    ``changed(taken)``: the names that no longer hold what they held when ``taken`` was taken, and those
    a class gained or lost since (a method put in that hides an inherited one); a holder or class added
    since is not compared. The audit hook takes them around each call the tests make into the code under
    test. Closures that look up no name when they run."""
    tuple_, map_, all_, zip_, is_, len_ = tuple, map, all, zip, operator.is_, len
    getter, missing = operator.itemgetter, KeyError
    getters: list[Any] = []  # per holder: its names' values in one call (a name missing: one at a time)

    def nothing(space: Any) -> tuple[Any, ...]:
        return ()

    def held(space: Any, keys: tuple[str, ...], get: Any) -> tuple[Any, ...]:
        try:
            return get(space)
        except missing:  # a name deleted
            return tuple_(map_(space.get, keys))

    def take() -> tuple[Any, ...]:
        if len_(getters) < len_(holders):
            for _, _, keys, _ in holders[len_(getters) :]:
                getters.append(
                    getter(*keys, *keys) if len_(keys) == 1 else getter(*keys) if keys else nothing
                )
        values = tuple_([held(space, keys, get) for (_, space, keys, _), get in zip_(holders, getters)])
        return values, tuple_([tuple_(space) for _, space in classes])

    def changed(taken: tuple[Any, ...]) -> list[str]:
        found = []
        values, names = taken or ((), ())
        for (label, space, keys, _), get, before in zip_(holders, getters, values):
            now = held(space, keys, get)
            if not all_(map_(is_, now, before)):
                found += [f"{label}.{k}" for k, a, b in zip_(keys, now, before) if a is not b]
        for (label, space), had in zip_(classes, names):
            current = tuple_(space)
            if len_(current) != len_(had) or not all_(map_(is_, current, had)):
                found += [f"{label}.{k} (added)" for k in current if k not in had]
                found += [f"{label}.{k} (deleted)" for k in had if k not in current]
        return found

    return take, changed
