"""Calls into the code under test, told to the audit hook as they begin and end.

A check between tests sees what the code under test left in place. Code under test can also replace
something the tests use next (``pytest.raises``, a builtin, a helper of the test file) during a call and
have the replacement put the original back the first time it is used: the tests take the wrong answer
and no check between tests sees anything. So what the tests call of the code under test, its module
functions and its classes' methods, is wrapped in an ``Entry``: each call raises the audit event
``ENTER`` before and ``LEAVE`` after it (and each step of a generator it returns), and the audit hook,
which alone keeps how deep each thread is, compares what the tests rely on before the outermost call
with what is there after it (``hook.harness_events``).

An ``Entry`` is a tuple (its tools and the wrapped callable: nothing in it can be changed) of a class
that is frozen (``frozen.py``), and the functions it calls look up no name. Stdlib only, loaded by
``harness.py`` as ``_ms_entries``.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Generator
from typing import Any

ENTER = "metasearch.harness.enter"  # the audit events of a call into the code under test
LEAVE = "metasearch.harness.leave"
# code flags of functions whose body runs after they return (a coroutine's, an async generator's): not
# wrapped, what runs them is the caller's event loop
LATER = 0x80 | 0x100 | 0x200  # CO_COROUTINE, CO_ITERABLE_COROUTINE, CO_ASYNC_GENERATOR


def call(entry: Any, /, *args: Any, **kwargs: Any) -> Any:
    """Call the wrapped callable between ``ENTER`` and ``LEAVE``; a generator it returns comes back
    wrapped too (its body runs at each step)."""
    tools, function = entry
    audit, generator, stepped, type_ = tools
    audit("metasearch.harness.enter")  # (literals: an entry's tools cannot name other events)
    try:
        result = function(*args, **kwargs)
    finally:
        audit("metasearch.harness.leave")
    return stepped(result, tools) if type_(result) is generator else result


def stepped(inner: Any, tools: tuple[Any, ...], /, _stop: type[StopIteration] = StopIteration) -> Generator:
    """A generator that runs each step of ``inner`` between ``ENTER`` and ``LEAVE``."""
    audit = tools[0]
    sent = None
    while True:
        audit("metasearch.harness.enter")
        try:
            item = inner.send(sent)
        except _stop as end:
            return end.value
        finally:
            audit("metasearch.harness.leave")
        sent = yield item


class Entry(tuple):
    """``(tools, callable)``: called, it calls ``callable`` through ``call``; as a class member it binds
    like a function; any other attribute is the callable's (``__name__``, ``cache_info``)."""

    __slots__ = ()
    __call__ = call

    def __get__(self, instance: Any, owner: Any = None, _bind: Callable[..., Any] = types.MethodType) -> Any:
        return self if instance is None else _bind(self, instance)

    def __getattr__(self, name: str, _get: Callable[..., Any] = getattr) -> Any:
        return _get(self[1], name)

    def __repr__(self, _repr: Callable[[Any], str] = repr) -> str:
        return _repr(self[1])


TOOLS = (sys.audit, types.GeneratorType, stepped, type)
CODES = (call.__code__, stepped.__code__)  # where the hook expects ``ENTER``/``LEAVE`` from


def wrapped(
    member: Any,
    wanted: Callable[[Any], bool],
    _entry: type = Entry,
    _tools: tuple[Any, ...] = TOOLS,
    _kinds: tuple[type, ...] = (type, types.FunctionType, staticmethod, classmethod, property),
    _later: int = LATER,
) -> Any:
    """``member`` (a plain function, a static or class method of one, a property of them) with each such
    function that ``wanted`` accepts put in an ``Entry``, or None when there is none. Only exact built-in
    types are read (their attributes are C's: no code of the candidate's runs here), and what it uses is
    bound in its defaults (the audit hook calls it)."""
    type_, function, static, class_method, prop = _kinds

    def one(inner: Any) -> Any:
        if type_(inner) is not function or inner.__code__.co_flags & _later or not wanted(inner):
            return None
        return _entry((_tools, inner))

    kind = type_(member)
    if kind is function:
        return one(member)
    if kind is static or kind is class_method:
        found = one(member.__func__)
        return None if found is None else kind(found)
    if kind is prop:
        get, set_, delete = member.fget, member.fset, member.fdel
        new_get, new_set, new_delete = one(get), one(set_), one(delete)
        if new_get is None and new_set is None and new_delete is None:
            return None
        return prop(
            get if new_get is None else new_get,
            set_ if new_set is None else new_set,
            delete if new_delete is None else new_delete,
            member.__doc__,
        )
    return None
