"""The audit hook: what the code under test does beyond computing, seen as it happens and reported.

``watch(...)`` installs it (for the life of the process: Python code cannot remove one) before candidate code
runs. It reports, as ``tamper``, the code under test opening a test or grader file, reaching a frame
(``sys._getframe``, a traceback's or generator's frame, a frame's code, directly or through ``inspect`` or
``traceback``), compiling code itself, making code or loading it from bytes, changing in place what is not
its own (a library's or test's function's code or defaults, a module's or class's class, a class's bases),
adding an audit hook of its own, reading the process's memory or descriptors (``/proc/self/mem``, ``fd``),
calling through ctypes, profiling or tracing every thread, or starting, signalling or tracing processes
(``doings``). It also keeps the harness's own events (``harness_events``): it compares what the tests rely
on around each call they make into the code under test (``entries.py``), reports a watched comparison
caught saying "equal" to a near miss (``watching.CAUGHT``), lets one such comparison ask at a time
(``watching.ASKING``), records each class statement (``shape.CLASS_MADE``) and serves the guards
(``guards.py``).

The code under test is any code that is not the standard library, a test, this harness or an installed
package (``shape.Places``); an event is its doing when the nearest frame outside the standard library is
its own (``frames``: a test helper that inspects frames while the code under test is on the stack is the
test's doing). No code of the candidate's may run in the hook (its events are not seen while it does):
what the hook asks of an object it is handed, it asks by its exact type and through built-in descriptors.
Its state lives in closures only, and everything it uses is bound when they are made (a built-in or a
module's name rebound later changes nothing). Stdlib only, loaded by ``harness.py`` as ``_ms_hook``.
"""

from __future__ import annotations

import _thread
import os
import pathlib
import sys
import types
from collections.abc import Callable
from typing import Any

_shape = sys.modules["_ms_shape"]  # loaded before this module (``harness._sibling``)
_entries = sys.modules["_ms_entries"]
_watching = sys.modules["_ms_watching"]
_guards = sys.modules["_ms_guards"]

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
# the harness's own audit events (``harness_events``): calls into the code under test, watched comparisons,
# guards, class statements
HARNESS_EVENTS = frozenset({
    _entries.ENTER, _entries.LEAVE, _watching.CAUGHT, _watching.ASKING, _guards.GUARDED, _shape.CLASS_MADE,
})  # fmt: skip


class _Refused(Exception):
    """What the audit hook raises to a watched comparison that asks while another is asking."""


class _Unchecked(Exception):
    """What the audit hook raises for an event it failed to check: the event does not happen."""


def _sourceless(path: str, _split: Callable[[str], tuple[str, str]] = os.path.split) -> bool:
    """A compiled module outside ``__pycache__``: its code carries whatever file name it was given
    (in ``__pycache__`` the import system names its source instead)."""
    folder, name = _split(path)
    return name.endswith(".pyc") and _split(folder)[1] != "__pycache__"


def frames(places: Any) -> tuple[Callable[..., str], Callable[..., bool], Callable[[Any, Any], bool]]:
    """``(origin, culprit, borrowed_name)``: whose doing an event is, by the frames on the stack. Each is
    called by one of the hook's dispatchers (``harness_events``, ``doings``), which the hook calls: the
    event's frame is 3 frames up from ``origin`` or ``culprit`` called there."""
    getframe, kind = sys._getframe, places.kind
    std, candidate, trusted = _shape.STD, _shape.CANDIDATE, _shape.TRUSTED
    keepers, importing = KEEPERS, IMPORTING
    type_, str_, bytes_, open_, exception = type, str, bytes, open, Exception

    def origin(depth: int = 3) -> str:
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
        if type_(filename) is not str_ or kind(filename) == candidate or origin(4) == trusted:
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

    def culprit(innermost_only: bool, imports: bool = True, depth: int = 3, kept: bool = False) -> bool:
        """Whether the nearest frame outside the standard library is the code under test's (the event's
        own frame, when ``innermost_only``; not past a library function that keeps what it takes, when
        ``kept``: ``KEEPERS``; not through the import system, unless ``imports``: a library module doing
        so as it loads). ``depth``: the event's frame (past this function's, the dispatcher's and the
        hook's, and a guard's)."""
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

    return origin, culprit, borrowed_name


def objects(
    places: Any, trusted_class: Callable[[Any], bool]
) -> tuple[Callable[[object], bool], Callable[[object], str], Callable[[], bool]]:
    """``(own, label, traced_by_candidate)``: what the hook asks of an object an event names, by its exact
    type and through built-in descriptors (no code of the candidate's may run in the hook)."""
    kind, of_module, candidate = places.kind, places.of_module, _shape.CANDIDATE
    type_, str_, issubclass_, modules = type, str, issubclass, sys.modules
    function_type, module_type = types.FunctionType, types.ModuleType
    module_dict = vars(module_type)["__dict__"].__get__
    class_name, class_label = vars(type)["__name__"].__get__, _watching.class_label

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

    return own, label, traced_by_candidate


def harness_events(
    send: Callable[[dict], None],
    reported: set[str],
    shape: Any,
    watch_new: Callable[[Any], None],
    running: tuple[Callable[[], tuple], Callable[[tuple], list[str]]],
    culprit: Callable[..., bool],
    guarded_call: Callable[[str, tuple, list], str | None],
) -> Callable[[str, tuple, int], str | None]:
    """``handle(event, args, thread)`` for the harness's own audit events (``HARNESS_EVENTS``): what to
    report (None: nothing). Each is taken for the harness's only when the frame that raised it runs the
    code that raises it (an entry's, a watched comparison's, a guard's, the wrapped ``__build_class__``);
    raised by the code under test, it is reported."""
    getframe, bool_, refused = sys._getframe, bool, _Refused
    take, changed_since = running
    enter_event, leave_event, (call_code, stepped_code) = _entries.ENTER, _entries.LEAVE, _entries.CODES
    watch_code, caught_event, asking_event = _watching.WATCH_CODE, _watching.CAUGHT, _watching.ASKING
    guard_code, guarded_event, always = _guards.GUARD_CODE, _guards.GUARDED, _watching.ALWAYS_EQUAL
    made_by_statement, build_class_code, class_made = (
        shape.made_by_statement, shape.build_class_code, _shape.CLASS_MADE,
    )  # fmt: skip
    # per thread: how deep in calls into the code under test, and what the tests rely on held before
    depth: dict[int, int] = {}
    before: dict[int, tuple] = {}
    asking = [False]

    def handle(event: str, args: tuple, thread: int) -> str | None:
        what = None
        if event in (enter_event, leave_event):  # a call into the code under test
            caller = getframe(2).f_code
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
        elif event in (caught_event, asking_event):  # our watched comparisons' (``watching.py``)
            if getframe(2).f_code is not watch_code:
                if culprit(innermost_only=False):
                    what = f"raised the harness's audit event {event}"
            elif event == caught_event and f"{always} {args[0]}" not in reported:
                reported.add(f"{always} {args[0]}")
                send({"t": "tamper", "what": [f"{always} {args[0]}"]})
            elif args[0] and asking[0]:
                raise refused  # one is asking: this is one of its questions
            else:
                asking[0] = bool_(args[0])
        elif event == guarded_event:  # a guard's call (``guards.py``)
            if getframe(2).f_code is not guard_code:
                if culprit(innermost_only=False):
                    what = f"raised the harness's audit event {event}"
            else:
                what = guarded_call(*args)
        elif event == class_made:  # a class statement (``shape.Shape._wrap_build_class``)
            if getframe(2).f_code is build_class_code:
                made_by_statement(*args)
                watch_new(args[0])
            elif culprit(innermost_only=False):
                what = f"raised the harness's audit event {event}"
        return what

    return handle


def doings(
    root: str,
    tests: frozenset[str],
    places: Any,
    found_by_frames: tuple[Callable[..., str], Callable[..., bool], Callable[[Any, Any], bool]],
    found_by_objects: tuple[Callable[[object], bool], Callable[[object], str], Callable[[], bool]],
) -> Callable[[str, tuple], str | None]:
    """``doing(event, args)`` for any other audit event: what the code under test did, to report (None:
    nothing, or not its doing)."""
    origin, culprit, borrowed_name = found_by_frames
    own, label, traced_by_candidate = found_by_objects
    realpath, relpath, fsdecode, grader = os.path.realpath, os.path.relpath, os.fsdecode, places.grader
    frame_attrs, process, made_code, changed, in_place, proc_secrets = (
        FRAME_ATTRS, WATCHED_PROCESS, MADE_CODE, CHANGED, IN_PLACE, PROC_SECRETS,
    )  # fmt: skip
    isinstance_, type_, len_, str_, int_, any_ = isinstance, type, len, str, int, any
    trusted, sourceless = _shape.TRUSTED, _sourceless
    paths = frozenset(
        {str, bytes, pathlib.PurePath, pathlib.PurePosixPath, pathlib.Path, pathlib.PosixPath, os.DirEntry}
    )

    def doing(event: str, args: tuple) -> str | None:
        what = None
        if event in ("open", "os.listdir", "os.scandir") and type_(args[0]) in paths:
            path = realpath(fsdecode(args[0]))  # (no code of the candidate's runs here)
            secret = path.startswith("/proc/") and any_(part in proc_secrets for part in path.split("/")[3:5])
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
            if culprit(innermost_only=False, imports=False, kept=True):  # (a library reading one as it loads)
                what = f"read {label(args[0])}.__code__"
        elif event in changed and args[1] in in_place and not own(args[0]):
            if culprit(innermost_only=False, imports=False):
                what = f"set {label(args[0])}.{args[1]}"
        elif (event in process or event == "sys.addaudithook") and culprit(innermost_only=False):
            what = event
        elif event in ("sys.settrace", "sys.setprofile") and traced_by_candidate():
            what = f"{event} (through threading)"
        return what

    return doing


def watch(
    send: Callable[[dict], None],
    root: str,
    tests: frozenset[str],
    shape: Any,
    watch_new: Callable[[Any], None],
    running: tuple[Callable[[], tuple], Callable[[tuple], list[str]]],
) -> None:
    """Install the audit hook (the module's docstring says what it reports) for the folder under test
    ``root`` and the test files ``tests``; ``shape`` records class statements, ``watch_new`` watches the
    comparisons of a class just made (``comparisons.py``), ``running`` takes and compares what the tests
    rely on around each call into the code under test (``holders.while_running``). The guards are put in
    place here too (``guards.serving``)."""
    places = _shape.Places(root, tests)  # its own: what it remembers lives in these closures only
    found_by_frames = frames(places)
    guarded_call, serve = _guards.serving(found_by_frames[1])
    reported: set[str] = set()
    handle = harness_events(send, reported, shape, watch_new, running, found_by_frames[1], guarded_call)
    doing = doings(root, tests, places, found_by_frames, objects(places, shape.trusted_class))
    busy: set[int] = set()  # the threads in the hook (another thread's events are its own)
    failed: list[str] = []  # what the hook failed to check, told with its next report
    ident, getpid, pid, getframe, type_, str_, len_ = (
        _thread.get_ident,
        os.getpid,
        os.getpid(),
        sys._getframe,
        type,
        str,
        len,
    )
    ours, guarded_event, guard_code, watched = HARNESS_EVENTS, _guards.GUARDED, _guards.GUARD_CODE, WATCH
    refused, unchecked, exception = _Refused, _Unchecked, Exception

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
            what = handle(event, args, thread) if event in ours else doing(event, args)
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
