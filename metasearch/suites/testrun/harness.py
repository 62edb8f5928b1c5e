"""The test-process side of a graded test run: ``python -I -B harness.py MODE ROOT TEST_FILE...``.

Runs next to candidate code, so it reports facts, never a verdict. Before anything else it reads one
line from stdin, ``"<fd> <nonce>"``, and closes stdin: the result channel is an inherited pipe whose
number is drawn at random per run and named neither in argv nor in the environment; every record it
writes is ``"<nonce> <seq> <json>"``, so lines written by anyone without the nonce, dropped or replayed
lines are visible to the grader (``channel.py``), which reads the other end outside this process.

Modes (the grader runs two different ones and compares them):

- ``pytest``: pytest with this file's reporter as a plugin object; each report's (nodeid, phase, outcome).
- ``collect``: the same, ``--collect-only``; used on pristine code to learn the expected test ids.
- ``direct``: our own runner, no pytest machinery: every test file's source is read before any of it
  runs, then plain ``test*`` functions and ``unittest.TestCase`` methods are called directly (setUp, the
  method, tearDown, cleanups). Fixtures and parametrization are not supported; such tests fail here.

Both modes snapshot the callables of every library module (the standard library, installed packages such
as ``unittest``, ``pytest`` and ``pluggy``, this harness), and their classes' members, before candidate code
is imported, and compare them after every test and at the end (``shape.Snapshot``; a library module loaded
later is taken at the next check); a replaced one is reported as ``tamper``. So is a test module's name or
test class that is not what the test source makes it (``shape.Shape``: a rebound import, a method put into
a test class, a base class or import hook the code under test made, a global hiding a builtin), and so is a
class that appeared since whose own ``__eq__``, defined in the code under test, says an instance equals
values made up on the spot (``__ne__``: differs from none of them; ``__sub__``/``__rsub__``: gives one
difference from numbers far apart), or whose comparison, inherited from library code, says so (asked about
a fresh instance, and watched from the tests' imports on with its real instances); the cyclic collector is
off, so a class made per call lives until it is checked. Both also install an audit hook (``watch``) before
candidate code runs, which reports the code under test opening a test or grader file, reaching a frame,
compiling or making code itself, changing in place a function, class or module that is not its own
(``__code__``, ``__defaults__``, ``__class__``, ``__bases__``), or starting, signalling or tracing
processes. The session ends with an ``end`` record; a run without it ended early. Residual risk: the
candidate shares this process, so code that finds the channel's fd and nonce in memory, or this module's
mutable state (``_PROBED``, ``_CAUGHT``, ``_ASKING``; the ``Shape`` and ``Snapshot`` in the pytest run; only
the audit hook's closure is beyond Python code's reach: every name of this module is held, so rebinding one
is reported), and forges the other harness the same way, can still lie; the static scan (``scan.py``)
flags the routes to doing that.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import gc
import json
import os
import secrets
import sys
import tempfile
import types
from collections.abc import Callable
from typing import Any


def _sibling(name: str) -> types.ModuleType:
    """A module of this grader's folder (read-only where candidate code runs), loaded by path under a
    name no candidate module takes."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.realpath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_ms_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


_shape = _sibling("shape")
_write = os.write
_dumps = json.dumps
_token_hex = secrets.token_hex
ALWAYS_EQUAL = "always-equal class"


class Channel:
    """The write end of the result channel; records are numbered and carry the run's nonce."""

    def __init__(self) -> None:
        line = sys.stdin.buffer.readline(256).decode("ascii", "replace").split()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        if len(line) != 2:
            raise SystemExit("harness: no channel on stdin")
        self._fd, self._nonce, self._seq = int(line[0]), line[1], 0

    def send(self, record: dict) -> None:
        data = f"{self._nonce} {self._seq} {_dumps(record)}\n".encode()
        self._seq += 1
        while data:
            data = data[_write(self._fd, data) :]


class Integrity:
    """Identities of the runner's callables, taken before candidate code runs; and the classes that claim
    to equal anything (an always-equal value passes every equality assertion), known before it runs."""

    def __init__(self, shape: Any) -> None:
        gc.disable()  # a class made per call lives until the next check instead of a collection
        self.equal_before = {id(cls) for cls in _always_equal_classes()}
        self.shape = shape  # held here and by the audit hook only: no module global leads to it
        self.snapshot = _shape.Snapshot(shape.places)
        self.tests: dict[str, types.ModuleType] = {}  # the test modules as the runner holds them
        self.reported = False

    def changed(self) -> list[str]:
        self.snapshot.take_new()
        found = self.snapshot.moved()
        found += self.shape.check(self.tests)
        for cls in _always_equal_classes():
            if id(cls) not in self.equal_before:
                found.append(
                    f"{ALWAYS_EQUAL} {getattr(cls, '__module__', '?')}.{getattr(cls, '__qualname__', '?')}"
                )
        return found

    def check(self, channel: Channel) -> None:
        if not self.reported and (found := self.changed()):
            self.reported = True
            channel.send({"t": "tamper", "what": found[:5]})


def _always_equal_classes() -> list[Any]:
    """Live classes whose own ``__eq__`` says an instance equals a value made up just now (a fresh object,
    a random string, number or list), whose own ``__ne__`` says it differs from none of them, whose own
    subtraction ignores its operand (``_ignores_operand``), or whose inherited comparison says so
    (``_inherited_lies``, ``_watch``)."""
    found: list[Any] = []
    for cls in _shape.all_classes():
        own = cls.__dict__
        # asked once per class and comparison (classes live on: the collector is off); a comparison
        # attached later is asked anew, and so is a class of the code under test whose members change
        key: tuple[Any, ...] = tuple(id(own.get(name)) for name in _COMPARING)
        key = (id(cls), *key)
        inherits = _inherits_comparison(cls)
        if inherits or any(hasattr(own.get(name), "__code__") for name in ("__eq__", "__ne__")):
            # a comparison written in Python calls helpers that can be replaced (UserList's cast)
            key += tuple((k, id(v)) for k, v in list(own.items()))
        if key not in _PROBED:
            _PROBED[key] = (
                any(_lies(cls, own.get(name), lie) for name, lie in _LIES)
                or any(_ignores_operand(cls, own.get(name)) for name in ("__sub__", "__rsub__"))
                or any(_both_ways(cls, own.get(a), own.get(b)) for a, b in _OPPOSITES)
                or (inherits and _inherited_lies(cls))
            )
        if inherits:
            _watch(cls)
        if _PROBED[key] or id(cls) in _CAUGHT:
            found.append(cls)
    return found


def _lies(cls: Any, method: object, lie: bool, probes: tuple[Any, ...] = ()) -> bool:
    if method is None or isinstance(method, (types.WrapperDescriptorType, types.MethodDescriptorType)):
        return False  # absent, or a built-in type's own comparison
    if id(method) in _WATCHES:
        return False  # this harness's own (``_watch``)
    where = _defined_in(method)
    if _in_tests(where) or (_outside_root(where) and _named_by_tests(cls)):
        return False  # the tests' own helpers, and a library's (unittest.mock.ANY) that the tests name
    try:
        instance = cls.__new__(cls)
    except BaseException:
        try:
            instance = object.__new__(cls)
        except BaseException:
            return False
    if (_outside_root(where) or where.startswith("<frozen ")) and any(
        _code_under_test(member) for member in list(cls.__dict__.values())
    ):
        # a library's class with a helper the code under test put in (UserList's cast): its comparison
        # reads the state the class's __init__ gives (UserList's data), so the instance gets it
        _given_state(cls, instance)
    token = _token_hex(8)
    for probe in probes or (object(), f"probe-{token}", int(token, 16), [token]):
        try:
            bound = method.__get__(instance, cls) if hasattr(method, "__get__") else method
            if bound(probe) is lie:  # type: ignore[operator]
                return True
        except BaseException:  # refusing one kind of value does not excuse accepting another
            continue
    return False


def _given_state(cls: Any, instance: object) -> None:
    """Run ``cls.__init__`` on ``instance`` with no argument, or else with one empty one."""
    arguments: tuple[tuple[Any, ...], ...] = ((), ("",), ([],), ({},), (0,))
    for args in arguments:
        try:
            cls.__init__(instance, *args)
            return
        except BaseException:
            continue


def _both_ways(cls: Any, one: object, other: object) -> bool:
    """Whether an instance is, by its own ordering methods, both less and greater than a value made up
    just now: it passes ``assertLess`` and ``assertGreater`` alike."""
    if one is None or other is None:
        return False
    token = _token_hex(8)
    return any(
        _lies(cls, one, True, (probe,)) and _lies(cls, other, True, (probe,))
        for probe in (int(token, 16), f"probe-{token}")
    )


def _ignores_operand(cls: Any, method: object) -> bool:
    """Whether an own ``__sub__``/``__rsub__`` (not the tests') gives the same difference from two numbers
    two million apart: a value every tolerance check (``assertAlmostEqual``, ``pytest.approx``, which
    subtract and compare the difference with a bound) takes for any number."""
    if method is None or isinstance(method, (types.WrapperDescriptorType, types.MethodDescriptorType)):
        return False
    where = _defined_in(method)
    if _in_tests(where) or (_outside_root(where) and _named_by_tests(cls)):
        return False
    try:
        instance = cls.__new__(cls)
    except BaseException:
        return False
    far = 1e6 + int(_token_hex(2), 16)
    try:
        bound = method.__get__(instance, cls) if hasattr(method, "__get__") else method
        low, high = float(bound(-far)), float(bound(far))  # type: ignore[operator]
    except BaseException:
        return False  # refusing numbers, or needing state this instance lacks
    return abs(high - low) < 1.0


def _inherits_comparison(cls: Any) -> bool:
    """A class of the code under test that compares by an ``__eq__``/``__ne__`` it inherits, written in
    Python outside that code (``collections.UserList``'s, the abstract ``Set``'s): such a comparison calls
    methods the class can override (``_UserList__cast``, ``__iter__``, ``__len__``)."""
    own = cls.__dict__
    if "__eq__" in own and "__ne__" in own:
        return False
    if not any(_inherited(cls, n) is not None for n in ("__eq__", "__ne__")):
        return False
    name = str(getattr(cls, "__module__", "") or "")
    where = str(getattr(sys.modules.get(name), "__file__", "") or "")
    # its module's file, or (a class can name any module) the code of its own methods
    return _file_under_test(where) or any(_code_under_test(member) for member in list(own.values()))


def _code_under_test(member: object) -> bool:
    """Whether a class member is a function (method, static or class method, property) whose code the
    code under test wrote: in one of its files, or compiled from a string."""
    for inner in (getattr(member, "__func__", None), getattr(member, "fget", None), member):
        code = getattr(inner, "__code__", None)
        if code is not None:
            where = str(code.co_filename)
            return not _outside_root(where) and not _in_tests(where) and not where.startswith("<frozen ")
    return False


def _inherited(cls: Any, name: str) -> Any:
    """The class in ``cls``'s MRO past itself that defines ``name`` in Python (None: none, or built in)."""
    if name in cls.__dict__:
        return None
    for base in cls.__mro__[1:]:
        if name in base.__dict__:
            method = base.__dict__[name]
            if base is object or isinstance(
                method, (types.WrapperDescriptorType, types.MethodDescriptorType)
            ):
                return None  # a built-in type's own comparison looks at its own storage only
            if id(method) in _WATCHES:
                return None  # a class this harness watches already: its watch sees this one's instances
            # one the code under test defines is asked as that class's own; the standard library's
            # frozen modules (``collections.abc``) have no path
            where = _defined_in(method)
            return base if _outside_root(where) or where.startswith("<frozen ") else None
    return None


def _watch(cls: Any) -> None:
    """Give ``cls`` comparisons of its own that call the inherited ones, and, whenever one answers
    "equal", ask it again about near misses of the other value with the same instance (its real state):
    one the same size with an element changed (a set, a list, a dict), a string with a letter more, a number
    moved. One that says "equal" to a near miss marks ``cls`` caught (an abstract ``Set`` whose ``__iter__``
    yields nothing equals every set of its length). Classes that appear later are watched at the next
    check; the first comparisons of a class made and used within one test go unwatched."""
    for name, lie in (("__eq__", True), ("__ne__", False)):
        base = _inherited(cls, name)
        if base is None:
            continue
        inherited = base.__dict__[name]

        def compare(self: Any, other: Any, _inherited: Any = inherited, _lie: bool = lie) -> Any:
            said = _inherited(self, other)
            if said is _lie and not _ASKING:
                _ASKING.append(True)
                try:
                    if any(_answer(_inherited, self, near) is _lie for near in _near_misses(other)):
                        _CAUGHT.add(id(cls))
                finally:
                    _ASKING.pop()
            return said

        _WATCHES.add(id(compare))
        _WATCHING.append(compare)  # alive: its id stays its own
        type.__setattr__(cls, name, compare)


def _answer(compare: Any, self: Any, other: Any) -> Any:
    try:
        return compare(self, other)
    except BaseException:  # refusing a value is not saying "equal" to it
        return None


def _near_misses(other: Any) -> list[Any]:
    """Values close to ``other`` that nothing honest takes for it (the same type where it can be kept)."""
    token = _token_hex(8)
    found: list[Any] = [object()]
    if isinstance(other, bool):
        found.append(not other)
    elif isinstance(other, (int, float)):
        found.append(other + 1 + int(token[:3], 16))
    elif isinstance(other, str):
        found.append(other + token[0])
    elif isinstance(other, (list, tuple)) and other:
        changed = list(other)
        changed[int(token, 16) % len(changed)] = object()
        found.append(type(other)(changed) if type(other) in (list, tuple) else changed)
    elif isinstance(other, (set, frozenset)) and other:
        changed_set = set(other)
        changed_set.discard(next(iter(changed_set)))
        changed_set.add(f"probe-{token}")
        found.append(type(other)(changed_set) if type(other) in (set, frozenset) else changed_set)
    elif isinstance(other, dict) and other:
        try:
            changed_dict = copy.copy(other)
            changed_dict[next(iter(changed_dict))] = object()
        except BaseException:
            changed_dict = dict(other)
            changed_dict[next(iter(changed_dict))] = object()
        found.append(changed_dict)
    return found


def _inherited_lies(cls: Any) -> bool:
    """Whether an instance of ``cls``, given its state by the base that defines the comparison (its
    ``__init__`` with no argument, or one empty one), says it equals a value made up just now."""
    for name, lie in (("__eq__", True), ("__ne__", False)):
        base = _inherited(cls, name)
        if base is None:
            continue
        try:
            instance = cls.__new__(cls)
        except BaseException:
            continue
        _given_state(base, instance)
        token = _token_hex(8)
        for probe in (object(), f"probe-{token}", int(token, 16), [token], {token}, {token: token}):
            try:
                if base.__dict__[name](instance, probe) is lie:
                    return True
            except BaseException:
                continue
    return False


# Set once by ``main`` before any candidate code runs, immutable, and held by name in the snapshot (this
# module's every name is): code that rebinds one to pass as the tests' is reported; what is remembered per
# path lives in ``functools.lru_cache``s, whose entries no Python code can write.
_ROOT = ""  # the folder under test: code defined in a file there (not a test file) is the candidate's
_TESTS: frozenset[str] = frozenset()
_TEST_TEXT: tuple[str, ...] = ()
# what an instance answers that an assertion takes at its word: "equal" (==, !=), "contains" (assertIn)
_LIES = (("__eq__", True), ("__ne__", False), ("__contains__", True))
_OPPOSITES = (("__lt__", "__gt__"), ("__le__", "__ge__"))  # never both true of one value and another
_COMPARING = (
    "__eq__",
    "__ne__",
    "__contains__",
    "__sub__",
    "__rsub__",
    "__lt__",
    "__gt__",
    "__le__",
    "__ge__",
)
_WATCHES: set[int] = set()  # ids of the comparisons ``_watch`` gave classes
_WATCHING: list[Any] = []
_ASKING: list[bool] = []  # a watch is asking near misses (its own questions are not asked again)
_CAUGHT: set[int] = set()  # ids of watched classes that said "equal" to a near miss
_PROBED: dict[tuple[Any, ...], bool] = {}  # (class, its __eq__, its __ne__[, its members]) -> equals anything


def _defined_in(method: object) -> str:
    """The file that defines a comparison: its code's, through method, partial and wrapper layers; for a
    callable object without code (``unittest.mock``'s proxies), its type's module's file."""
    for _ in range(8):
        inner = getattr(method, "__func__", None) or getattr(method, "func", None)
        inner = inner or getattr(method, "__wrapped__", None)
        if inner is None or inner is method:
            break
        method = inner
    code = getattr(method, "__code__", None)
    if code is not None:
        return str(code.co_filename)
    module = sys.modules.get(getattr(type(method), "__module__", ""))
    return str(getattr(module, "__file__", "") or "")


def _named_by_tests(cls: Any) -> bool:
    """Whether the test files name the module that defines ``cls`` (``mock`` for ``unittest.mock``): a
    library's always-equal helper is the tests' only when they use that library."""
    name = str(getattr(cls, "__module__", "") or "").rsplit(".", 1)[-1]
    return bool(name) and any(name in text for text in _TEST_TEXT)


def _in_tests(filename: str) -> bool:
    return os.path.isabs(filename) and os.path.realpath(filename) in _TESTS


def _outside_root(filename: str) -> bool:
    """An absolute path outside the folder under test (code compiled from a string has no such path);
    remembered per path (every check asks about every class)."""
    return _outside(filename, _ROOT)


@functools.cache
def _outside(filename: str, root: str) -> bool:
    return os.path.isabs(filename) and not os.path.realpath(filename).startswith(root + os.sep)


@functools.cache
def _file_under_test(where: str) -> bool:
    """A file of the code under test: in the folder under test, not a test file."""
    return bool(where) and not _outside_root(where) and not _in_tests(where)


WATCHED_PROCESS = frozenset({
    "os.fork", "os.forkpty", "os.kill", "os.killpg", "os.exec", "os.posix_spawn", "os.spawn", "os.system",
    "subprocess.Popen", "pty.spawn", "ctypes.dlopen", "ctypes.dlsym", "ctypes.addressof", "sys.settrace",
    "sys.setprofile", "sys._current_frames", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
})  # fmt: skip
MADE_CODE = frozenset({"code.__new__", "marshal.loads", "marshal.load", "function.__new__"})
CHANGED = frozenset({"object.__setattr__", "object.__delattr__"})
IN_PLACE = frozenset({"__code__", "__defaults__", "__kwdefaults__", "__class__", "__bases__"})
FRAME_ATTRS = frozenset({"tb_frame", "f_code", "gi_frame", "cr_frame", "ag_frame"})
IMPORTING = "<frozen importlib._bootstrap"  # the import system's frames (and ``_bootstrap_external``'s)
REVEALERS = ("inspect.py", "traceback.py")  # stdlib modules that hand a caller's frames or source back
WATCH = "watched"


def watch(channel: Channel, root: str, tests: frozenset[str], shape: Any) -> None:
    """Install an audit hook (for the life of the process: Python code cannot remove one) that reports, as
    ``tamper``, what the code under test does beyond computing: open a test or grader file, reach a frame
    (``sys._getframe``, a traceback's or generator's frame, a frame's code, directly or through ``inspect``
    or ``traceback``), compile code itself, make code or load it from bytes, change in place what is not its
    own (a library's or test's function's code or defaults, a module's or class's class, a class's bases),
    or start, signal or trace processes. The code under test is any code that is not the standard library,
    a test, this harness or an installed package (``shape.Places``); an event is its doing when the nearest frame
    outside the standard library is its own (a test helper that inspects frames while the code under test
    is on the stack is the test's doing). Its state lives in this closure only."""
    busy = [False]
    reported: set[str] = set()
    places = _shape.Places(root, tests)  # its own: what it remembers lives in this closure only
    getframe, realpath, kind, grader = sys._getframe, os.path.realpath, places.kind, places.grader
    # taken now: a module-level name rebound later (ours or a library's) does not change what this sees
    std, candidate, own, label, send = _shape.STD, _shape.CANDIDATE, _own, _label, channel.send
    revealers, importing, frame_attrs, process = REVEALERS, IMPORTING, FRAME_ATTRS, WATCHED_PROCESS
    made_code, changed, in_place, watched = MADE_CODE, CHANGED, IN_PLACE, WATCH
    relpath, fsdecode, path_like = os.path.relpath, os.fsdecode, os.PathLike

    def culprit(innermost_only: bool, imports: bool = True) -> bool:
        """Whether the nearest frame outside the standard library is the code under test's (the event's
        own frame, when ``innermost_only``, unless that is ``inspect`` or ``traceback`` working for it;
        not through the import system, unless ``imports``: a library module doing so as it loads)."""
        frame: types.FrameType | None = getframe(2)
        first = True
        while frame is not None:
            name = frame.f_code.co_filename
            found = kind(name)
            if found != std:
                return found == candidate
            if innermost_only and first and not name.endswith(revealers):
                return False  # a library's own use of its caller's frame (namedtuple, enum, logging)
            if not imports and name.startswith(importing):
                return False
            first, frame = False, frame.f_back
        return False

    def hook(event: str, args: tuple) -> None:
        if busy[0]:
            return
        what = None
        busy[0] = True
        try:
            if event == "open" and isinstance(args[0], (str, bytes, path_like)):
                path = realpath(fsdecode(args[0]))
                if (path in tests or path.startswith(grader)) and culprit(innermost_only=False):
                    what = f"opened {relpath(path, root) if path in tests else path}"
            elif (event == "object.__getattr__" and args[1] in frame_attrs) or event == "sys._getframe":
                if culprit(innermost_only=True):
                    what = f"reached a frame ({args[1] if event == 'object.__getattr__' else event})"
            elif event == "compile" and culprit(innermost_only=True):
                what = "compiled code itself"
            elif event in made_code and culprit(innermost_only=False, imports=False):
                what = f"made code ({event})"
            elif event == "object.__getattr__" and args[1] == "__code__" and not own(args[0], places, shape):
                if culprit(innermost_only=True, imports=False):  # (a library reading one as it loads)
                    what = f"read {label(args[0])}.__code__"
            elif event in changed and args[1] in in_place and not own(args[0], places, shape):
                if culprit(innermost_only=False, imports=False):
                    what = f"set {label(args[0])}.{args[1]}"
            elif event in process and culprit(innermost_only=False):
                what = event
            if what and what not in reported and len(reported) < 5:
                reported.add(what)
                send({"t": "tamper", "what": [f"{watched}: the code under test {what}"]})
        except Exception:  # the hook must never break the run it watches
            pass
        finally:
            busy[0] = False

    sys.addaudithook(hook)


def _own(
    target: object,
    places: Any,
    shape: Any,
    _kinds: tuple[type, type, type] = (types.FunctionType, type, types.ModuleType),
    _candidate: str = _shape.CANDIDATE,
) -> bool:
    """Whether what is read or changed in place belongs to the code under test: its function, a class it
    made, its module, or any other object (an instance may change its own class)."""
    function, cls, module = _kinds
    if isinstance(target, function):
        return places.kind(target.__code__.co_filename) == _candidate  # type: ignore[attr-defined]
    if isinstance(target, cls):
        return not shape.trusted_class(target)
    if isinstance(target, module):
        return places.of_module(target) == _candidate
    return True


def _label(target: object) -> str:
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None)
    module = getattr(target, "__module__", None)
    return f"{module}.{name}" if isinstance(module, str) and isinstance(name, str) else type(target).__name__


class Reporter:
    """A pytest plugin object: streams collection, each phase's report and the end of the session."""

    def __init__(self, channel: Channel, shape: Any) -> None:
        self.channel, self.shape = channel, shape
        self.integrity: Integrity | None = None

    def pytest_sessionstart(self, session: object) -> None:
        self.integrity = Integrity(self.shape)

    def pytest_collectreport(self, report: types.SimpleNamespace) -> None:
        if report.outcome == "failed":
            self.channel.send({"t": "collect_error", "id": report.nodeid})

    def pytest_collection_finish(self, session: types.SimpleNamespace) -> None:
        self.channel.send({"t": "collected", "ids": [item.nodeid for item in session.items]})
        if self.integrity is not None:  # the code under test is imported: its classes are watched now
            for item in session.items:  # the test modules as pytest holds them (not as named in sys.modules)
                with contextlib.suppress(Exception):
                    self.integrity.tests[os.path.realpath(str(item.path))] = item.module
            self.integrity.check(self.channel)

    def pytest_runtest_logreport(self, report: types.SimpleNamespace) -> None:
        record = {"t": "report", "id": report.nodeid, "phase": report.when, "outcome": report.outcome}
        self.channel.send(record)

    def pytest_runtest_logfinish(self, nodeid: str, location: object) -> None:
        if self.integrity is not None:
            self.integrity.check(self.channel)

    def pytest_sessionfinish(self, session: object, exitstatus: int) -> None:
        if self.integrity is not None:
            self.integrity.check(self.channel)
        self.channel.send({"t": "end", "exitstatus": int(exitstatus)})


def run_pytest(channel: Channel, root: str, files: list[str], collect_only: bool, shape: Any) -> int:
    import pytest

    sys.path.append(root)
    # A grader-owned configuration, read before candidate code exists: repository ini files cannot add
    # options or plugins.
    with tempfile.TemporaryDirectory(prefix="harness-", ignore_cleanup_errors=True) as own:
        ini = os.path.join(own, "pytest.ini")
        with open(ini, "w") as f:
            f.write("[pytest]\naddopts =\n")
        args = ["-q", "-p", "no:cacheprovider", "-c", ini, "--rootdir", root, "--confcutdir", root]
        args += ["--collect-only"] if collect_only else []
        return int(pytest.main([*args, *files], plugins=[Reporter(channel, shape)]))


def run_direct(channel: Channel, root: str, files: list[str], shape: Any) -> int:
    import unittest

    with contextlib.suppress(ImportError):  # watched from the start when the tests use it (pytest.raises)
        import pytest  # noqa: F401
    sources = {}
    for rel in files:
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            sources[rel] = f.read()
    sys.path.append(root)
    integrity = Integrity(shape)
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
            channel.send({"t": "collect_error", "id": rel})
            continue
        integrity.tests[os.path.realpath(path)] = module
        tests += _tests_of(rel, module, unittest.TestCase)
    channel.send({"t": "collected", "ids": [test_id for test_id, _ in tests]})
    integrity.check(channel)  # the code under test is imported: its classes are watched now
    failed = 0
    ready: dict[type, bool] = {}
    for test_id, target in tests:
        outcome = _call(target, ready, unittest)
        failed += outcome == "failed"
        channel.send({"t": "report", "id": test_id, "phase": "call", "outcome": outcome})
        integrity.check(channel)
    for cls in ready:
        _outcome(getattr(cls, "tearDownClass", lambda: None))
    integrity.check(channel)
    channel.send({"t": "end", "exitstatus": int(failed > 0)})
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


def _call(target: Any, ready: dict[type, bool], unittest: types.ModuleType) -> str:
    if isinstance(target, types.FunctionType):
        return _outcome(target)
    cls, method = target
    if not issubclass(cls, unittest.TestCase):
        return _outcome(lambda: getattr(cls(), method)())
    if cls not in ready:
        ready[cls] = _outcome(getattr(cls, "setUpClass", lambda: None)) == "passed"
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


def _outcome(call: Callable[[], object]) -> str:
    try:
        call()
    except BaseException as exc:  # SystemExit and the like fail the test, as under pytest
        return "skipped" if type(exc).__name__ in ("SkipTest", "Skipped") else "failed"
    return "passed"


def main(argv: list[str]) -> int:
    channel = Channel()
    mode, root, files = argv[1], argv[2], argv[3:]
    os.chdir(root)
    global _ROOT, _TESTS, _TEST_TEXT
    _ROOT = os.path.realpath(root)
    _TESTS = frozenset(os.path.realpath(os.path.join(root, rel)) for rel in files)
    sources = {}
    for path in _TESTS:
        with contextlib.suppress(OSError), open(path, encoding="utf-8", errors="replace") as f:
            sources[path] = f.read()
    _TEST_TEXT = tuple(sources.values())
    shape = _shape.Shape(_shape.Places(_ROOT, _TESTS), sources)  # imports the tests' libraries
    if mode != "collect":  # candidate code runs from here on
        watch(channel, _ROOT, _TESTS, shape)
    if mode == "direct":
        return run_direct(channel, root, files, shape)
    return run_pytest(channel, root, files, collect_only=mode == "collect", shape=shape)


if __name__ == "__main__":
    sys.modules["_ms_harness"] = sys.modules["__main__"]
    sys.exit(main(sys.argv))
