"""The test-process side of a graded test run: ``python -I -B harness.py MODE ROOT TEST_FILE...``.

Runs next to candidate code, so it reports facts, never a verdict (``README.md`` is the threat model).
Before anything else it reads one line from stdin, ``"<fd> <nonce>"``, and closes stdin: the result channel
is an inherited pipe whose number is drawn at random per run and named neither in argv nor in the
environment; every record it writes is ``"<nonce> <seq> <json>"``, so lines written by anyone without the
nonce, dropped or replayed lines are visible to the grader (``channel.py``), which reads the other end
outside this process. The session ends with an ``end`` record; a run without it ended early.

Modes (the grader runs ``pytest`` and ``direct`` and compares them; ``runners.py``):

- ``pytest``: pytest with our reporter as a plugin object; each report's (nodeid, phase, outcome).
- ``collect``: the same, ``--collect-only``; used on pristine code to learn the expected test ids.
- ``direct``: our own runner, no pytest machinery (plain ``test*`` functions and ``unittest`` methods).

Run with ``-I`` (no script folder on ``sys.path``), it loads each module of this folder by path as
``_ms_<name>`` (``_sibling``: a name no candidate module takes; the snapshot holds every name of such a
module, and ``frozen.py`` freezes its classes), in the order they need each other. ``main`` then builds,
before any candidate code runs and in this order: the tests' outline and the class-statement record
(``shape.Shape``), the frozen runner classes (``frozen.py``), what the tests rely on as they run
(``holders.while_running``), the comparison checks (``comparisons.py``), and the audit hook with its guards
(``hook.py``, ``guards.py``). The check (``check.py``) is made when the runner starts, after pytest's
plugins load and before any test file is imported. What decides lives in those closures and the runners'
locals, never in module names, and looks up no name when it runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import types
from collections.abc import Callable
from typing import Any


def _sibling(name: str) -> types.ModuleType:
    """A module of this grader's folder (read-only where candidate code runs), loaded by path under a
    name no candidate module takes."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_ms_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# (each module finds the ones it needs, loaded before it, in ``sys.modules``)
_outline = _sibling("outline")
_holders = _sibling("holders")
_shape = _sibling("shape")
_frozen = _sibling("frozen")
_entries = _sibling("entries")
_watching = _sibling("watching")
_authorship = _sibling("authorship")
_probes = _sibling("probes")
_comparisons = _sibling("comparisons")
_guards = _sibling("guards")
_hook = _sibling("hook")
_check = _sibling("check")
_runners = _sibling("runners")


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
        return _runners.run_pytest(send, root, files, True, lambda: (lambda: None, {}))
    places = _shape.Places(root, tests)
    shape = _shape.Shape(places, sources)  # imports the tests' libraries
    freeze = _frozen.freezer()
    runners = _frozen.RUNNERS if mode == "direct" else _frozen.UNITTEST
    _frozen.freeze_runner(freeze, runners)
    # what the tests rely on as they run, compared around each call they make into the code under test
    relied_on = _shape.Snapshot(places, only=_holders.relied_on(shape.imported())).holders
    classes: list[tuple[str, Any]] = []  # the test classes and the classes entered: their names too
    always_equal, watch_new, entered = _comparisons.comparisons(
        root, tests, tuple(sources.values()), shape.trusted_class
    )
    _hook.watch(
        send, root, tests, shape, watch_new, _holders.while_running(relied_on, classes)
    )  # candidate code runs next

    def integrity() -> tuple[Callable[[], None], dict[str, types.ModuleType]]:
        _frozen.freeze_runner(freeze, runners)  # loaded since (pytest's plugins), before any test file
        return _check.integrity(shape, places, always_equal, send, (relied_on, classes), entered)

    if mode == "direct":
        return _runners.run_direct(send, root, files, integrity, freeze)
    return _runners.run_pytest(send, root, files, False, integrity)


if __name__ == "__main__":
    sys.modules["_ms_harness"] = sys.modules["__main__"]
    sys.exit(main(sys.argv))
