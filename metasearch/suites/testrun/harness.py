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
a fresh instance); a class of the code under test that compares by its own comparison or one inherited that
way is also watched with its real instances (``_watching``), from its class statement on; the cyclic
collector is off, so a class made per call lives until it is checked. Both also install an audit hook (``watch``) before
candidate code runs, which reports the code under test opening a test or grader file, reaching a frame,
compiling or making code itself, changing in place a function, class or module that is not its own
(``__code__``, ``__defaults__``, ``__class__``, ``__bases__``), adding an audit hook, reading the process's
memory or descriptors, calling through ctypes, or starting, signalling or tracing processes; a signal
handler it installs is given no frame (``_guarded``: a frame leads to every caller's locals). The session ends with an ``end`` record; a run without it ended early.

A change put back before the next check (a replacement that restores the original when it is first
used) is stopped two ways: the runner's classes, and in the direct run each test class once set up, are
frozen (``frozen.py``: setting a name on them raises ``TypeError``); and what the test files name of the
code under test is wrapped in ``entries.Entry``, whose calls raise audit events around them, so the hook
compares what the tests rely on (``shape.while_running``) before and after each outermost call.

What decides lives where candidate code cannot reach without a step the audit hook reports: the channel,
the check, its memo and what it compares with are the runners' locals and closures built by ``main``
before candidate code runs, never module names; the check looks up no name when it runs (``_integrity``,
``_comparisons``, ``shape.holding``); the comparisons given to the candidate's classes hold only their
defaults and report through audit events (``_watching``). Residual risk: the candidate shares this
process, so code that finds the channel's fd and nonce in memory, and forges the other harness the same
way, can still lie; in the pytest run pytest's plugin manager leads to our plugin and so to the channel
and the check, which the direct run does not share. The static scan (``scan.py``) flags the routes to
doing that.
"""

from __future__ import annotations

import _imp
import _signal
import _thread
import contextlib
import functools
import gc
import importlib.machinery
import json
import os
import pathlib
import secrets
import signal
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
_frozen = _sibling("frozen")
_entries = _sibling("entries")
_token_hex = secrets.token_hex
_shuffle = secrets.SystemRandom().shuffle
ALWAYS_EQUAL = "always-equal class"


def _open_channel() -> Callable[[dict], None]:
    """The write end of the result channel: a function that sends one record, numbered and carrying the
    run's nonce. What it uses is bound in its closure when it is made (a name rebound later in this module
    or in ``json`` or ``os`` changes nothing), and it is held only by the runners' locals and the audit
    hook's closure (in the pytest run, by our plugin too)."""
    line = sys.stdin.buffer.readline(256).decode("ascii", "replace").split()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    if len(line) != 2:
        raise SystemExit("harness: no channel on stdin")
    fd, nonce, seq, write, dumps = int(line[0]), line[1], [0], os.write, json.dumps

    def send(record: dict) -> None:
        data = f"{nonce} {seq[0]} {dumps(record)}\n".encode()
        seq[0] += 1
        while data:
            data = data[write(fd, data) :]

    return send


def _integrity(
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
    claims to equal anything (``_comparisons``).

    Everything it uses is bound here, when it is made, and it is held only where candidate code cannot
    reach without a step the audit hook reports (the runners' locals; in the pytest run, our plugin): a
    module-level name rebound past the scan (ours, ``operator.is_``, ``builtins.all``) cannot blind it,
    and neither can a class method replaced (the held names are compared first, and again last, since the
    comparisons it asks run the code under test)."""
    gc.disable()  # a class made per call lives until the next check instead of a collection
    snapshot = _shape.Snapshot(places, shape.cells)
    take_new, moved, check_shape = snapshot.take_new, _shape.holding(snapshot), shape.check
    modules: dict[str, types.ModuleType] = {}
    reported, first = [False], [True]
    entering, holders, list_, type_ = _entering(places, entered), shape.holders, list, type
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


def _entering(
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
    list_, isinstance_, type_, vars_, id_, str_, hold = list, isinstance, type, vars, id, str, _shape.hold

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


def _class_label(
    cls: Any,
    _module: Callable[[Any], Any] = vars(type)["__module__"].__get__,
    _qualname: Callable[[Any], Any] = vars(type)["__qualname__"].__get__,
    _type: type = type,
    _str: type = str,
    _exception: type[BaseException] = Exception,
) -> str:
    """A class's ``module.qualname``, read through ``type``'s own descriptors and formatted only when each
    is an exact ``str``: nothing of the class's runs (a metaclass's property, the ``__format__`` of an
    object its body bound to ``__module__``), which the audit hook, labelling a class, must not let run."""
    try:
        module, name = _module(cls), _qualname(cls)
    except _exception:
        return "?"
    return f"{module if _type(module) is _str else '?'}.{name if _type(name) is _str else '?'}"


def _near_misses(
    other: Any,
    _token_hex: Callable[[int], str] = _token_hex,
    _shuffle: Callable[[list[Any]], None] = _shuffle,
    _type: type = type,
    _object: type = object,
    _next: Callable[..., Any] = next,
    _iter: Callable[..., Any] = iter,
    _len: Callable[[Any], int] = len,
    _types: tuple[type, ...] = (bool, int, float, str, list, tuple, set, frozenset, dict),
) -> list[Any]:
    """``other`` itself and values close to it that nothing honest takes for it, in a random order: a new
    object, and for a value of a built-in type (exactly) one the same size with an element changed (a list,
    a tuple, a set, a dict), two strings a letter longer, two numbers moved, the other truth value. No code
    of the candidate's runs here, and what it uses is bound in its defaults (a tuple: replacing them is what
    the audit hook reports), as it is reachable from the candidate's classes (``_watching``)."""
    boolean, integer, real, string, listing, pair, group, frozen, mapping = _types
    token = _token_hex(8)
    found: list[Any] = [other, _object()]
    kind = _type(other)
    if kind is boolean:
        found.append(not other)
    elif kind is integer or kind is real:
        found += [other + 1 + integer(token[:3], 16), other - 1 - integer(token[3:6], 16)]
    elif kind is string:
        found += [other + token[0], token[1] + other]
    elif (kind is listing or kind is pair) and other:
        changed = listing(other)
        changed[integer(token, 16) % _len(changed)] = _object()
        found.append(kind(changed))
    elif (kind is group or kind is frozen) and other:
        changed_set = group(other)
        changed_set.discard(_next(_iter(changed_set)))
        changed_set.add(f"probe-{token}")
        found.append(kind(changed_set))
    elif kind is mapping and other:
        changed_dict = mapping(other)
        changed_dict[_next(_iter(changed_dict))] = _object()
        found.append(changed_dict)
    _shuffle(found)
    return found


def _far_from(
    other: Any,
    _token_hex: Callable[[int], str] = _token_hex,
    _type: type = type,
    _object: type = object,
    _int: type = int,
    _tuple: type = tuple,
    _list: type = list,
    _len: Callable[[Any], int] = len,
    _str: type = str,
    _float: type = float,
) -> list[Any]:
    """Values no container holds unless it holds everything: a new object, and for a string, a number or a
    tuple of the built-in types (exactly) the same with 16 random letters more, moved by more than 2**62, or
    with an element a new object (a near value could honestly be in a range)."""
    token = _token_hex(8)
    found: list[Any] = [_object()]
    kind = _type(other)
    if kind is _str:
        found.append(other + token)
    elif kind is _int or kind is _float:
        found.append(other + 2**62 + _int(token, 16))
    elif kind is _tuple and other:
        changed = _list(other)
        changed[_int(token, 16) % _len(changed)] = _object()
        found.append(_tuple(changed))
    return found


ENTER, LEAVE = _entries.ENTER, _entries.LEAVE
CAUGHT = "metasearch.harness.caught"  # the audit event a watched comparison raises when it is caught
ASKING = "metasearch.harness.asking"  # ... before and after it asks its questions (the hook refuses a second)
# what each watched method is asked: its kind, and for an order, what the other orders must answer about
# the same value when it answers "yes" (``x < a``: not ``x >= a``, and ``x <= a``)
_WATCHED: dict[str, tuple[str, tuple[tuple[str, bool], ...]]] = {
    "__eq__": ("eq", ()), "__ne__": ("ne", ()), "__contains__": ("contains", ()),
    "__lt__": ("order", (("__ge__", False), ("__le__", True))),
    "__gt__": ("order", (("__le__", False), ("__ge__", True))),
    "__le__": ("order", (("__gt__", False),)), "__ge__": ("order", (("__lt__", False),)),
    "__sub__": ("sub", ()), "__rsub__": ("rsub", ()),
}  # fmt: skip


def _watching(inherited: Any, name: str, label: str) -> Callable[[Any, Any], Any]:
    """A method for a class (its own, or one it inherits written in Python) that asks ``inherited`` the
    question it was given, with the same instance (its real state, when the tests ask it), after questions
    whose answers an honest one cannot give together with "yes" to that one:

    - ``__eq__``/``__ne__``: the other value and near misses of it, in a random order. An equality is
      transitive: one that says "equal" to the value and to a near miss ("equal" to ``5`` and to
      ``5 + 1900``; to ``[1, 2]`` and to ``[1, <a new object>]``) equals whatever it is shown, however it
      tells the harness's probes from a test's value; asking first defeats one that takes the first value it
      is shown for its own.
    - ``__contains__``: values no container holds (``_far_from``), and for a subclass of a built-in
      container, what its storage holds.
    - an order (``__lt__``, ...): the other orders about the same value (``x < a`` with ``x >= a``, or
      without ``x <= a``).
    - ``__sub__``/``__rsub__``: when the difference is nil (what a tolerance check takes at its word), the
      difference from the value moved by a random whole number, which must move by that much.

    Caught, it raises the audit event ``CAUGHT``, which the audit hook reports. It holds nothing but its
    defaults (a tuple: replacing them, or its code, is what the audit hook reports); it has no closure.
    While one asks, the others do not (the hook refuses ``ASKING``)."""
    kind, implied = _WATCHED[name]

    def compare(
        self: Any,
        other: Any,
        _inherited: Any = inherited,
        _kind: str = kind,
        _implied: tuple[tuple[str, bool], ...] = implied,
        _label: str = label,
        _near: Callable[[Any], list[Any]] = _near_misses,
        _far: Callable[[Any], list[Any]] = _far_from,
        _audit: Callable[..., None] = sys.audit,
        _exception: type[BaseException] = BaseException,
        _asking: str = ASKING,
        _caught: str = CAUGHT,
        _builtins: tuple[Any, ...] = (type, getattr, float, abs, int, _token_hex),
        _storage: tuple[type, ...] = (list, tuple, set, frozenset, dict, str),
        _calls: tuple[str, str] = (ENTER, LEAVE),
    ) -> Any:
        _audit(_calls[0])  # a call into the code under test (``entries``): what it changes is seen
        try:
            try:
                _audit(_asking, True)
            except _exception:  # another is asking: this is one of its questions
                return _inherited(self, other)
            type_, getattr_, float_, abs_, int_, token_hex = _builtins
            lied, answer = False, _kind != "ne"  # the answer that takes an assertion at its word
            try:
                if _kind == "eq" or _kind == "ne":
                    for question in _near(other):
                        try:
                            lied = (_inherited(self, question) is answer and question is not other) or lied
                        except _exception:  # refusing a value is not saying "equal" to it
                            continue
                elif _kind == "contains":
                    for question in _far(other):
                        try:
                            lied = _inherited(self, question) is True or lied
                        except _exception:
                            continue
                    for base in type_(self).__mro__:
                        if base in _storage:  # a built-in container's storage says what it holds
                            lied = lied or (
                                _inherited(self, other) is True and not base.__contains__(self, other)
                            )
                            break
                elif _kind == "order":  # an answer of another type (NotImplemented) says nothing
                    for order, must in _implied:
                        lied = getattr_(type_(self), order)(self, other) is (not must) or lied
                elif type_(other) is int_ or type_(other) is float_:  # a difference
                    shift = 1000.5 + int_(token_hex(2), 16)  # (never a multiple of a modulus)
                    near, far = float_(_inherited(self, other)), float_(_inherited(self, other + shift))
                    slack = 1e-6 * shift + 1e-9 * (abs_(near) + abs_(far) + abs_(other))  # rounding
                    # "no difference" (what a tolerance check takes at its word) that the moved operand leaves
                    # nil too, or moves by a little less or more than it moved (a modular difference, which
                    # honestly moves by the shift and the rest of the modulus, is not flagged)
                    off, nil = (
                        abs_(near - far - (shift if _kind == "sub" else -shift)),
                        1e-6 * (1 + abs_(other)),
                    )
                    lied = abs_(near) <= nil and (abs_(far) <= nil or slack < off < shift / 2)
            except _exception:  # a question it cannot answer is no answer
                pass
            finally:
                _audit(_asking, False)
            said = _inherited(self, other)
            if lied and (said is answer or _kind == "sub" or _kind == "rsub"):
                _audit(_caught, _label)
            return said
        finally:
            _audit(_calls[1])

    return compare


_WATCH_CODE = _watching(None, "__eq__", "").__code__  # every watched comparison runs this code


def _comparisons(
    root: str, tests: frozenset[str], text: tuple[str, ...], trusted_class: Callable[[Any], bool]
) -> tuple[
    Callable[[], tuple[list[str], bool]],
    Callable[[Any], None],
    Callable[[list[Any]], list[tuple[str, Any, tuple[str, ...], tuple[Any, ...]]]],
]:
    """``always_equal()``: the live classes (known before the code under test ran or not) whose own
    ``__eq__`` says an instance equals a value made up just now (a fresh object, a random string, number or
    list), whose own ``__ne__`` says it differs from none of them, whose own subtraction ignores its
    operand, whose ordering puts an instance on both sides of one value, or whose comparison inherited from
    library code says so; and those a watched comparison caught (``_watching``), reported through the
    audit hook. Each class of the code under test that compares by its own ``__eq__``/``__ne__`` or by one
    written in Python outside it (``collections.UserList``'s, the abstract ``Set``'s) is given a watched
    comparison: probing a made-up instance with made-up values misses a liar that tells probes apart, the
    watch asks its real instances about the tests' own values.

    A closure: its helpers, the built-ins and library functions they call, and its memo are bound here,
    when it is made (none is looked up by name when it runs), so code that rebinds a module's name, or
    runs in the middle of a check (a comparison it asks), cannot change what the check does."""
    isinstance_, getattr_, hasattr_, id_, any_, tuple_, list_, type_ = (
        isinstance, getattr, hasattr, id, any, tuple, list, type,
    )  # fmt: skip
    str_, int_, float_, abs_, bool_, object_, exception = (
        str, int, float, abs, bool, object, BaseException,
    )  # fmt: skip
    all_classes, token_hex, watching, watch_code = _shape.all_classes, _token_hex, _watching, _WATCH_CODE
    always = ALWAYS_EQUAL
    modules, isabs, realpath, sep = sys.modules, os.path.isabs, os.path.realpath, os.sep
    descriptors = (types.WrapperDescriptorType, types.MethodDescriptorType)
    function_type, range_, issubclass_, module_type = types.FunctionType, range, issubclass, types.ModuleType
    dict_of, mro_of = vars(type)["__dict__"].__get__, vars(type)["__mro__"].__get__
    module_of, class_label = vars(type)["__module__"].__get__, _class_label
    module_dict = vars(module_type)["__dict__"].__get__
    type_setattr = type.__setattr__
    lies = (("__eq__", True), ("__ne__", False), ("__contains__", True))
    opposites = (("__lt__", "__gt__"), ("__le__", "__ge__"))  # never both true of one value and another
    comparing = tuple_(_WATCHED)  # __eq__, __ne__, __contains__, the orders, __sub__, __rsub__
    outside: dict[str, bool] = {}  # per path
    testing: dict[str, bool] = {}
    probed: dict[
        tuple[Any, ...], tuple[bool, bool]
    ] = {}  # (class, its comparisons[, members]) -> (lies, ours)
    watched: dict[int, tuple[Any, dict[str, Any]]] = {}  # id(class) -> (class, the comparisons given it)
    entered: dict[int, Any] = {}  # id(class) -> a class the tests name, whose functions are in entries
    wrap, hold = _entries.wrapped, _shape.hold

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

    def code_under_test(member: object) -> bool:
        """Whether a class member is a function (method, static or class method, property) whose code
        the code under test wrote: in one of its files, or compiled from a string."""
        for inner in (getattr_(member, "__func__", None), getattr_(member, "fget", None), member):
            code = getattr_(inner, "__code__", None)
            if code is not None:
                where = str_(code.co_filename)
                return not outside_root(where) and not in_tests(where) and not where.startswith("<frozen ")
        return False

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

    def watch(cls: Any, own_code: bool, in_hook: bool = False) -> list[str]:
        """Give ``cls`` watched comparisons (``_watching``) in place of its own plain functions that the
        code under test wrote (``own_code``), or of the ``__eq__``/``__ne__`` it inherits; one the class
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

    def enter(classes: list[Any]) -> list[tuple[str, Any, tuple[str, ...], tuple[Any, ...]]]:
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

    return always_equal, watch_new, enter


GUARDED = "metasearch.harness.guarded"  # the audit event a guard (``_guarded``) raises for each call


def _guarded(name: str) -> Callable[..., Any]:
    """A stand-in for a built-in function whose original only the audit hook holds (``_signal.signal``,
    ``_imp.create_builtin``, ``_imp.exec_builtin``): it raises ``GUARDED`` with its arguments and a box,
    and the hook calls the original, or refuses, and puts the outcome in the box. Nothing reachable holds
    the original, so code cannot call it past the hook."""

    def guard(
        *args: Any, _name: str = name, _audit: Callable[..., None] = sys.audit, _event: str = GUARDED
    ) -> Any:
        box: list[tuple[bool, Any]] = []
        _audit(_event, _name, args, box)
        if not box:
            raise PermissionError(f"harness: {_name}{args!r} refused")
        done, value = box[0]
        if done:
            return value
        raise value

    return guard


_GUARD_CODE = _guarded("").__code__


WATCHED_PROCESS = frozenset({
    "os.fork", "os.forkpty", "os.kill", "os.killpg", "os.exec", "os.posix_spawn", "os.spawn", "os.system",
    "subprocess.Popen", "pty.spawn", "ctypes.dlopen", "ctypes.dlsym", "ctypes.addressof", "sys.settrace",
    "sys.setprofile", "sys._current_frames", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
    "sys._setprofileallthreads", "sys._settraceallthreads", "sys.monitoring.register_callback",
    "ctypes.call_function", "ctypes.cdata", "ctypes.cdata/buffer", "ctypes.string_at", "ctypes.wstring_at",
})  # fmt: skip
PROC_SECRETS = frozenset({"mem", "maps", "pagemap", "fd", "fdinfo"})  # /proc/<pid>/...: memory, descriptors
MADE_CODE = frozenset({"code.__new__", "marshal.loads", "marshal.load", "function.__new__"})
CHANGED = frozenset({"object.__setattr__", "object.__delattr__"})
IN_PLACE = frozenset({"__code__", "__defaults__", "__kwdefaults__", "__class__", "__bases__"})
FRAME_ATTRS = frozenset({"tb_frame", "f_code", "gi_frame", "cr_frame", "ag_frame"})
IMPORTING = "<frozen importlib._bootstrap"  # the import system's frames (and ``_bootstrap_external``'s)
# The standard library's functions that take a caller's frame or a function's code and keep what they
# learn to themselves (a module's name, a warning's or a log record's place), by their function's name and
# file. Any other standard-library function that takes one on the code under test's behalf may hand it
# back: ``inspect``, ``traceback``, ``dis``, ``logging.currentframe``, ``functools.singledispatch``
# wrapping ``sys._getframe``.
KEEPERS = {
    "namedtuple": "/collections/__init__.py", "_caller": "/typing.py", "_create_": "/enum.py",
    "findCaller": "/logging/__init__.py", "handleError": "/logging/__init__.py", "warn": "/warnings.py",
    "_as_int": "/gettext.py", "_text_encoding": "/subprocess.py",
}  # fmt: skip
WATCH = "watched"


class _Refused(Exception):
    """What the audit hook raises to a watched comparison that asks while another is asking."""


class _Unchecked(Exception):
    """What the audit hook raises for an event it failed to check: the event does not happen."""


def _sourceless(path: str, _split: Callable[[str], tuple[str, str]] = os.path.split) -> bool:
    """A compiled module outside ``__pycache__``: its code carries whatever file name it was given
    (in ``__pycache__`` the import system names its source instead)."""
    folder, name = _split(path)
    return name.endswith(".pyc") and _split(folder)[1] != "__pycache__"


def watch(
    send: Callable[[dict], None],
    root: str,
    tests: frozenset[str],
    shape: Any,
    watch_new: Callable[[Any], None],
    running: tuple[Callable[[], tuple], Callable[[tuple], list[str]]],
) -> None:
    """Install an audit hook (for the life of the process: Python code cannot remove one) that reports, as
    ``tamper``, what the code under test does beyond computing: open a test or grader file, reach a frame
    (``sys._getframe``, a traceback's or generator's frame, a frame's code, directly or through ``inspect``
    or ``traceback``), compile code itself, make code or load it from bytes, change in place what is not its
    own (a library's or test's function's code or defaults, a module's or class's class, a class's bases),
    add an audit hook of its own, read the process's memory or descriptors (``/proc/self/mem``, ``fd``),
    call through ctypes, profile or trace every thread, or start, signal or trace processes. It also reports
    a watched comparison caught saying "equal" to a near miss (``CAUGHT``), lets one such comparison ask at a
    time (``ASKING``), and serves the guards (``GUARDED``): it alone holds ``_signal.signal``,
    ``_imp.create_builtin`` and ``_imp.exec_builtin``, whose modules hold guards from here on. The code under test is any code that is not the standard library, a test, this harness or
    an installed package (``shape.Places``); an event is its doing when the nearest frame outside the
    standard library is its own (a test helper that inspects frames while the code under test is on the
    stack is the test's doing). Its state lives in this closure only, and everything it uses is bound here
    (a built-in or a module's name rebound later changes nothing)."""
    busy: set[int] = set()  # the threads in the hook (another thread's events are its own)
    # per thread: how deep in calls into the code under test, and what the tests rely on held before
    depth: dict[int, int] = {}
    before: dict[int, tuple] = {}
    take, changed_since = running
    enter_event, leave_event, (call_code, stepped_code) = _entries.ENTER, _entries.LEAVE, _entries.CODES
    asking, ident, getpid, pid = [False], _thread.get_ident, os.getpid, os.getpid()
    reported: set[str] = set()
    places = _shape.Places(root, tests)  # its own: what it remembers lives in this closure only
    getframe, realpath, kind, grader = sys._getframe, os.path.realpath, places.kind, places.grader
    of_module, trusted_class = places.of_module, shape.trusted_class
    made_by_statement, build_class_code, class_made = (
        shape.made_by_statement,
        shape.build_class_code,
        _shape.CLASS_MADE,
    )
    std, candidate, always = _shape.STD, _shape.CANDIDATE, ALWAYS_EQUAL
    keepers, importing, frame_attrs, process = KEEPERS, IMPORTING, FRAME_ATTRS, WATCHED_PROCESS
    made_code, changed, in_place, watched, proc_secrets, any_ = (
        MADE_CODE,
        CHANGED,
        IN_PLACE,
        WATCH,
        PROC_SECRETS,
        any,
    )
    relpath, fsdecode, watch_code, caught_event, asking_event = (
        os.path.relpath, os.fsdecode, _WATCH_CODE, CAUGHT, ASKING,
    )  # fmt: skip
    isinstance_, getattr_, type_, len_, str_, int_, bool_, exception = (
        isinstance, getattr, type, len, str, int, bool, Exception,
    )  # fmt: skip
    function_type, module_type, refused, unchecked = (
        types.FunctionType,
        types.ModuleType,
        _Refused,
        _Unchecked,
    )
    open_, bytes_, trusted = open, bytes, _shape.TRUSTED
    failed: list[str] = []  # what the hook failed to check, told with its next report
    sourceless = _sourceless
    issubclass_, tuple_, list_, modules = issubclass, tuple, list, sys.modules
    module_dict = vars(module_type)["__dict__"].__get__
    class_name, class_label = vars(type)["__name__"].__get__, _class_label
    callable_, module_spec, guard_code, guarded_event = (
        callable,
        importlib.machinery.ModuleSpec,
        _GUARD_CODE,
        GUARDED,
    )
    # the originals live here only; their modules hold guards (taken before the snapshot, which holds them)
    originals = {
        "signal": _signal.signal,
        "create_builtin": _imp.create_builtin,
        "exec_builtin": _imp.exec_builtin,
    }
    allowed_builtin = frozenset(sys.builtin_module_names) - {"_signal", "_imp"}
    _signal.signal = _guarded("signal")
    signal.signal.__wrapped__ = _signal.signal  # type: ignore[attr-defined]
    _imp.create_builtin, _imp.exec_builtin = _guarded("create_builtin"), _guarded("exec_builtin")
    paths = frozenset(
        {str, bytes, pathlib.PurePath, pathlib.PurePosixPath, pathlib.Path, pathlib.PosixPath, os.DirEntry}
    )

    def origin(depth: int = 2) -> str:
        """Whose the nearest frame outside the standard library is (``std`` when there is none);
        ``depth`` as ``culprit``'s."""
        frame: types.FrameType | None = getframe(depth)
        while frame is not None:
            found = kind(frame.f_code.co_filename)
            if found != std:
                return found
            frame = frame.f_back
        return std

    def borrowed_name(source: Any, filename: Any) -> bool:
        """Whether code compiled under a library's, a test's or this grader's file name is other than
        that file's own source (``runpy``, ``code``, an import loader of the candidate's serving its own
        bytes): code so named would pass for theirs. An installed package's own compiling (pytest
        rewriting a test's assertions) is trusted."""
        if type_(filename) is not str_ or kind(filename) == candidate or origin(3) == trusted:
            return False
        if type_(source) is str_:
            source = source.encode("utf-8", "surrogateescape")
        if type_(source) is not bytes_:
            return True  # a syntax tree, a buffer: not read from that file
        try:
            with open_(filename, "rb") as f:
                return f.read() != source
        except exception:
            return True

    def culprit(innermost_only: bool, imports: bool = True, depth: int = 2, kept: bool = False) -> bool:
        """Whether the nearest frame outside the standard library is the code under test's (the event's
        own frame, when ``innermost_only``; not past a library function that keeps what it takes, when
        ``kept``: ``KEEPERS``; not through the import system, unless ``imports``: a library module doing
        so as it loads). ``depth``: the event's frame (past this function's and the hook's, and a
        guard's)."""
        frame: types.FrameType | None = getframe(depth)
        first = True
        while frame is not None:
            code = frame.f_code
            name = code.co_filename
            found = kind(name)
            if found != std:
                return found == candidate
            if innermost_only and first:
                return False  # a library's own compiling (namedtuple, dataclasses)
            if kept and name.endswith(keepers.get(code.co_name, "\0")):
                return False  # a library's own use of its caller's frame (namedtuple, enum, logging)
            if not imports and name.startswith(importing):
                return False
            first, frame = False, frame.f_back
        return False

    def guarded(name: str, call: tuple, box: list) -> str | None:
        if (
            type_(name) is not str_
            or name not in originals
            or type_(call) is not tuple_
            or type_(box) is not list_
        ):
            return f"called a guard with {type_(name).__name__} arguments"
        """Call a guarded original for its guard. A signal handler the code under test installs is given
        no frame (a frame leads to every caller's locals, which a handler could read and, from Python 3.13,
        write); the code under test making ``_signal`` or ``_imp`` again (to get the originals back) is
        refused."""
        by_candidate = culprit(innermost_only=False, depth=4)
        if name == "signal" and by_candidate and len_(call) == 2 and callable_(call[1]):
            handler = call[1]
            call = (call[0], lambda signum, frame, _handler=handler: _handler(signum, None))
        elif name != "signal" and by_candidate and len_(call) == 1:
            made = getattr_(call[0], "name", None) if type_(call[0]) is module_spec else None
            made = made if made is not None or type_(call[0]) is not module_type else call[0].__name__
            if made not in allowed_builtin:
                return f"made the module {made} again ({name})"
        serve(name, call, box)
        return None

    def serve(name: str, call: tuple, box: list) -> None:
        try:
            box.append((True, originals[name](*call)))
        except exception as exc:
            box.append((False, exc))

    # No code of the candidate's may run in the hook (its events are not seen while it does): what the
    # hook asks of an object it is handed, it asks by its exact type and through built-in descriptors.
    def own(target: object) -> bool:
        """Whether what is read or changed in place belongs to the code under test: its function, a class
        it made, its module, or any other object (an instance may change its own class)."""
        of = type_(target)
        if of is function_type:
            return kind(target.__code__.co_filename) == candidate  # type: ignore[attr-defined]
        if issubclass_(of, type_):
            return not trusted_class(target)
        if of is module_type:
            return of_module(target) == candidate
        return True

    def label(target: object) -> str:
        of = type_(target)
        if of is function_type:
            name, module = target.__qualname__, target.__module__  # type: ignore[attr-defined]
        elif issubclass_(of, type_):
            return class_label(target)
        elif of is module_type:
            name, module = module_dict(target).get("__name__"), None
        else:
            name, module = class_name(of), None
        if type_(module) is str_ and type_(name) is str_:
            return f"{module}.{name}"
        return name if type_(name) is str_ else "?"

    def traced_by_candidate() -> bool:
        """A trace or profile function ``threading`` gives each new thread (``threading.settrace``) that is
        not a library's: the new thread installs it, with no frame of the candidate's on its stack."""
        threading = modules.get("threading")
        space: dict[str, Any] = module_dict(threading) if type_(threading) is module_type else {}
        for name in ("_trace_hook", "_profile_hook"):
            found = space.get(name)
            if found is not None and (type_(found) is not function_type or own(found)):
                return True
        return False

    def hook(event: str, args: tuple) -> None:
        if (
            type_(event) is not str_
        ):  # (``sys.audit`` takes any str: a subclass's methods are the candidate's)
            return
        thread = ident()
        if thread in busy:  # this thread's event, raised by the hook's own work
            if event == guarded_event and getframe(1).f_code is guard_code:
                serve(*args)  # a built-in module whose making makes another (``_elementtree``: ``pyexpat``)
            return
        what = None
        busy.add(thread)
        try:
            if event in (enter_event, leave_event):  # a call into the code under test
                caller = getframe(1).f_code
                if caller is not call_code and caller is not stepped_code and caller is not watch_code:
                    if culprit(innermost_only=False):
                        what = f"raised the harness's audit event {event}"
                elif event == enter_event:
                    deep = depth.get(thread, 0)
                    if not deep:
                        before[thread] = take()
                    depth[thread] = deep + 1
                elif depth.get(thread, 0) > 1:
                    depth[thread] -= 1
                else:  # back in the tests: what the call changed of what they rely on
                    depth.pop(thread, None)
                    found = changed_since(before.pop(thread, ()))
                    if found:
                        what = f"changed {', '.join(found[:3])}"
            elif event in (caught_event, asking_event):  # our watched comparisons' (``_watching``)
                if getframe(1).f_code is not watch_code:
                    if culprit(innermost_only=False):
                        what = f"raised the harness's audit event {event}"
                elif event == caught_event and f"{always} {args[0]}" not in reported:
                    reported.add(f"{always} {args[0]}")
                    send({"t": "tamper", "what": [f"{always} {args[0]}"]})
                elif args[0] and asking[0]:
                    raise refused  # one is asking: this is one of its questions
                else:
                    asking[0] = bool_(args[0])
            elif event == guarded_event:  # a guard's call (``_guarded``)
                if getframe(1).f_code is not guard_code:
                    if culprit(innermost_only=False):
                        what = f"raised the harness's audit event {event}"
                else:
                    what = guarded(*args)
            elif event == class_made:  # a class statement (``shape.Shape._wrap_build_class``)
                if getframe(1).f_code is build_class_code:
                    made_by_statement(*args)
                    watch_new(args[0])
                elif culprit(innermost_only=False):
                    what = f"raised the harness's audit event {event}"
            elif event in ("open", "os.listdir", "os.scandir") and type_(args[0]) in paths:
                path = realpath(fsdecode(args[0]))  # (no code of the candidate's runs here)
                secret = path.startswith("/proc/") and any_(
                    part in proc_secrets for part in path.split("/")[3:5]
                )
                if (path in tests or path.startswith(grader) or secret) and culprit(innermost_only=False):
                    what = f"opened {relpath(path, root) if path in tests else path}"
                elif sourceless(path) and origin() != trusted:  # its code can name any file
                    what = f"loaded compiled code without its source ({path})"
            elif event == "open" and not isinstance_(args[0], int_) and culprit(innermost_only=False):
                what = f"opened a file through a {type_(args[0]).__name__} of its own"
            elif event.startswith("object.__") and (len_(args) < 2 or type_(args[1]) is not str_):
                pass  # a name that is not a str (the candidate's subclass): nothing a check here asks about
            elif (event == "object.__getattr__" and args[1] in frame_attrs) or event == "sys._getframe":
                if culprit(innermost_only=False, kept=True):
                    what = f"reached a frame ({args[1] if event == 'object.__getattr__' else event})"
            elif event == "compile" and culprit(innermost_only=True):
                what = "compiled code itself"
            elif event == "compile" and len_(args) == 2 and borrowed_name(args[0], args[1]):
                what = f"compiled code under the name of {args[1]}"
            elif event in made_code and culprit(innermost_only=False, imports=False):
                what = f"made code ({event})"
            elif event == "object.__getattr__" and args[1] == "__code__" and not own(args[0]):
                if culprit(
                    innermost_only=False, imports=False, kept=True
                ):  # (a library reading one as it loads)
                    what = f"read {label(args[0])}.__code__"
            elif event in changed and args[1] in in_place and not own(args[0]):
                if culprit(innermost_only=False, imports=False):
                    what = f"set {label(args[0])}.{args[1]}"
            elif (event in process or event == "sys.addaudithook") and culprit(innermost_only=False):
                what = event
            elif event in ("sys.settrace", "sys.setprofile") and traced_by_candidate():
                what = f"{event} (through threading)"
            if failed and not what:
                what = f"made the audit hook fail on {failed[0]}"
                failed.clear()
            if what and what not in reported and len_(reported) < 5 and getpid() == pid:  # (not a fork's)
                reported.add(what)
                send({"t": "tamper", "what": [f"{watched}: the code under test {what}"]})
        except refused:
            raise
        except exception as exc:  # a check that did not finish (a stack or memory run short on purpose)
            failed.append(f"{event} ({type_(exc).__name__})")
            raise unchecked from None  # fails closed: what it could not check does not happen
        finally:
            busy.discard(thread)

    sys.addaudithook(hook)


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


def main(argv: list[str]) -> int:
    send = _open_channel()
    mode, root, files = argv[1], argv[2], argv[3:]
    os.chdir(root)
    root = os.path.realpath(root)
    tests = frozenset(os.path.realpath(os.path.join(root, rel)) for rel in files)
    sources = {}
    for path in tests:
        with contextlib.suppress(OSError), open(path, encoding="utf-8", errors="replace") as f:
            sources[path] = f.read()
    if mode == "collect":  # the pristine tests and the reference: no candidate code runs, nothing to check
        return run_pytest(send, root, files, True, lambda: (lambda: None, {}))
    places = _shape.Places(root, tests)
    shape = _shape.Shape(places, sources)  # imports the tests' libraries
    freeze = _frozen.freezer()
    runners = _frozen.RUNNERS if mode == "direct" else _frozen.UNITTEST
    _frozen.freeze_runner(freeze, runners)
    # what the tests rely on as they run, compared around each call they make into the code under test
    relied_on = _shape.Snapshot(places, only=_shape.relied_on(shape.imported())).holders
    classes: list[tuple[str, Any]] = []  # the test classes and the classes entered: their names too
    always_equal, watch_new, entered = _comparisons(root, tests, tuple(sources.values()), shape.trusted_class)
    watch(
        send, root, tests, shape, watch_new, _shape.while_running(relied_on, classes)
    )  # candidate code runs next

    def integrity() -> tuple[Callable[[], None], dict[str, types.ModuleType]]:
        _frozen.freeze_runner(freeze, runners)  # loaded since (pytest's plugins), before any test file
        return _integrity(shape, places, always_equal, send, (relied_on, classes), entered)

    if mode == "direct":
        return run_direct(send, root, files, integrity, freeze)
    return run_pytest(send, root, files, False, integrity)


if __name__ == "__main__":
    sys.modules["_ms_harness"] = sys.modules["__main__"]
    sys.exit(main(sys.argv))
