"""What a test run is made of, held to what it was before the code under test ran and to what the test
source says. Loaded by ``harness.py`` (as ``_ms_shape``, stdlib only) before any candidate code runs.

A test passes when the code it runs says so: the test's own functions, the assertion methods its classes
inherit, the library functions it calls. Code under test that shares the process can change each of those
without touching a file: rebind a library module's function or a class's method, swap a function's code
in place (``__code__``), rebind a name in the test module before its classes are made (``unittest`` to a
namespace whose ``TestCase`` asserts nothing), or put a method into a test class. Three records catch that:

- ``Places``: whose a file is (the standard library, an installed package or this grader, a test file, or
  the code under test: everything else, wherever it was written).
- ``Snapshot``: the identities of every library module's callables (every name, for this grader's own
  modules: the harness's state is set once before candidate code runs) and of its classes' members, taken
  before the code under test runs (a library module loaded later is taken at the next check); any that
  moved is named.
- ``Shape``: the test files' outline (``outline.py``), parsed from their pristine source. Each class
  statement is recorded with the file that ran it (``builtins.__build_class__`` is wrapped). At the first
  check each test module's top-level names must be what the source binds (a ``def`` the function compiled
  from that file with that name, a ``class`` the class its statement made, an import of a library module
  the object the harness imported first), and each test class must be built only on classes that existed
  before the code under test ran or that library or test code made, and hold only the names its source
  gives it; from then on every such name keeps its identity.
- ``holders.while_running``: the same identities for what a test relies on as it runs (``relied_on``:
  builtins, the runner's assertion modules and what they import, what the test files import; the test
  files' names and classes), taken by the audit hook before each call the tests make into the code under
  test and compared after it: a change that would put itself back before the next check is seen when the
  call returns.
"""

from __future__ import annotations

import builtins
import importlib
import importlib.util
import os
import re
import sys
import sysconfig
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (where it runs, the harness loads each module by path: ``_outline`` below)
    from .outline import Outline

_outline = sys.modules["_ms_outline"]  # loaded before this module (``harness._sibling``)
_holders = sys.modules["_ms_holders"]
hold = _holders.hold

STD, TRUSTED, TEST, CANDIDATE = "std", "trusted", "test", "candidate"
CLASS_MADE = "metasearch.harness.class"  # the audit event the wrapped ``__build_class__`` raises
SHAPE = "tests changed"  # the prefix of this module's findings (verdict.py names the class by it)
# names the interpreter, ``abc``, ``typing`` and unittest's/pytest's class decorators give a class
MADE_FOR_A_CLASS = frozenset({
    "__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__firstlineno__",
    "__static_attributes__", "__annotations__", "__annotate__", "__annotate_func__",
    "__annotations_cache__", "__orig_bases__", "__parameters__", "__type_params__", "_abc_impl",
    "__abstractmethods__", "__slots__", "__unittest_skip__", "__unittest_skip_why__", "pytestmark",
})  # fmt: skip
# a module's own globals: never taken for a name hiding a builtin
MODULE_NAMES = frozenset({"__name__", "__doc__", "__package__", "__loader__", "__spec__", "__builtins__"})
# what runners swap and put back around each test and session (``warnings.catch_warnings``)
SWAPPED = frozenset({("warnings", "_showwarnmsg_impl"), ("warnings", "showwarning")})
IMMUTABLE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE: a class that refuses every change
FROZEN = re.compile(r"<frozen [A-Za-z_][\w.]*>")  # a frozen module's code names it so, and nothing else
_MISSING = object()


class Places:
    """Whose a file is, remembered per file name. What it needs is taken when it is made, so that a
    module-level name rebound later (this module's ``CANDIDATE``, ``os.path.realpath``) changes nothing."""

    def __init__(self, root: str, tests: frozenset[str]) -> None:
        self.root, self.tests = root, tests
        self.stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"]) + os.sep
        self.grader = os.path.dirname(os.path.realpath(__file__)) + os.sep
        prefixes = {os.path.realpath(p) + os.sep for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
        self.installed = tuple(prefixes)
        self.kinds: dict[str, str] = {}
        self._realpath, self._isabs, self._frozen, self._kinds = (
            os.path.realpath,
            os.path.isabs,
            FROZEN.fullmatch,
            (STD, TEST, TRUSTED, CANDIDATE),
        )

    def kind(self, filename: str) -> str:
        """``std``, ``trusted`` (an installed package, this grader), ``test`` or ``candidate``: any other
        file, and code compiled from a string. By the name the code carries, which whoever compiles it
        chooses: only an absolute path (where it really leads) or a frozen module's exact name counts
        (``<frozen>/../solution.py`` is the candidate's); the audit hook sees that a name claiming
        another's file was given to that file's own source (``hook.frames``)."""
        found = self.kinds.get(filename)
        if found is None:
            std, test, trusted, candidate = self._kinds
            path = self._realpath(filename) if self._isabs(filename) else None
            found = (
                candidate if path is None and not self._frozen(filename)
                else std if path is None or path.startswith(self.stdlib)
                else test if path in self.tests
                else trusted if path.startswith((self.grader, *self.installed))
                else candidate
            )  # fmt: skip
            self.kinds[filename] = found
        return found

    def of_module(self, module: object) -> str:
        where = getattr(module, "__file__", None)
        if not isinstance(where, str):
            paths = getattr(module, "__path__", None)
            where = next(iter(paths), None) if isinstance(paths, list) else None
        return self._kinds[0] if not isinstance(where, str) else self.kind(where)  # built in, or frozen


_CLASS_DICT = vars(type)["__dict__"].__get__  # a class's namespace (a live view)
_CLASS_QUALNAME = vars(type)["__qualname__"].__get__
_MODULE_DICT = vars(types.ModuleType)["__dict__"].__get__


class Snapshot:
    """Identities of the module-level callables and classes' members of every module that is not the code
    under test's or a test file (or of those ``only`` names), compared a holder at a time. A class that
    cannot change (a built-in type, one frozen by ``frozen.py``) is not held."""

    def __init__(
        self, places: Places, cells: tuple[types.CellType, ...] = (), only: frozenset[str] | None = None
    ) -> None:
        self.places, self.cells, self.only = places, cells, only  # cells: of a function any code reaches
        self.modules: dict[str, tuple[types.ModuleType, type]] = {}
        self.holders: list[tuple[str, Any, tuple[str, ...], tuple[Any, ...]]] = []
        self.take_new()

    def take_new(self) -> None:
        """Take the modules loaded since the last time (a library's lazy imports)."""
        for name, module in list(sys.modules.items()):
            if module is None or name in self.modules or (self.only is not None and name not in self.only):
                continue
            if self.places.of_module(module) not in (STD, TRUSTED):
                continue
            self.modules[name] = (module, type(module))
            space = list(vars(module).items())
            where = getattr(module, "__file__", None)
            ours = isinstance(where, str) and os.path.realpath(where).startswith(self.places.grader)
            # (with ``only``, what a test relies on as it runs: a module's modules too, ``collections`` in
            # ``unittest.case``, which ``assertCountEqual`` looks up)
            modules_too = self.only is not None
            held = [
                k
                for k, v in space
                if ours or callable(v) or (modules_too and isinstance(v, types.ModuleType))
            ]
            self._hold(name, module, [k for k in held if (name, k) not in SWAPPED])
            for key, value in space:
                mutable = isinstance(value, type) and not value.__flags__ & IMMUTABLE
                if mutable and getattr(value, "__module__", None) == name:
                    self._hold(f"{name}.{key}", value, list(vars(value)))

    def _hold(self, label: str, holder: Any, keys: list[str]) -> None:
        # the namespace itself, through the built-in descriptor (a metaclass's ``__dict__`` cannot stand in)
        space = _CLASS_DICT(holder) if isinstance(holder, type) else _MODULE_DICT(holder)
        self.holders.append(hold(label, space, keys))


class Shape:
    """The test files' outlines, the classes their statements made, and what their names held at the first
    check. ``check`` is given the test modules (path -> module) as the runner holds them."""

    def __init__(self, places: Places, sources: dict[str, str]) -> None:
        self.places = places
        self.outlines: dict[str, Outline] = {}
        for path, source in sources.items():
            try:
                self.outlines[path] = _outline.Outline(source)
            except (SyntaxError, ValueError):
                continue  # a test file that does not parse fails its own tests
        self.expected: dict[tuple[str, str], Any] = {}
        for path, outline in self.outlines.items():
            for name, (module, attribute) in outline.top.imports.items():
                if name not in outline.top.twice:
                    found = self._library_object(module, attribute)
                    if found is not _MISSING:
                        self.expected[(path, name)] = found
        self.before: list[type] = all_classes()  # alive, so their ids stay theirs
        self.known = {id(cls) for cls in self.before}
        self.made: dict[int, tuple[type, str, str]] = {}  # id -> (class, file or kind, qualname)
        self.born: list[tuple[type, Any]] = []  # (class, body code) of each class statement since
        self.held: dict[int, tuple[Any, dict[str, Any]]] = {}  # id(module or class) -> (it, names)
        self.builtin_names = frozenset(vars(builtins))
        self.hooks = {id(hook) for hook in (*sys.meta_path, *sys.path_hooks)}
        self._wrap_build_class()

    def imported(self) -> frozenset[str]:
        """The names of the modules the test files import, and of those they import from."""
        found: set[str] = set()
        for outline in self.outlines.values():
            for module, attribute in outline.top.imports.values():
                found.update((module, f"{module}.{attribute}") if attribute else (module,))
        return frozenset(found)

    def holders(self) -> list[tuple[str, Any, tuple[str, ...], tuple[Any, ...]]]:
        """The names of each test module and test class the first check held, as the snapshot's holders
        (``hold``)."""
        found = []
        for held, names in self.held.values():
            space = _CLASS_DICT(held) if isinstance(held, type) else _MODULE_DICT(held)
            label = _CLASS_QUALNAME(held) if isinstance(held, type) else _MODULE_DICT(held).get("__name__")
            found.append(hold(str(label), space, names))
        return found

    def _library_object(self, module: str, attribute: str | None) -> Any:
        """What a test's import of a library module binds, imported now (before any candidate code); the
        code under test's own modules, and modules that do not import, are not expected."""
        top = module.split(".")[0]
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            return _MISSING
        origin = getattr(spec, "origin", None)
        if spec is None or (isinstance(origin, str) and self.places.kind(origin) not in (STD, TRUSTED)):
            return _MISSING
        if spec.submodule_search_locations and origin is None:
            return _MISSING  # a namespace package: wherever its parts are, some may be the candidate's
        try:
            found = importlib.import_module(module)
            if attribute is None:
                return found
            if hasattr(found, attribute):
                return getattr(found, attribute)
            return importlib.import_module(f"{module}.{attribute}")
        except BaseException:
            return _MISSING

    def _wrap_build_class(self) -> None:
        """Raise the audit event ``CLASS_MADE`` (class, body function) for every class statement, whose
        hook records it (``born``: whose it is, is decided at the next check) and watches a class of the
        code under test's comparisons before any of its instances exists. The wrapper, which any code can
        reach, holds nothing but what it calls, and the snapshot holds its cells (``cells``)."""
        original, audit, event = builtins.__build_class__, sys.audit, CLASS_MADE

        def build_class(func: Any, name: str, *bases: Any, **keywords: Any) -> Any:
            cls = original(func, name, *bases, **keywords)
            audit(event, cls, func)
            return cls

        self.build_class_code = build_class.__code__
        self.cells = build_class.__closure__ or ()
        builtins.__build_class__ = build_class  # type: ignore[assignment]

    def made_by_statement(self, cls: Any, func: Any) -> None:
        """The audit hook's record of a class statement (its class and body function)."""
        if issubclass(type(cls), type) and type(func) is types.FunctionType:  # (exact types: the hook's)
            self.born.append((cls, func.__code__))

    def _sort_born(self) -> None:
        """Classes made by class statements outside the code under test (with the test file's path, for a
        test's) join ``made``; the code under test's are dropped."""
        while self.born:
            cls, code = self.born.pop()
            where = self.places.kind(code.co_filename) if type(code) is types.CodeType else CANDIDATE
            if where != CANDIDATE:
                path = os.path.realpath(code.co_filename) if where == TEST else where
                self.made[id(cls)] = (cls, path, code.co_qualname)  # (a metaclass's __name__ may be anything)

    def trusted_class(self, cls: Any) -> bool:
        """Existed before the code under test ran, or made by a class statement outside it."""
        self._sort_born()
        return id(cls) in self.known or id(cls) in self.made

    def check(self, modules: dict[str, types.ModuleType]) -> list[str]:
        self._sort_born()
        found: list[str] = []
        for path, module in modules.items():
            outline = self.outlines.get(path)
            if outline is not None:
                found += self._names(path, module, outline)
        for key, (cls, path, qualname) in list(self.made.items()):
            if path in self.outlines:
                found += self._class(key, cls, path, qualname)
        found += [
            f"an import hook the code under test made: {type(hook).__qualname__}"
            for hook in (*sys.meta_path, *sys.path_hooks)
            if id(hook) not in self.hooks and not self._library_made(hook)
        ]
        return [f"{SHAPE}: {what}" for what in found]

    def _library_made(self, hook: Any) -> bool:
        """An import hook a library put in place (its class, or its function, is not the code under
        test's); the others can hand the runner any module for a test file that imports later."""
        if type(hook) is types.FunctionType:
            return self.places.kind(hook.__code__.co_filename) != CANDIDATE
        return self.trusted_class(hook if isinstance(hook, type) else type(hook))

    def _names(self, path: str, module: types.ModuleType, outline: Outline) -> list[str]:
        space, body, label = vars(module), outline.top, os.path.basename(path)
        # a global of that name hides the builtin from the test's code (``all``, ``sorted``, ``len``)
        found = [
            f"{label}: {name} hides the builtin"
            for name in sorted(self.builtin_names.intersection(space) - body.names)
            if name not in MODULE_NAMES and not body.star
        ]
        if space.get("__builtins__") not in (builtins, vars(builtins)):
            found.append(f"{label}: __builtins__ is not the builtins module")
        if id(module) in self.held:
            return found + _changed(label, *self.held[id(module)])
        guarded = {}
        for name in sorted(body.names - body.twice):
            value = space.get(name, _MISSING)
            if value is _MISSING:
                continue  # a failed import, a name bound only on some paths
            if name in body.defs:
                if not self._defined_here(value, path, name, name in body.wrapped):
                    found.append(f"{label}: {name} is not the function the test file defines")
            elif name in body.classes:
                if self.made.get(id(value), (None, "", ""))[1:] != (path, name):
                    found.append(f"{label}: {name} is not the class the test file defines")
            elif (path, name) in self.expected:
                if value is not self.expected[(path, name)]:
                    found.append(f"{label}: {name} is not what the test file imports")
            else:
                continue  # data: a test may rebind its own globals
            guarded[name] = value
        self.held[id(module)] = (module, guarded)
        return found

    def _class(self, key: int, cls: type, path: str, qualname: str) -> list[str]:
        """A test class: its bases and metaclass, its methods, and the names that stand in for a base's
        (``assertEqual``, ``run``, ``__call__``) or that a runner collects (``test*``)."""
        space = dict(vars(cls))
        if key in self.held:
            held, guarded = self.held[key]
            found = _changed(qualname, held, guarded)
            return found + [
                f"{qualname}.{name} was put into a test class"
                for name, value in space.items()
                if name not in guarded and self._guarded(cls, name, value) and not self._test_code(value)
            ]
        found = [
            f"{qualname} is built on {getattr(base, '__qualname__', base)!s}, which the code under test made"
            for base in (type(cls), *cls.__mro__[1:])
            if not self.trusted_class(base)
        ]
        body = self.outlines[path].classes.get(qualname)
        guarded = {}
        for name, value in space.items():
            if body is not None and name in body.defs and name not in body.twice:
                if not self._defined_here(value, path, f"{qualname}.{name}", name in body.wrapped):
                    found.append(f"{qualname}.{name} is not the method the test file defines")
            elif not self._guarded(cls, name, value):
                continue
            elif (
                body is not None
                and name not in body.names
                and not body.decorated
                and not self._test_code(value)
            ):
                found.append(
                    f"{qualname}.{name} was put into a test class"
                )  # (a test file's loop may make tests)
            guarded[name] = value
        self.held[key] = (cls, guarded)
        return found

    @staticmethod
    def _guarded(cls: type, name: str, value: Any) -> bool:
        """A callable that a runner would collect, or that stands in for a base class's callable."""
        if name in MADE_FOR_A_CLASS or not callable(value):
            return False
        if name.startswith("test"):
            return True
        return any(callable(vars(base).get(name)) for base in cls.__mro__[1:])

    def _test_code(self, value: Any) -> bool:
        """A function (or static or class method) compiled from a test file."""
        if type(value) in (staticmethod, classmethod):
            value = value.__func__
        return type(value) is types.FunctionType and self.places.kind(value.__code__.co_filename) == TEST

    def _defined_here(self, value: Any, path: str, qualname: str, wrapped: bool) -> bool:
        """Whether ``value`` is the function compiled from ``path`` under ``qualname``: itself, or through
        static or class method, property and ``functools.wraps`` layers none of which is the code under
        test's. A decorated ``def`` may also hold an object a library or test class made (a fixture)."""
        for _ in range(8):
            if type(value) in (staticmethod, classmethod):
                value = value.__func__
            elif type(value) is property:
                value = value.fget
            if type(value) is not types.FunctionType:
                return wrapped and self.trusted_class(type(value))
            code = value.__code__
            where = self.places.kind(code.co_filename)
            if where == CANDIDATE:
                return False
            if where == TEST and getattr(code, "co_qualname", code.co_name) == qualname:
                return os.path.realpath(code.co_filename) == path
            value = vars(value).get("__wrapped__")
        return False


def _changed(label: str, holder: Any, names: dict[str, Any]) -> list[str]:
    """Names of ``holder`` that no longer hold what they held at the first check."""
    now = vars(holder)
    return [
        f"{label}.{name} changed" for name, value in names.items() if now.get(name, _MISSING) is not value
    ]


def all_classes() -> list[type]:
    """Every live class, from ``object`` down."""
    found: list[type] = []
    seen: set[int] = set()
    todo: list[type] = [object]
    while todo:
        cls = todo.pop()
        if id(cls) in seen:
            continue
        seen.add(id(cls))
        found.append(cls)
        try:
            todo += type.__subclasses__(cls)
        except Exception:  # a metaclass whose __subclasses__ breaks
            continue
    return found
