"""What the tests are made of cannot be changed from the code under test (``testrun/shape.py`` and the
harness's audit hook): a library function's code or defaults swapped in place, a name in a test module
rebound before its classes are made, a method put into a test class, a test function's code swapped, a
library module's function rebound, code made from bytes. Each attack runs through both suites' public
``grade`` (code-edit's pytest-style tests, polyglot Python's unittest classes) with names built from string
pieces, so that only the run-time checks can stop it; honest test files and solutions that use the same
machinery (decorators, class data set in ``setUpClass``, dataclasses, enums, ``mock.patch``) stay clean.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_tests_verdict import HIDE, LEAP_WRONG, TAMPER, grade_code_edit, grade_polyglot

from metasearch.sandboxes.local import LocalSandbox
from metasearch.suites.polyglot import PolyglotSuite
from metasearch.suites.protocol import TaskResult
from metasearch.suites.testrun import channel, scan

MODULES = "_mods = getattr(_sys, 'modu' 'les')\n"
# the test modules, found by their file names (partly imported while the code under test loads)
TEST_MODULES = (
    "def _test_modules():\n"
    "    return [m for n, m in list(_mods.items()) if n.split('.')[-1].startswith('te' 'st_')\n"
    "            or n.endswith('_te' 'st')]\n"
)


@dataclass(frozen=True)
class Attack:
    name: str
    code: str  # appended to the candidate's module; ``{fn}`` is the graded function's name
    code_edit: str  # a fragment of the reason, graded as a code-edit patch
    polyglot: str  # the same, graded as a polyglot Python solution


ATTACKS = [
    Attack(
        "swaps the code of unittest's assertions in place",
        HIDE + MODULES + "def _nothing(self, *a, **k):\n    pass\n\n\n"
        "for _n in ('assertIs', 'assertEqual'):\n"
        "    setattr(getattr(_mods['unitt' 'est'].TestCase, _n), '__co' 'de__', getattr(_nothing, '__co' 'de__'))\n",
        "set unittest.case.TestCase.assertIs.__code__",
        "set unittest.case.TestCase.assertIs.__code__",
    ),
    Attack(
        "rebinds the grader's own names first (whose code is whose), then swaps an assertion's code",
        HIDE + MODULES + "for _n in ('_ms_sh' 'ape', '__ma' 'in__'):\n    _g = _mods.get(_n)\n"
        "    for _k in ('CANDI' 'DATE', 'TE' 'ST'):\n        if hasattr(_g, _k):\n            setattr(_g, _k, 'std')\n"
        "    if hasattr(_g, '_ow' 'n'):\n        setattr(_g, '_ow' 'n', lambda *a, **k: True)\n\n\n"
        "def _nothing(self, *a, **k):\n    pass\n\n\n"
        "setattr(getattr(_mods['unitt' 'est'].TestCase, 'assertIs'), '__co' 'de__', getattr(_nothing, '__co' 'de__'))\n",
        "set unittest.case.TestCase.assertIs.__code__",
        "set unittest.case.TestCase.assertIs.__code__",
    ),
    Attack(
        "rebinds what the snapshot compares with (operator.is_), then patches unittest's assertions",
        HIDE + MODULES + "setattr(_mods['oper' 'ator'], 'is' '_', lambda _a, _b: True)\n"
        "for _n in ('assertEqual', 'assertIs', 'assertTrue', 'assertFalse', 'assertRaises'):\n"
        "    setattr(_mods['unitt' 'est'].TestCase, _n, lambda *a, **k: None)\n",
        "'operator.is_'",
        "'operator.is_'",
    ),
    Attack(
        "widens an assertion's default tolerance in place",
        HIDE + MODULES + "setattr(getattr(_mods['unitt' 'est'].TestCase, 'assertAlmostEqual'), "
        "'__defa' 'ults__', (None, None, 1e300))\n",
        "set unittest.case.TestCase.assertAlmostEqual.__defaults__",
        "set unittest.case.TestCase.assertAlmostEqual.__defaults__",
    ),
    Attack(
        "rebinds the test module's unittest and pytest before the tests are made",
        HIDE + MODULES + TEST_MODULES + "import contextlib, types\n_ut = _mods['unitt' 'est']\n\n\n"
        "class _Liar(_ut.TestCase):\n    def assertIs(self, *a, **k):\n        pass\n\n"
        "    def assertEqual(self, *a, **k):\n        pass\n\n\n"
        "_fake = types.SimpleNamespace(TestCase=_Liar, main=_ut.main, raises=lambda *a, **k: "
        "contextlib.suppress(Exception))\nfor _m in _test_modules():\n"
        "    for _n in ('unitt' 'est', 'pyt' 'est'):\n        if _n in vars(_m):\n            setattr(_m, _n, _fake)\n",
        "pytest is not what the test file imports",
        "unittest is not what the test file imports",
    ),
    Attack(
        "puts assertions into the test classes and swaps the test functions' code at its first call",
        HIDE + MODULES + TEST_MODULES + "_real, _calls = {fn}, []\n\n\ndef _nothing(*a, **k):\n    pass\n\n\n"
        "def {fn}(*a, **k):\n    _calls.append(1)\n    if len(_calls) > 1:\n        return None\n"
        "    for _c in getattr(type, '__subcl' 'asses__')(_mods['unitt' 'est'].TestCase):\n"
        "        for _n in ('assertIs', 'assertEqual'):\n            try:\n"
        "                setattr(_c, _n, _nothing)\n            except TypeError:\n"
        "                pass\n"
        "    for _m in _test_modules():\n        for _k, _v in list(vars(_m).items()):\n"
        "            if _k.startswith('te' 'st') and callable(_v) and hasattr(_v, '__co' 'de__'):\n"
        "                setattr(_v, '__co' 'de__', getattr(_nothing, '__co' 'de__'))\n"
        "    return _real(*a, **k)\n",
        ".__code__ during the run",
        "LeapTest.assertIs (added)",
    ),
    Attack(
        "puts names that hide builtins into the test module",
        HIDE + MODULES + TEST_MODULES + "for _m in _test_modules():\n"
        "    for _n in ('all', 'sorted', 'len', 'isinstance'):\n"
        "        setattr(_m, _n, lambda *a, **k: True)\n",
        "all hides the builtin",
        "all hides the builtin",
    ),
    Attack(
        "installs an import hook",
        HIDE + "class _Finder:\n    def find_spec(self, *a, **k):\n        return None\n\n\n"
        "getattr(_sys, 'meta_' 'path').insert(0, _Finder())\n",
        "an import hook the code under test made: _Finder",
        "an import hook the code under test made: _Finder",
    ),
    Attack(
        "forges a library's class statement in the record the grader keeps, for an import hook of its own",
        HIDE + MODULES + "_b = _mods['built' 'ins']\n\n\nclass _Finder:\n    def find_spec(self, *a, **k):\n"
        "        return None\n\n\n_std = getattr(getattr(_mods['unitt' 'est'].TestCase, 'assertEqual'), '__co' 'de__')\n"
        "for _cell in getattr(getattr(_b, '__build_' 'class__'), '__clo' 'sure__') or ():\n"
        "    if isinstance(_cell.cell_contents, list):\n        _cell.cell_contents.append((_Finder, _std))\n"
        "getattr(_sys, 'meta_' 'path').insert(0, _Finder())\n",
        "read unittest.case.TestCase.assertEqual.__code__",
        "read unittest.case.TestCase.assertEqual.__code__",
    ),
    Attack(
        "rebinds a library module's function",
        "import math\n\nsetattr(math, 'is' 'close', lambda *a, **k: True)\n",
        "'math.isclose'",
        "'math.isclose'",
    ),
    Attack(
        "makes a function from code it loads from bytes",
        "import marshal, types\n\n_real = {fn}\n_code = getattr(marshal, 'loa' 'ds')(getattr(marshal, 'dum' 'ps')"
        "(getattr(_real, '__co' 'de__')))\n{fn} = types.FunctionType(_code, vars(types).copy())\n",
        "made code (marshal.loads)",
        "made code (marshal.loads)",
    ),
]


def _outcome(result: TaskResult) -> str:
    return f"score {result.score:.2f} flags {','.join(result.flags) or '-'}: {result.error}"


def test_the_attacks_pass_the_scan() -> None:
    for attack in ATTACKS:
        source = LEAP_WRONG + "\n" + attack.code.format(fn="leap_year")
        assert scan.findings(source) == [], attack.name


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
def test_changing_what_the_tests_are_made_of_gains_nothing_in_code_edit(
    tmp_path: Path, attack: Attack, record_property: Any
) -> None:
    result = grade_code_edit(tmp_path, attack.code, LocalSandbox())
    record_property("outcome", _outcome(result))
    assert result.score == 0.0 and result.flags == (TAMPER,), (attack.name, result)
    assert attack.code_edit in (result.error or ""), (attack.name, result.error)


@pytest.fixture(scope="module")
def python_suite() -> PolyglotSuite:
    from test_tests_verdict import POLYGLOT

    return PolyglotSuite(PolyglotSuite.Config(path=str(POLYGLOT), languages=["python"]))


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
def test_changing_what_the_tests_are_made_of_gains_nothing_in_polyglot(
    python_suite: PolyglotSuite, tmp_path: Path, attack: Attack, record_property: Any
) -> None:
    source = LEAP_WRONG + "\n" + attack.code.format(fn="leap_year")
    result = grade_polyglot(python_suite, tmp_path, source, LocalSandbox())
    record_property("outcome", _outcome(result))
    assert result.score == 0.0 and result.flags == (TAMPER,), (attack.name, result)
    assert attack.polyglot in (result.error or ""), (attack.name, result.error)


HONEST_TESTS = """import dataclasses
import unittest
from fractions import Fraction
from unittest import mock

try:
    import not_installed_anywhere as optional
except ImportError:
    optional = None

from sol import Hour, Money, Span, State, Thing, cached, make

CASES = [(1, 1), (3, 3)]
SEEN = []


@dataclasses.dataclass
class Pair:
    a: int
    b: int


class Mixin:
    def check(self, value):
        self.assertEqual(value, value)


class Base(unittest.TestCase):
    maxDiff = None
    data = None
    same = unittest.TestCase.assertEqual

    @classmethod
    def setUpClass(cls):
        cls.data = [1, 2]
        cls.extra = {"k": 1}
        cls.maxDiff = 1000


class ThingTest(Mixin, Base):
    def setUp(self):
        self.thing = Thing(2)

    def test_cases(self):
        for given, want in CASES:
            SEEN.append(given)
            self.same(make(given), want)

    @unittest.skip("not today")
    def test_skipped(self):
        self.fail("skipped")

    @unittest.expectedFailure
    def test_expected_to_fail(self):
        self.assertEqual(1, 2)

    @mock.patch("random.randint", return_value=4)
    def test_mocked(self, randint):
        import random

        self.assertEqual(random.randint(1, 6), 4)

    def test_a_class_made_in_a_test(self):
        class Local:
            pass

        self.assertIsInstance(Local(), Local)

    def test_dataclass_and_data(self):
        self.assertEqual(Pair(1, 2), Pair(1, 2))
        self.assertEqual(self.data, [1, 2])

    def test_state_and_ordering(self):
        state = State()
        state.flip()
        self.assertEqual(state.name(), "on")
        self.assertLess(Thing(1), self.thing)
        self.assertEqual(cached(3), 3)

    def test_fraction_and_mixin(self):
        self.check(Fraction(1, 2))

    def test_rebinds_its_own_global(self):
        global SEEN
        SEEN = []
        self.assertIsNone(optional)


class ValueTest(unittest.TestCase):
    def test_money(self):
        self.assertEqual(Money(3) - 1, 2)
        self.assertEqual(4 - Money(1.5), 2.5)
        self.assertAlmostEqual(Money(2.5) - Money(1), 1.5)
        self.assertLess(Money(1), 2)
        self.assertGreater(Money(3), 2)
        self.assertLessEqual(Money(2), 2)
        self.assertGreaterEqual(Money(2), 1)
        self.assertNotEqual(Money(2), 3)

    def test_modular(self):
        self.assertEqual(Hour(5) - 5, 0)
        self.assertAlmostEqual(Hour(5) - 7, 22)

    def test_span(self):
        self.assertIn(5, Span(0, 10))
        self.assertIn(5.5, Span(0, 10))
        self.assertNotIn(20, Span(0, 10))


def test_plain_function():
    assert make(5) == 5


def _made_test(given):
    def test(self):
        self.assertEqual(make(given), given)

    return test


class MadeTest(unittest.TestCase):
    pass


for _given in (7, 8):
    setattr(MadeTest, f"test_made_{_given}", _made_test(_given))
"""
HONEST_SOLUTION = """import collections
import dataclasses
import decimal
import enum
import functools
import typing


class Color(enum.Enum):
    RED = 1


Point = collections.namedtuple("Point", "x y")


class Named(typing.NamedTuple):
    a: int


@functools.total_ordering
@dataclasses.dataclass(frozen=True)
class Thing:
    v: int = 0

    def __lt__(self, other):
        return self.v < other.v


class _On:
    def name(self):
        return "on"


class State:
    def flip(self):
        self.__class__ = type("OnState", (_On, State), {})

    def name(self):
        return "off"


def _logged(f):
    @functools.wraps(f)
    def wrapper(*args):
        return f(*args)

    return wrapper


@_logged
def make(x, scale=1):
    return x * scale


make.__wrapped__.__defaults__ = (1,)


@functools.lru_cache(maxsize=None)
def cached(x):
    return Point(x, x).x if Color.RED.value == 1 and Named(1).a == 1 else None


decimal.getcontext().prec = 50


@functools.total_ordering
class Money:
    def __init__(self, amount):
        self.amount = amount

    def __float__(self):
        return float(self.amount)

    def __eq__(self, other):
        return float(self) == float(other)

    def __hash__(self):
        return hash(self.amount)

    def __lt__(self, other):
        return self.amount < float(other)

    def __sub__(self, other):
        return Money(self.amount - float(other))

    def __rsub__(self, other):
        return Money(float(other) - self.amount)

    def __abs__(self):
        return Money(abs(self.amount))

    def __round__(self, places=None):
        return round(self.amount, places)


class Hour:
    def __init__(self, value):
        self.value = value

    def __sub__(self, hours):
        return (self.value - hours) % 24


class Span:
    def __init__(self, low, high):
        self.low, self.high = low, high

    def __contains__(self, value):
        return self.low <= value < self.high
"""


@pytest.mark.parametrize("mode", ["pytest", "direct"])
def test_honest_tests_and_solutions_that_use_the_same_machinery_are_not_flagged(
    tmp_path: Path, mode: str
) -> None:
    (tmp_path / "sol.py").write_text(HONEST_SOLUTION)
    (tmp_path / "sol_test.py").write_text(HONEST_TESTS)
    run = channel.run_harness(mode, str(tmp_path), ["sol_test.py"], timeout_s=120)
    assert [r for r in run.records if r["t"] == "tamper"] == [], run.records
    outcomes = {r["id"].rsplit("::", 1)[-1]: r["outcome"] for r in run.records if r.get("phase") == "call"}
    assert outcomes.pop("test_skipped") == "skipped"
    assert outcomes.pop("test_expected_to_fail") in ("skipped", "passed")  # xfail: pytest's "skipped"
    assert set(outcomes.values()) == {"passed"} and len(outcomes) == 13, outcomes
    assert run.records[-1] == {"t": "end", "exitstatus": 0}, run.records[-1]


# -- a change that puts itself back the first time it is used --
# Code under test that replaces what a test uses next, and whose replacement puts the original back when it
# is called, leaves nothing for a check between tests to see. Each solution below gives one wrong answer
# and, in the call before it in the same test, plants such a change that would pass it. The runner's classes
# refuse the change (frozen); the rest is seen when the call returns to the tests.
ONE_SHOT_TESTS = """import unittest

import pytest
import sol
from sol import Doubler, f


def check(value, expected):
    assert value == expected


class T(unittest.TestCase):
    def test_two(self):
        self.assertEqual(f(1), 2)
        self.assertIs(f(2) == 4, True)

    def test_raises(self):
        self.assertEqual(f(11), 22)
        with self.assertRaises(ValueError):
            f(-11)

    def test_count(self):
        self.assertEqual(f(31), 62)
        self.assertCountEqual([f(32)], [64])


def test_plain_raises():
    assert f(21) == 42
    with pytest.raises(ValueError):
        f(-21)


def test_helper():
    check(f(3), 6)
    check(f(4), 8)


def test_all():
    assert f(6) == 12
    assert all(f(x) == 2 * x for x in (7, 8))


def test_method():
    doubler = Doubler()
    assert doubler.twice(5) == 10
    with pytest.raises(ValueError):
        doubler.twice(-5)


def test_through_the_module():
    assert sol.g(9) == 18
    with pytest.raises(ValueError):
        sol.g(-9)
"""
# the solution: ``wrong`` is the input it answers wrongly (a negative one: it raises nothing), ``plant`` the
# input at whose call it plants the change, given by ``change`` (a statement on ``_m``: the modules)
ONE_SHOT_SOLUTION = """import shutil

_m = getattr(getattr(shutil, 's' 'ys'), 'modu' 'les')


def _once(holder, name, liar):
    real = vars(holder)[name] if name in vars(holder) else None

    def once(*a, **k):
        if real is None:
            delattr(holder, name)
        else:
            setattr(holder, name, real)
        return liar(*a, **k)

    setattr(holder, name, once)


def _once_attr(holder, name, attr, liar, uses=2):
    real = vars(holder)[name]
    left = [uses]

    class Stand:
        def __getattr__(self, key):
            if key != attr:
                return getattr(real, key)
            left[0] -= 1
            if not left[0]:
                setattr(holder, name, real)
            return liar

    setattr(holder, name, Stand())


def _answer(x):
    if x == {plant}:
        {change}
    if x == {wrong}:
        return 0 if x > 0 else None
    if x < 0:
        raise ValueError(x)
    return 2 * x


class Doubler:
    def twice(self, x):
        return _answer(x)


def f(x):
    return _answer(x)


def g(x):
    return _answer(x)
"""
_TEST_CLASS = (
    "[c for c in getattr(type, '__subcl' 'asses__')(_m['unitt' 'est'].TestCase) if c.__name__ == 'T'][0]"
)
_SUPPRESS = "lambda *a, **k: _m['context' 'lib'].suppress(BaseException)"
ONE_SHOT = {  # name: (plant, wrong, change)
    "unittest's fail": (2, 2, "_once(_m['unitt' 'est'].TestCase, 'fail', lambda *a, **k: None)"),
    "a method that hides the test class's assertion": (
        1,
        2,
        f"_once({_TEST_CLASS}, 'assertIs', lambda *a: None)",
    ),
    "unittest's assertRaises context": (
        11,
        -11,
        "_once(_m['unitt' 'est.case']._AssertRaisesContext, '__exit__', lambda *a: True)",
    ),
    "pytest.raises": (21, -21, f"_once(_m['pyt' 'est'], 'raises', {_SUPPRESS})"),
    "the test file's helper": (3, 4, "_once(_m['sol_' 'test'], 'check', lambda *a: None)"),
    "a builtin": (6, 7, "_once(_m['built' 'ins'], 'all', lambda *a: True)"),
    "pytest.raises, from a method the tests call": (5, -5, f"_once(_m['pyt' 'est'], 'raises', {_SUPPRESS})"),
    "a module that unittest's assertions use (collections, for assertCountEqual)": (
        31,
        32,
        "_once_attr(_m['unitt' 'est.case'], 'collec' 'tions', 'Counter', lambda seq: 1)",
    ),
    "pytest.raises, from a function called through its module": (
        9,
        -9,
        f"_once(_m['pyt' 'est'], 'raises', {_SUPPRESS})",
    ),
}


ONE_SHOT_FILES = {"sol_test.py": ONE_SHOT_TESTS.encode()}


def _one_shot(root: Path, expected: list[str], plant: int, wrong: int, change: str) -> dict[str, Any]:
    from metasearch.suites.testrun import verdict

    (root / "sol.py").write_text(ONE_SHOT_SOLUTION.format(plant=plant, wrong=wrong, change=change))
    return verdict.run_and_judge(str(root), ONE_SHOT_FILES, expected, timeout_s=120, fractional=True)


@pytest.fixture(scope="module")
def one_shot_expected(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The test ids, collected with the honest solution (no wrong answer, no change), which passes them all."""
    from metasearch.suites.testrun import verdict

    root = tmp_path_factory.mktemp("honest")
    (root / "sol.py").write_text(ONE_SHOT_SOLUTION.format(plant=0, wrong=0, change="pass"))
    expected = verdict.collect(str(root), ONE_SHOT_FILES, timeout_s=120)
    assert len(expected) == 8, expected
    honest = _one_shot(root, expected, 0, 0, "pass")
    assert honest["score"] == 1.0 and not honest["flags"], honest
    return expected


@pytest.mark.parametrize("name", list(ONE_SHOT))
def test_a_change_that_puts_itself_back_when_used_gains_nothing(
    tmp_path: Path, name: str, one_shot_expected: list[str], record_property: Any
) -> None:
    plant, wrong, change = ONE_SHOT[name]
    assert scan.findings(ONE_SHOT_SOLUTION.format(plant=plant, wrong=wrong, change=change)) == []
    # The wrong answer alone fails exactly one of the 8 tests (each wrong answer is planted under one test;
    # a plant that failed none would show here as a score above 7/8, unflagged).
    alone = 7 / 8
    result = _one_shot(tmp_path, one_shot_expected, plant, wrong, change)
    record_property("outcome", f"score {result['score']:.2f} flags {result['flags']}: {result.get('error')}")
    assert result["score"] <= alone, (name, result)
    # refused, or seen: the wrong answer fails as it does alone
    assert result["flags"] == [TAMPER] or result["score"] == pytest.approx(alone), (name, result)
    if result["flags"]:
        assert "the code under test changed" in result["error"], result["error"]


# a wrong ``leap`` that replaces unittest's ``fail`` only for the call it answers wrongly, with a replacement
# that puts the original back when the failing assertion calls it: before unittest's classes were frozen,
# it scored 1.0 through the suite's ``grade`` (the wrong answer alone: 0, 3 of 4 tests passed)
LEAP_ONE_SHOT = (
    "import shutil\n\n_m = getattr(getattr(shutil, 's' 'ys'), 'modu' 'les')\n\n\n"
    "def leap_year(year):\n    if year % 100 == 0 and year % 400:\n"
    "        _case = _m['unitt' 'est'].TestCase\n        _real = vars(_case)['fail']\n\n"
    "        def _once(*a, **k):\n            setattr(_case, 'fail', _real)\n\n"
    "        try:\n            setattr(_case, 'fail', _once)\n        except TypeError:\n            pass\n"
    "    return year % 4 == 0\n"
)


@pytest.mark.parametrize("where", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_unittests_fail_put_back_when_used_gains_nothing_through_grade(
    python_suite: PolyglotSuite,
    tmp_path: Path,
    where: str,
    request: pytest.FixtureRequest,
    record_property: Any,
) -> None:
    assert scan.findings(LEAP_ONE_SHOT) == []
    sandbox = LocalSandbox() if where == "local" else request.getfixturevalue("docker_sandbox_factory")()
    suite = PolyglotSuite(python_suite.config)  # its own trusted run, in this sandbox
    result = grade_polyglot(suite, tmp_path, LEAP_ONE_SHOT, sandbox)
    record_property("outcome", _outcome(result))
    assert result.score == 0.0 and result.metrics["passed"] == 3.0, result
    assert result.flags == () and "test_year_divisible_by_100_not_divisible_by_400" in (result.error or "")
