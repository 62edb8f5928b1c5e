"""Classes that refuse to change: the test runner's, and, in the direct run, the test classes once set up.

A check that runs between tests sees a class as it is at that moment. Code under test can replace a
method the runner calls (``unittest.TestCase.fail``), or give a test class one that hides an inherited
assertion, and have the replacement put the original back the first time it is called: the wrong answer
passes its assertion and no check ever sees the change. Attribute assignment on a class is not an audit
event, so the hook cannot see it either.

CPython refuses to change a class flagged immutable (``Py_TPFLAGS_IMMUTABLETYPE``, as its built-in types
are): ``setattr``, ``type.__setattr__``, ``delattr``, and assigning ``__bases__`` or an instance's
``__class__`` all raise ``TypeError``. Python code cannot set that flag; ``freezer`` sets it through
ctypes, at the offset of ``tp_flags`` it finds by writing the flag on a probe class and reading
``__flags__`` back, before any candidate code runs. Subclasses do not inherit it. What is left is the
class's namespace itself, reachable only through ``gc.get_referents`` or ctypes, which the audit hook
reports. Stdlib only, loaded by ``harness.py`` as ``_ms_frozen``.
"""

from __future__ import annotations

import abc
import sys
from collections.abc import Callable, Iterable

IMMUTABLE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE
HEAP = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement or ``type()``
# the test runner's modules, and this grader's (loaded as ``_ms_<name>``; the harness is ``__main__``)
RUNNERS = frozenset({"unittest", "pytest", "_pytest", "pluggy"})
# pytest sets and restores attributes of its own classes while it runs (``Config`` through its
# ``monkeypatch``), so the pytest run freezes unittest's only; the direct run, where pytest's machinery
# does not run (only the helpers tests call: ``raises``, ``approx``), freezes them all
UNITTEST = frozenset({"unittest"})
OURS = "_ms_"
# metaclasses whose classes never set their own attributes after they are made (an enum's or a typing
# protocol's metaclass may, lazily, and they are left alone)
PLAIN = (type, abc.ABCMeta)


def freezer() -> Callable[[type], bool] | None:
    """``freeze(cls)``: make ``cls`` immutable, True when it now is (a class with a metaclass outside
    ``PLAIN`` is left as it is). None where ctypes is missing or the flag cannot be found."""
    try:
        import ctypes
    except ImportError:
        return None
    word = ctypes.c_ulong

    class Probe:
        pass

    flags, start = Probe.__flags__, id(Probe)
    offset = None
    for at in range(0, 64 * ctypes.sizeof(word), ctypes.sizeof(word)):
        cell = word.from_address(start + at)
        if cell.value != flags:
            continue
        cell.value = flags | IMMUTABLE
        if Probe.__flags__ == flags | IMMUTABLE:
            offset = at
            break
        cell.value = flags  # a word that only held the same number
    if offset is None:
        return None
    try:
        Probe.x = 1  # type: ignore[attr-defined]
        return None  # the flag does not do what it should here
    except TypeError:
        pass

    def freeze(cls: type, _plain: tuple[type, ...] = PLAIN, _type: type = type) -> bool:
        kind = _type(cls)
        if kind not in _plain:
            return False
        now = cls.__flags__
        if now & HEAP and not now & IMMUTABLE:
            word.from_address(id(cls) + offset).value = now | IMMUTABLE
        return bool(cls.__flags__ & IMMUTABLE)

    return freeze


def runner_classes(runners: frozenset[str] = RUNNERS) -> Iterable[type]:
    """The classes that the test runner's modules (and this grader's) define, as loaded now."""
    for name, module in list(sys.modules.items()):
        top = name.split(".")[0]
        if module is None or not (top in runners or top.startswith(OURS)):
            continue
        own = {name, getattr(module, "__name__", name)}
        for value in list(vars(module).values()):
            if isinstance(value, type) and vars(type)["__module__"].__get__(value) in own:
                yield value


def freeze_runner(freeze: Callable[[type], bool] | None, runners: frozenset[str] = RUNNERS) -> None:
    """Freeze every class of ``runners`` loaded now (a module loaded later is frozen when this is called
    again: each run calls it once more just before it imports the test files)."""
    if freeze is not None:
        for cls in runner_classes(runners):
            freeze(cls)
