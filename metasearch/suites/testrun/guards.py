"""Built-in functions whose originals only the audit hook holds (``_signal.signal``, ``_imp.create_builtin``,
``_imp.exec_builtin``).

A signal handler is called with the interrupted frame, and a frame leads to every caller's locals (the
channel, the check), which a handler could read and, from Python 3.13, write. Making ``_signal`` or ``_imp``
again would give the originals back. So before candidate code runs, each of these functions is replaced in
its module by a guard (``guarded``) that raises the audit event ``GUARDED``; the hook (``hook.py``) calls the
original for it (``serving``), giving a handler of the code under test's no frame and refusing to make those
modules again. Nothing reachable holds an original, so code cannot call one past the hook. Stdlib only,
loaded by ``harness.py`` as ``_ms_guards``.
"""

from __future__ import annotations

import _imp
import _signal
import importlib.machinery
import signal
import sys
import types
from collections.abc import Callable
from typing import Any

GUARDED = "metasearch.harness.guarded"  # the audit event a guard (``guarded``) raises for each call


def guarded(name: str) -> Callable[..., Any]:
    """A stand-in for a built-in function whose original only the audit hook holds: it raises ``GUARDED``
    with its arguments and a box, and the hook calls the original, or refuses, and puts the outcome in the
    box."""

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


GUARD_CODE = guarded("").__code__  # every guard runs this code


def serving(
    culprit: Callable[..., bool],
) -> tuple[Callable[[str, tuple, list], str | None], Callable[[str, tuple, list], None]]:
    """Put the guards in place and return ``(guarded_call, serve)`` for the hook, which alone holds the
    originals from here on (in these closures): ``guarded_call(name, call, box)`` checks and serves a
    guard's call and returns what to report (None: nothing); ``serve`` calls the original as it is asked.
    ``culprit`` is the hook's (``hook.frames``)."""
    type_, str_, tuple_, list_, len_, getattr_, callable_, exception = (
        type, str, tuple, list, len, getattr, callable, Exception,
    )  # fmt: skip
    module_spec, module_type = importlib.machinery.ModuleSpec, types.ModuleType
    # the originals live here only; their modules hold guards (taken before the snapshot, which holds them)
    originals = {
        "signal": _signal.signal,
        "create_builtin": _imp.create_builtin,
        "exec_builtin": _imp.exec_builtin,
    }
    allowed_builtin = frozenset(sys.builtin_module_names) - {"_signal", "_imp"}
    _signal.signal = guarded("signal")
    signal.signal.__wrapped__ = _signal.signal  # type: ignore[attr-defined]
    _imp.create_builtin, _imp.exec_builtin = guarded("create_builtin"), guarded("exec_builtin")

    def guarded_call(name: str, call: tuple, box: list) -> str | None:
        """Call a guarded original for its guard. A signal handler the code under test installs is given
        no frame; the code under test making ``_signal`` or ``_imp`` again (to get the originals back) is
        refused. The caller of the guard is 5 frames up: past this function, the hook's dispatcher
        (``hook.harness_events``), the hook and the guard."""
        if (
            type_(name) is not str_
            or name not in originals
            or type_(call) is not tuple_
            or type_(box) is not list_
        ):
            return f"called a guard with {type_(name).__name__} arguments"
        by_candidate = culprit(innermost_only=False, depth=5)
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

    return guarded_call, serve
