"""The comparisons the harness gives the candidate's classes, and the made-up values they ask.

A class of the code under test that compares by its own ``__eq__`` (or one it inherits, written in Python
outside that code) gets a watched comparison in its place (``watching``; ``comparisons.py`` decides which
class gets one). The watch asks the class's own method, with the same instance (its real state, when the
tests ask it), questions whose answers an honest one cannot give together with "yes" to the question it
was given:

- ``__eq__``/``__ne__``: the other value and near misses of it (``near_misses``), in a random order. An
  equality is transitive: one that says "equal" to the value and to a near miss ("equal" to ``5`` and to
  ``5 + 1900``; to ``[1, 2]`` and to ``[1, <a new object>]``) equals whatever it is shown, however it tells
  the harness's probes from a test's value; asking first defeats one that takes the first value it is
  shown for its own.
- ``__contains__``: values no container holds (``far_from``), and for a subclass of a built-in container,
  what its storage holds.
- an order (``__lt__``, ...): the other orders about the same value (``x < a`` with ``x >= a``, or without
  ``x <= a``).
- ``__sub__``/``__rsub__``: when the difference is nil (what a tolerance check takes at its word), the
  difference from the value moved by a random whole number, which must move by that much.

Caught, a watch raises the audit event ``CAUGHT``, which the audit hook (``hook.py``) reports. Everything
here is reachable from the candidate's classes, so each function holds nothing but its defaults (tuples:
replacing them, or its code, is what the audit hook reports) and looks up no name when it runs. Stdlib
only, loaded by ``harness.py`` as ``_ms_watching``.
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import Callable
from typing import Any

_entries = sys.modules["_ms_entries"]  # loaded before this module (``harness._sibling``)
token_hex = secrets.token_hex
_shuffle = secrets.SystemRandom().shuffle
ALWAYS_EQUAL = "always-equal class"  # the prefix of a finding about such a class (verdict.py names it so)


def class_label(
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


def near_misses(
    other: Any,
    _token_hex: Callable[[int], str] = token_hex,
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
    the audit hook reports), as it is reachable from the candidate's classes (``watching``)."""
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


def far_from(
    other: Any,
    _token_hex: Callable[[int], str] = token_hex,
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
WATCHED: dict[str, tuple[str, tuple[tuple[str, bool], ...]]] = {
    "__eq__": ("eq", ()), "__ne__": ("ne", ()), "__contains__": ("contains", ()),
    "__lt__": ("order", (("__ge__", False), ("__le__", True))),
    "__gt__": ("order", (("__le__", False), ("__ge__", True))),
    "__le__": ("order", (("__gt__", False),)), "__ge__": ("order", (("__lt__", False),)),
    "__sub__": ("sub", ()), "__rsub__": ("rsub", ()),
}  # fmt: skip


def watching(inherited: Any, name: str, label: str) -> Callable[[Any, Any], Any]:
    """A method for a class (its own, or one it inherits written in Python) that asks ``inherited`` the
    question it was given, with the same instance, after the questions the module's docstring lists for
    ``name``. Caught, it raises the audit event ``CAUGHT``, which the audit hook reports. It holds nothing
    but its defaults (a tuple: replacing them, or its code, is what the audit hook reports); it has no
    closure. While one asks, the others do not (the hook refuses ``ASKING``)."""
    kind, implied = WATCHED[name]

    def compare(
        self: Any,
        other: Any,
        _inherited: Any = inherited,
        _kind: str = kind,
        _implied: tuple[tuple[str, bool], ...] = implied,
        _label: str = label,
        _near: Callable[[Any], list[Any]] = near_misses,
        _far: Callable[[Any], list[Any]] = far_from,
        _audit: Callable[..., None] = sys.audit,
        _exception: type[BaseException] = BaseException,
        _asking: str = ASKING,
        _caught: str = CAUGHT,
        _builtins: tuple[Any, ...] = (type, getattr, float, abs, int, token_hex),
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


WATCH_CODE = watching(None, "__eq__", "").__code__  # every watched comparison runs this code
