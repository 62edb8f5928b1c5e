"""Hostile candidates against the test-based graders (code-edit, polyglot Python), through ``suite.grade``.

Each attack comes twice: written plainly, where the static scan must name it (``tamper_suspect``), and
written to slip past the scan (names built from string pieces), where the dynamic checks must stop it:
the end-of-session record, the forced-exit check, the runner-integrity check, the authenticated result
channel, the pristine-test check, the audit hook and the second harness. No attack may score above the honest baseline
(the same candidate without the attack).
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from metasearch.errors import InfrastructureError
from metasearch.sandboxes.local import LocalSandbox
from metasearch.sandboxes.protocol import Sandbox
from metasearch.suites.code_edit import REPOS_DIR, CodeEditSuite
from metasearch.suites.polyglot import PolyglotSuite, example_findings
from metasearch.suites.protocol import TaskResult
from metasearch.suites.testrun import catch2, channel, libtest, scan, verdict

FIXTURES = Path(__file__).resolve().parent
POLYGLOT = FIXTURES / "polyglot_fixture"
PRACTICE = POLYGLOT / "python" / "exercises" / "practice"
REAL = FIXTURES / "polyglot_real"
TAMPER = "tamper_suspect"
# Reaches os and sys without naming them where the scan looks: shutil imports both.
HIDE = "import shutil\n_os = getattr(shutil, 'o' 's')\n_sys = getattr(shutil, 's' 'ys')\n"
# Adds to ``_dirs`` every argument of the process's ancestors (the grader's paths, wherever the sandbox put them).
_ANCESTOR_ARGS = (
    "_pid = getattr(_os, 'getp' 'pid')()\n"
    "for _ in range(6):\n"
    "    try:\n        with open('/pr' + 'oc/%d/cmdline' % _pid, 'rb') as _f:\n"
    "            _dirs += [a.decode() for a in _f.read().split(bytes(1)) if a]\n"
    "        with open('/pr' + 'oc/%d/stat' % _pid) as _f:\n"
    "            _pid = int(_f.read().rsplit(')', 1)[1].split()[1])\n"
    "    except (OSError, ValueError):\n        break\n"
)
_MODULES = "_mods = getattr(_sys, 'modu' 'les')\n"


@dataclass(frozen=True)
class Attack:
    name: str
    code: str  # appended to the candidate's module; ``{fn}`` is the graded function's name
    flags: tuple[str, ...]  # exactly these flags
    reason: str  # a fragment of the error; "" = scores exactly the honest baseline
    zero: bool = True  # with a reason: the score is 0 (else: at most the baseline)


PLAIN = [
    Attack("os._exit(0) at import", "import os\nos._exit(0)\n", (TAMPER,), "early exit: os._exit"),
    Attack(
        "sys.exit(0) in a test-time call",
        "import sys\n_real = {fn}\n\ndef {fn}(*a):\n    sys.exit(0)\n",
        (TAMPER,),
        "early exit outside __main__: sys.exit",
    ),
    Attack(
        "forged junit report",
        "import sys\nfor _a in sys.argv:\n    if _a.startswith('--junitxml='):\n"
        "        open(_a.split('=', 1)[1], 'w').write('<testsuite tests=\"9\" failures=\"0\"/>')\n",
        (TAMPER,),
        "argv/environment inspection: argv",
    ),
    Attack("atexit forcing exit 0", "import atexit, os\natexit.register(os._exit, 0)\n", (TAMPER,), "atexit"),
    Attack(
        "pytest runner patched",
        "import _pytest.python\n_pytest.python.Function.runtest = lambda self: None\n",
        (TAMPER,),
        "runner import: import _pytest",
    ),
    Attack(
        "unittest patched",
        "import unittest\nunittest.TestCase.run = lambda self, result=None: None\n",
        (TAMPER,),
        "runner import: import unittest",
    ),
    Attack(
        "writes to every open fd",
        "import os\nfor _fd in range(3, 1024):\n    try:\n        os.write(_fd, b'x')\n"
        "    except OSError:\n        pass\n",
        (TAMPER,),
        "file descriptor games: os.write",
    ),
    Attack(
        "deletes the tests",
        "import glob, os\nfor _p in glob.glob('**/*_test.py') + glob.glob('hidden_tests/*.py'):\n"
        "    os.remove(_p)\n",
        (TAMPER,),
        "reading grader files",
    ),
    Attack(
        "reads the hidden tests",
        "_seen = open('/grader/repos/x/hidden_tests/test_x.py').read()\n",
        (TAMPER,),
        "reading grader files: /grader",
    ),
    Attack(
        "returns a value that equals anything",
        "class _Same:\n    def __eq__(self, other):\n        return True\n\n    def __ne__(self, other):\n"
        "        return False\n\n\ndef {fn}(*a, **k):\n    return _Same()\n",
        (TAMPER,),
        "always-equal comparison: __eq__",
    ),
    Attack(
        "prints fake result lines",
        "print('====== 9 passed in 0.01s ======')\nprint('{{\"score\": 1.0, \"metrics\": {{}}}}')\n",
        (),
        "",
    ),
]
# The calling test's expected value, read from its frame by a module the candidate writes outside the folder
# under test (so that the frames doing it are not in a file under test).
_ASIDE_SOURCE = (
    "import ast, linecache\n\n\ndef answer(real, a, k):\n    try:\n        raise KeyError\n"
    "    except KeyError as e:\n        at = e.__traceback__.tb_frame.f_back.f_back\n"
    "    line = linecache.getline(at.f_code.co_filename, at.f_lineno).strip()\n"
    "    for node in ast.walk(ast.parse(line.split('assert', 1)[-1].strip() or '0')):\n"
    "        if isinstance(node, ast.Call) and len(node.args) == 2 and isinstance(node.args[0], ast.Call):\n"
    "            return ast.literal_eval(node.args[1])\n"
    "        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Call):\n"
    "            return ast.literal_eval(node.comparators[0])\n"
    "    return real(*a, **k)\n"
)
ASIDE = (
    HIDE + f"_src = {_ASIDE_SOURCE!r}\n"
    "with open('/tmp/_aside_helper.py', 'w') as _f:\n    _f.write(_src)\n"
    "getattr(_sys, 'pa' 'th').insert(0, '/tmp')\nimport _aside_helper\n_real = {fn}\n\n\n"
    "def {fn}(*a, **k):\n    return _aside_helper.answer(_real, a, k)\n"
)
# The same answer, from code that carries a file name other than its own: the module runs itself again
# through ``runpy`` under a frozen module's name, the code is compiled by ``code`` under a standard-library
# file's name, or it is loaded from a compiled file (made elsewhere) whose code names one.
_FROM_THE_FRAME = (
    "    try:\n        raise KeyError\n    except KeyError as _e:\n        _at = _e.__traceback__.tb_frame.f_back\n"
    "    _line = _lc.getline(_at.f_code.co_filename, _at.f_lineno).strip()\n"
    "    for _node in _ast.walk(_ast.parse(_line.split('assert', 1)[-1].strip() or '0')):\n"
    "        if isinstance(_node, _ast.Call) and len(_node.args) == 2 and isinstance(_node.args[0], _ast.Call):\n"
    "            return _ast.literal_eval(_node.args[1])\n"
    "        if isinstance(_node, _ast.Compare) and isinstance(_node.left, _ast.Call):\n"
    "            return _ast.literal_eval(_node.comparators[0])\n"
    "    return _real(*a, **k)\n"
)
UNDER_A_FROZEN_NAME = (
    HIDE
    + _MODULES
    + "import ast as _ast, linecache as _lc\n\nif __name__ == '_help' 'er':\n    _real = {fn}\n\n    def {fn}(*a, **k):\n"
    + "\n".join("    " + line if line else line for line in _FROM_THE_FRAME.split("\n"))
    + "\nelse:\n    _real = {fn}\n    _lib = getattr(_mods['import' 'lib'], 'import_' 'module')\n"
    "    _run = getattr(_lib('run' 'py'), 'run_' 'path')\n"
    "    _me = getattr(_os.path, 'rel' 'path')(__file__)\n"
    "    {fn} = _run('<frozen>/../' + _me, run_name='_help' 'er')['{fn}']\n"
)
_FROM_THE_FRAME_SOURCE = "import ast as _ast, linecache as _lc\n\n\ndef {fn}(*a, **k):\n" + _FROM_THE_FRAME
UNDER_A_LIBRARY_NAME = (
    HIDE + _MODULES + f"_src = {_FROM_THE_FRAME_SOURCE!r}\n"
    "_lib = getattr(_mods['import' 'lib'], 'import_' 'module')\n"
    "_ns = {{'_real': {fn}}}\n_where = getattr(_lib('sysc' 'onfig'), 'get_' 'paths')()['stdlib']\n"
    "getattr(_lib('co' 'de').InteractiveInterpreter(_ns), 'runs' 'ource')(\n"
    "    _src.replace('{{fn}}', '{fn}') + '\\n', _where + '/_helper.py', 'ex' 'ec'\n)\n{fn} = _ns['{fn}']\n"
)
# a stack run nearly dry where a watched attribute is read: the audit hook's own calls fail there
BLINDED_HOOK = (
    "import sys as _s\n\n\ndef _dry(_obj, _attr):\n    def _down(_n):\n        if _n == 0:\n"
    "            try:\n                return True, getattr(_obj, _attr)\n            except RecursionError:\n"
    "                return False, None\n        return _down(_n - 1)\n\n"
    "    for _n in range(_s.getrecursionlimit(), 0, -1):\n        try:\n            _ok, _got = _down(_n)\n"
    "        except RecursionError:\n            continue\n        if _ok:\n            return _got\n\n\n"
    "_real = {fn}\n\n\ndef {fn}(*a, **k):\n    try:\n        raise KeyError\n    except KeyError as _e:\n"
    "        _f = _dry(_e.__traceback__, 'tb' '_frame')\n    _c = _f.f_back\n    while _c is not None:\n"
    "        _code = _dry(_c, 'f_' 'code')\n        if _code.co_name.startswith('test'):\n"
    "            _b = [_x for _x in _code.co_consts if _x is True or _x is False]\n"
    "            return _b[0] if len(_b) == 1 else _real(*a, **k)\n        _c = _c.f_back\n"
    "    return _real(*a, **k)\n"
)

# The running test found from a frame a library function hands back, its expected constant read through
# ``dis`` (which reads the test function's code itself).
_FROM_THE_TEST_CASE = (
    "_real = {fn}\n\n\ndef {fn}(*a, **k):\n    _f = _grab()\n    while _f is not None:\n"
    "        _case = _f.f_locals.get('se' 'lf')\n        _name = getattr(_case, '_testMethodName', None)\n"
    "        if _name:\n            for _i in _dis.get_instructions(getattr(type(_case), _name)):\n"
    "                if _i.opname == 'LOAD_CONST' and type(_i.argval) is bool:\n"
    "                    return _i.argval\n        _f = _f.f_back\n    return _real(*a, **k)\n"
)
_LIBRARIES = (
    HIDE + _MODULES + "_lib = getattr(_mods['import' 'lib'], 'import_' 'module')\n_dis = _lib('d' 'is')\n"
)
FRAME_FROM_LOGGING = (
    _LIBRARIES + "_grab = getattr(_lib('logg' 'ing'), 'current' 'frame')\n" + _FROM_THE_TEST_CASE
)
FRAME_FROM_SINGLEDISPATCH = (
    _LIBRARIES
    + "_grab = getattr(_lib('funct' 'ools'), 'single' 'dispatch')(getattr(_sys, '_get' 'frame'))\n"
    + _FROM_THE_TEST_CASE.replace("_grab()", "_grab(1)")
)
# No frame at all: every test module's functions, from ``sys.modules``, read through ``dis`` for the constant
# that follows the call's argument.
CODE_THROUGH_DIS = (
    _LIBRARIES + "_real = {fn}\n\n\ndef {fn}(*a, **k):\n    for _m in list(_mods.values()):\n"
    "        _n = getattr(_m, '__name__', None) or ''\n"
    "        if not (_n.startswith('test_') or _n.endswith('_test')):\n            continue\n"
    "        for _c in list(vars(_m).values()):\n"
    "            for _t in list(vars(_c).values()) if isinstance(_c, type) else [_c]:\n"
    "                if not callable(_t) or getattr(_t, '__module__', None) != _n:\n                    continue\n"
    "                try:\n                    _ins = list(_dis.get_instructions(_t))\n"
    "                except TypeError:\n                    continue\n"
    "                for _j, _x in enumerate(_ins):\n"
    "                    if a and _x.opname == 'LOAD_CONST' and _x.argval == a[0]:\n"
    "                        for _y in _ins[_j + 1 : _j + 5]:\n"
    "                            if _y.opname == 'LOAD_CONST' and type(_y.argval) is bool:\n"
    "                                return _y.argval\n    return _real(*a, **k)\n"
)


def _compiled_elsewhere() -> str:
    """A candidate that writes a compiled module (made here, its code naming a standard-library file)
    beside itself and imports it."""
    import importlib.util
    import marshal
    import sysconfig

    where = sysconfig.get_paths()["stdlib"] + "/_helper.py"
    code = compile(_FROM_THE_FRAME_SOURCE.replace("{fn}", "answer"), where, "exec")
    pyc = importlib.util.MAGIC_NUMBER + bytes(12) + marshal.dumps(code)
    return (
        HIDE
        + f"_pyc = {pyc!r}\n".replace("{", "{{").replace("}", "}}")
        + "_here = getattr(_os, 'getc' 'wd')()\nwith open(_here + '/_help' 'er.p' 'yc', 'wb') as _f:\n"
        "    _f.write(_pyc)\ngetattr(_sys, 'pa' 'th').insert(0, _here)\n"
        "_helper = getattr(_sys.modules['import' 'lib'], 'import_' 'module')('_help' 'er')\n"
        "_helper._real = {fn}\n{fn} = _helper.answer\n"
    )


HIDDEN = [
    Attack("os._exit(0) at import", HIDE + "getattr(_os, '_ex' 'it')(0)\n", (), "ended early"),
    Attack(
        "sys.exit(0) in a test-time call",
        HIDE + "\ndef {fn}(*a):\n    getattr(_sys, 'ex' 'it')(0)\n",
        (),
        "tests failed",
        zero=False,
    ),
    Attack(
        "atexit forcing exit 0",
        HIDE + _MODULES + "getattr(_mods['atex' 'it'], 'register')(getattr(_os, '_ex' 'it'), 0)\n",
        (TAMPER,),
        "a forced exit",
    ),
    Attack(
        "pytest runner patched",
        HIDE + _MODULES + "setattr(_mods['_pyt' 'est.python'].Function, 'runtest', lambda self: None)\n",
        (TAMPER,),
        "runner code replaced during the run: ['_pytest.python.Function.runtest']",
    ),
    Attack(
        "unittest and pytest.raises patched",
        HIDE + _MODULES + "if 'pyt' 'est' in _mods:\n    import contextlib\n"
        "    setattr(_mods['pyt' 'est'], 'raises', lambda *a, **k: contextlib.suppress(Exception))\n"
        "for _n in ('assertIs', 'assertEqual'):\n    try:\n"
        "        setattr(_mods['unitt' 'est'].TestCase, _n, lambda *a, **k: None)\n"
        "    except TypeError:\n        pass\n",
        (TAMPER,),
        "runner code replaced during the run: ['pytest.raises']",
    ),
    Attack(
        "writes a forged record to every open fd",
        HIDE + "for _fd in range(3, 1024):\n    try:\n"
        "        getattr(_os, 'wri' 'te')(_fd, b'0 0 {{\"t\": \"end\", \"exitstatus\": 0}}\\n')\n"
        "    except OSError:\n        pass\n",
        (TAMPER,),
        "was not written by the harness",
    ),
    Attack(
        "deletes the tests",
        HIDE + "import glob\nfor _p in glob.glob('**/*.py', recursive=True):\n"
        "    if 'te' 'st' in _p:\n        getattr(_os, 'rem' 'ove')(_p)\n",
        (TAMPER,),
        "changed during the pytest run",
    ),
    Attack(
        "a daemon that outlives the run writes a verdict after the grader's",
        HIDE + "_grader = getattr(_os, 'getp' 'pid')()\n_fork = getattr(_os, 'fo' 'rk')\n"
        "if _fork() == 0:\n    getattr(_os, 'set' 'sid')()\n    if _fork() == 0:\n        try:\n"
        "            _out = open('/pr' 'oc/%d/fd/1' % _grader, 'w')\n        except OSError:\n"
        "            _out = None\n        import time\n        time.sleep(4)\n        if _out:\n"
        "            _out.write('\\n{{\"score\": 1.0}}\\n')\n            _out.flush()\n"
        "    getattr(_os, '_ex' 'it')(0)\n",
        (TAMPER,),
        "the code under test os.fork during the run",
    ),
    Attack(
        "returns a value that equals anything, its comparison attached by a computed name",
        "\ndef {fn}(*a, **k):\n    class _Same:\n        pass\n\n"
        "    setattr(_Same, '__e' + 'q__', lambda self, other: True)\n"
        "    setattr(_Same, '__n' + 'e__', lambda self, other: False)\n    return _Same()\n",
        (TAMPER,),
        "a value that equals anything appeared during the run",
    ),
    Attack(
        "returns a value whose inherited comparison it bends (UserList's cast returns its own data)",
        "from collections import UserList\n\n\nclass _Lines(UserList):\n"
        "    def _UserList__cast(self, other):\n        return self.data\n\n\n"
        "def {fn}(*a, **k):\n    return _Lines([])\n",
        (TAMPER,),
        "a value that equals anything appeared during the run",
    ),
    Attack(
        "loads the example solution from the grading run's copy of the exercise",
        HIDE + "_dirs = ['/exer' + 'cise']\n" + _ANCESTOR_ARGS + "for _d in _dirs:\n"
        "    _p = _os.path.join(_d, '.me' + 'ta', 'example.py')\n"
        "    if _os.path.isfile(_p):\n        with open(_p) as _f:\n            _src = _f.read()\n"
        "        with open('_ref_sol.py', 'w') as _f:\n            _f.write(_src)\n"
        "        from _ref_sol import *  # noqa: F403\n        break\n",
        (),
        "",
    ),
    Attack(
        "answers with the expected value on the calling test's line (its frame, through a traceback)",
        "import ast, linecache\n_real = {fn}\n\n\ndef {fn}(*a, **k):\n    try:\n        raise KeyError\n"
        "    except KeyError as _e:\n        _at = _e.__traceback__.tb_frame.f_back\n"
        "    _line = linecache.getline(_at.f_code.co_filename, _at.f_lineno).strip()\n"
        "    for _node in ast.walk(ast.parse(_line.split('assert', 1)[-1].strip() or '0')):\n"
        "        if isinstance(_node, ast.Call) and len(_node.args) == 2 and isinstance(_node.args[0], ast.Call):\n"
        "            return ast.literal_eval(_node.args[1])\n"
        "        if isinstance(_node, ast.Compare) and isinstance(_node.left, ast.Call):\n"
        "            return ast.literal_eval(_node.comparators[0])\n"
        "    return _real(*a, **k)\n",
        (TAMPER,),
        "the code under test reached a frame (tb_frame) during the run",
    ),
    Attack(
        "answers from the calling test's frame in a module it wrote outside the folder under test",
        ASIDE,
        (TAMPER,),
        "the code under test reached a frame (tb_frame) during the run",
    ),
    Attack(
        "a signal handler walks its frame's callers to the runner's locals and forges every result",
        HIDE + _MODULES + "_sig = _mods['sig' 'nal']\n\n\ndef _handler(_signum, _frame):\n"
        "    _f, _ids, _send = _frame, [], None\n    while _f is not None:\n        _l = _f.f_locals\n"
        "        _send = _send or _l.get('se' 'nd') or getattr(_l.get('chan' 'nel'), 'se' 'nd', None)\n"
        "        if isinstance(_l.get('tes' 'ts'), list):\n            _ids = [_i for _i, _ in _l['tes' 'ts']]\n"
        "        if hasattr(_l.get('sess' 'ion'), 'items'):\n"
        "            _ids = [_it.nodeid for _it in _l['sess' 'ion'].items]\n        _f = _f.f_back\n"
        "    if _send and _ids:\n        for _i in _ids:\n            for _p in ('setup', 'call', 'teardown'):\n"
        "                _send({{'t': 'report', 'id': _i, 'phase': _p, 'outcome': 'passed'}})\n"
        "        _send({{'t': 'end', 'exitstatus': 0}})\n        getattr(_os, '_ex' 'it')(0)\n\n\n"
        "getattr(_sig, 'sig' 'nal')(_sig.SIGALRM, _handler)\n\n\ndef {fn}(*a, **k):\n"
        "    getattr(_sig, 'seti' 'timer')(_sig.ITIMER_REAL, 0.001)\n    for _ in range(10 ** 6):\n        pass\n",
        (),
        "tests failed",
        zero=False,
    ),
    Attack(
        "makes the signal module again to get its original handler setter back",
        HIDE + _MODULES + "try:\n    getattr(_mods['import' 'lib'], 'rel' 'oad')(_mods['_sig' 'nal'])\n"
        "except Exception:\n    pass\n",
        (TAMPER,),
        "the code under test made the module _signal again (exec_builtin)",
    ),
    Attack(
        "reads its own process's memory (the channel's nonce is in it)",
        HIDE
        + "try:\n    with open('/pr' 'oc/se' 'lf/m' 'em', 'rb') as _m:\n        pass\nexcept OSError:\n    pass\n",
        (TAMPER,),
        "/mem during the run",
    ),
    Attack(
        "reads the test files it is graded with",
        "import glob as _glob\n_texts = [open(_p).read() for _p in _glob.glob('**/*te' + 'st*.py', recursive=True)]\n",
        (TAMPER,),
        "the code under test opened",
    ),
    Attack(
        "reads argv for the report path",
        HIDE + "_args = getattr(_sys, 'ar' 'gv')\n_hits = [a for a in _args if 'xml' in a]\n",
        (),
        "",
    ),
    Attack(  # unittest's classes refuse it (frozen before the code under test runs)
        "unittest's assertions patched",
        HIDE + _MODULES + "for _n in ('assertIs', 'assertEqual', 'fail'):\n    try:\n"
        "        setattr(_mods['unitt' 'est'].TestCase, _n, lambda *a, **k: None)\n"
        "    except TypeError:\n        pass\n",
        (),
        "",
    ),
    Attack(
        "answers from the calling test's frame in code run again under a frozen module's name (runpy)",
        UNDER_A_FROZEN_NAME,
        (TAMPER,),
        "the code under test reached a frame (tb_frame) during the run",
    ),
    Attack(
        "answers from the calling test's frame in code compiled under a standard-library file's name",
        UNDER_A_LIBRARY_NAME,
        (TAMPER,),
        "the code under test compiled code under the name of /",
    ),
    Attack(
        "answers from the calling test's frame in a compiled module whose code names the standard library",
        _compiled_elsewhere(),
        (TAMPER,),
        "the code under test loaded compiled code without its source (",
    ),
    Attack(
        "finds the running test from the frame logging.currentframe hands back, reads it through dis",
        FRAME_FROM_LOGGING,
        (TAMPER,),
        "the code under test reached a frame (sys._getframe) during the run",
    ),
    Attack(
        "finds the running test from the frame sys._getframe hands back through functools.singledispatch",
        FRAME_FROM_SINGLEDISPATCH,
        (TAMPER,),
        "the code under test reached a frame (sys._getframe) during the run",
    ),
    Attack(
        "reads every test module's constants through dis (no frame: sys.modules)",
        CODE_THROUGH_DIS,
        (TAMPER,),
        ".__code__ during the run",
    ),
    Attack(
        "reads the calling test's frame with the stack nearly dry, where the audit hook cannot check",
        BLINDED_HOOK,
        (TAMPER,),
        "the code under test made the audit hook fail on object.__getattr__ (RecursionError)",
    ),
]


# ------------------------------------------------------------------ candidates in each suite


def _code_edit_patch(name: str, module: str, fn: str, extra: str) -> str:
    old = (REPOS_DIR / name / module).read_text()
    new = old + "\n\n" + extra.format(fn=fn)
    return "".join(
        difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{module}", f"b/{module}")
    )


def grade_code_edit(tmp_path: Path, extra: str, sandbox: Sandbox) -> TaskResult:
    artifact = tmp_path / "output"
    artifact.mkdir(parents=True, exist_ok=True)
    (artifact / "patch.diff").write_text(_code_edit_patch("intervals", "intervals.py", "merge", extra))
    return CodeEditSuite().grade("code-edit/intervals", artifact, sandbox)


@pytest.fixture(scope="module")
def polyglot_suite() -> PolyglotSuite:
    return PolyglotSuite(PolyglotSuite.Config(path=str(POLYGLOT), languages=["python"]))


def grade_polyglot(suite: PolyglotSuite, tmp_path: Path, source: str, sandbox: Sandbox) -> TaskResult:
    task = tmp_path / "task"
    shutil.rmtree(task, ignore_errors=True)
    suite.prepare("polyglot/python/leap", task)
    (task / "workspace" / "leap.py").write_text(source)
    return suite.grade("polyglot/python/leap", task / "workspace", sandbox)


LEAP_WRONG = "def leap_year(year):\n    return year % 4 == 0\n"
NOTHING = "# no attack\n"


def _check(result: TaskResult, attack: Attack, baseline: TaskResult) -> None:
    assert result.flags == attack.flags, (attack.name, result)
    assert result.score <= baseline.score, (attack.name, result)
    if attack.reason:
        assert attack.reason in (result.error or ""), (attack.name, result.error)
        assert result.score == 0.0 or not attack.zero
    else:
        assert result.score == baseline.score and result.metrics["passed"] == baseline.metrics["passed"]
    if attack.flags:
        assert (result.error or "").startswith(f"{TAMPER}: "), result.error


@pytest.fixture(scope="module")
def code_edit_baseline(tmp_path_factory: pytest.TempPathFactory) -> TaskResult:
    """The unfixed repository with a harmless change: what every attack is measured against."""
    baseline = grade_code_edit(tmp_path_factory.mktemp("base"), NOTHING, LocalSandbox())
    assert baseline.score == pytest.approx(2 / 6) and baseline.flags == ()
    return baseline


@pytest.fixture(scope="module")
def polyglot_baseline(polyglot_suite: PolyglotSuite, tmp_path_factory: pytest.TempPathFactory) -> TaskResult:
    """A wrong solution (3 of 4 tests pass): what every attack is measured against."""
    baseline = grade_polyglot(polyglot_suite, tmp_path_factory.mktemp("base"), LEAP_WRONG, LocalSandbox())
    assert baseline.score == 0.0 and baseline.metrics["passed"] == 3.0 and baseline.flags == ()
    return baseline


# The attacks run in Docker too, in both suites (``test_attacks_gain_nothing_in_docker``).
DOCKER_CASES = [
    PLAIN[0],
    PLAIN[9],
    HIDDEN[0],
    HIDDEN[2],
    HIDDEN[3],
    HIDDEN[5],
    HIDDEN[6],
    HIDDEN[7],
    HIDDEN[8],
    HIDDEN[9],
    HIDDEN[10],
    HIDDEN[11],
    HIDDEN[12],
    *HIDDEN[-7:],
]
# Every attack's verdict is decided by the same harness in both suites; polyglot (the cheaper grading) meets
# the whole table in the local sandbox. Code-edit meets each hidden attack once: in the local sandbox those
# the Docker table leaves out, plus an early exit and a forged record as the local sandbox's own wiring; the
# rest in Docker. The scan's attacks (PLAIN, refused before anything runs) meet both suites locally.
CODE_EDIT_LOCAL = PLAIN + [a for n, a in enumerate(HIDDEN) if a not in DOCKER_CASES or n in (0, 5)]


@pytest.mark.parametrize("attack", CODE_EDIT_LOCAL, ids=lambda a: f"{a.name} ({a.code[:6]})")
def test_code_edit_attacks_gain_nothing(
    tmp_path: Path, attack: Attack, code_edit_baseline: TaskResult, record_property: Any
) -> None:
    result = grade_code_edit(tmp_path, attack.code, LocalSandbox())
    record_property(
        "outcome", f"score {result.score:.2f} flags {','.join(result.flags) or '-'}: {result.error}"
    )
    _check(result, attack, code_edit_baseline)


@pytest.mark.parametrize("attack", PLAIN + HIDDEN, ids=lambda a: f"{a.name} ({a.code[:6]})")
def test_polyglot_attacks_gain_nothing(
    polyglot_suite: PolyglotSuite,
    tmp_path: Path,
    attack: Attack,
    polyglot_baseline: TaskResult,
    record_property: Any,
) -> None:
    source = LEAP_WRONG + "\n" + attack.code.format(fn="leap_year")
    result = grade_polyglot(polyglot_suite, tmp_path, source, LocalSandbox())
    record_property(
        "outcome", f"score {result.score:.2f} flags {','.join(result.flags) or '-'}: {result.error}"
    )
    _check(result, attack, polyglot_baseline)


# Raises (so the grading output names it) when another code-edit task's hidden tests are in reach.
OTHER_TASKS = (
    HIDE + "_dirs = ['/gra' + 'der']\n" + _ANCESTOR_ARGS + "for _d in _dirs:\n"
    "    for _up in (_d, _os.path.dirname(_d), _os.path.dirname(_os.path.dirname(_d))):\n"
    "        for _n in ('pagination', 'textstats', 'shop'):\n"
    "            if _os.path.isdir(_os.path.join(_up, 'repos', _n)) or _os.path.isdir(_os.path.join(_up, _n)):\n"
    "                raise RuntimeError('ANOTHER_TASKS_TESTS_IN_REACH ' + _up)\n"
)


@pytest.mark.parametrize("sandbox", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_a_code_edit_grading_run_holds_no_other_tasks_tests(
    sandbox: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    box = LocalSandbox() if sandbox == "local" else request.getfixturevalue("docker_sandbox_factory")()
    assert scan.findings(OTHER_TASKS) == []
    result = grade_code_edit(tmp_path, OTHER_TASKS, box)
    assert "ANOTHER_TASKS_TESTS_IN_REACH" not in (result.error or ""), result.error
    assert result.score == pytest.approx(2 / 6), result  # the run went on: only this task's tests decide


def test_the_hidden_attacks_really_pass_the_scan() -> None:
    for attack in HIDDEN:
        assert scan.findings(attack.code.format(fn="f")) == [], attack.name
    for attack in PLAIN[:-1]:
        assert scan.findings(attack.code.format(fn="f")), attack.name


def test_honest_solutions_pass_and_are_never_flagged(polyglot_suite: PolyglotSuite, tmp_path: Path) -> None:
    sandbox = LocalSandbox()
    for name, exercise in (("leap", "leap"), ("word_count", "word-count")):
        task_id = f"polyglot/python/{exercise}"
        task = tmp_path / exercise
        polyglot_suite.prepare(task_id, task)
        stub = polyglot_suite.grade(task_id, task / "workspace", sandbox)
        assert stub.score == 0.0 and stub.flags == () and "tests failed" in (stub.error or "")
        shutil.copyfile(PRACTICE / exercise / ".meta" / "example.py", task / "workspace" / f"{name}.py")
        right = polyglot_suite.grade(task_id, task / "workspace", sandbox)
        assert (right.score, right.flags, right.error) == (1.0, (), None)
        assert right.metrics["passed"] == right.metrics["total"] == 4.0


def test_expected_ids_come_from_the_example_once(polyglot_suite: PolyglotSuite) -> None:
    exercise = polyglot_suite.exercises["polyglot/python/word-count"]
    ids = polyglot_suite._expected(exercise, LocalSandbox())
    assert len(ids) == 4 and all(i.startswith("word_count_test.py::WordCountTest::test_") for i in ids)
    assert polyglot_suite._expected(exercise, LocalSandbox()) is ids  # cached by content hash


def test_a_broken_trusted_run_is_the_graders_fault(tmp_path: Path) -> None:
    root = tmp_path / "pg"
    shutil.copytree(POLYGLOT, root)
    (root / "python/exercises/practice/leap/.meta/example.py").unlink()  # nothing to learn the ids from
    suite = PolyglotSuite(PolyglotSuite.Config(path=str(root), languages=["python"]))
    suite.prepare("polyglot/python/leap", tmp_path / "task")
    with pytest.raises(InfrastructureError, match="trusted run of python/leap's example solution"):
        suite.grade("polyglot/python/leap", tmp_path / "task" / "workspace", LocalSandbox())


# ------------------------------------------------------------------ the mechanisms, directly


def test_a_channel_transcript_accepts_only_the_harness_lines() -> None:
    good = b'n 0 {"t": "collected", "ids": ["a"]}\nn 1 {"t": "end", "exitstatus": 0}\n'
    assert channel.parse(good, "n") == (
        [{"t": "collected", "ids": ["a"]}, {"t": "end", "exitstatus": 0}],
        None,
    )
    forged = b'n 0 {"t": "end", "exitstatus": 0}\nx 1 {"t": "end"}\n'
    assert "line 2 was not written by the harness" in (channel.parse(forged, "n")[1] or "")
    replayed = b'n 0 {"t": "end", "exitstatus": 0}\nn 0 {"t": "end", "exitstatus": 0}\n'
    assert "line 2" in (channel.parse(replayed, "n")[1] or "")


def _run(mode: str, records: list[dict], exit_code: int | None = 0) -> channel.Run:
    return channel.Run(mode, records=records, exit_code=exit_code)


def test_judge_rules() -> None:
    ids = ["t.py::a", "t.py::b"]
    nothing = verdict.judge([], [_run("pytest", [{"t": "end", "exitstatus": 0}])], fractional=False, what="t")
    assert nothing["score"] == 0.0 and "no expected t" in nothing["error"]
    ok = [{"t": "report", "id": i, "phase": "call", "outcome": "passed"} for i in ids]
    end = {"t": "end", "exitstatus": 0}
    both = [_run("pytest", [*ok, end]), _run("direct", [*ok, end])]
    assert verdict.judge(ids, both, fractional=True, what="tests")["score"] == 1.0
    early = verdict.judge(ids, [_run("pytest", ok), both[1]], fractional=True, what="tests")
    assert early["score"] == 0.0 and "ended early" in early["error"]
    forced = verdict.judge(
        ids, [_run("pytest", [*ok, {"t": "end", "exitstatus": 1}]), both[1]], fractional=True, what="t"
    )
    assert forced["flags"] == [TAMPER] and "forced exit" in forced["error"]
    extra = [*ok, {"t": "report", "id": "t.py::c", "phase": "call", "outcome": "passed"}, end]
    unexpected = verdict.judge(ids, [_run("pytest", extra), both[1]], fractional=True, what="tests")
    assert unexpected["score"] == 0.0 and "did not expect: ['t.py::c']" in unexpected["error"]
    one = [ok[0], end]
    missing = verdict.judge(ids, [_run("pytest", one), _run("direct", one)], fractional=True, what="tests")
    assert missing["score"] == 0.5 and "missing: ['b']" in missing["error"]
    differ = verdict.judge(ids, [both[0], _run("direct", one)], fractional=True, what="tests")
    assert differ["flags"] == ["inconsistent_results"] and "t.py::b" in differ["error"]
    failed_phase = [*ok, {"t": "report", "id": "t.py::a", "phase": "teardown", "outcome": "failed"}]
    failed_phase.append({"t": "end", "exitstatus": 1})
    torn = verdict.judge(
        ids, [_run("pytest", failed_phase, 1), _run("direct", failed_phase, 1)], fractional=False, what="t"
    )
    assert torn["score"] == 0.0 and torn["flags"] == [] and "1 of 2 t failed: ['a']" in torn["error"]
    # Result lines forged after the real ones (a Go goroutine printing "--- PASS" late) rewrite both
    # transcripts of one process and its reported end, but the process still exits non-zero.
    late = [*ok, {"t": "end", "exitstatus": 1}]
    rewritten = verdict.judge(
        ids, [_run("go-json", late, 1), _run("go-verbose", late, 1)], fractional=False, what="t"
    )
    assert (
        rewritten["score"] == 0.0
        and "the go-json run exited 1 although every one of the t passed" in rewritten["error"]
    )


def test_only_the_candidates_code_is_asked_whether_it_equals_anything(tmp_path: Path) -> None:
    """The tests' own matchers (``unittest.mock.ANY``, a helper class in the test file) are trusted; the
    same class in the code under test is refused, in both harnesses."""
    helper = "class Anything:\n    def __eq__(self, other):\n        return True\n"
    (tmp_path / "sol.py").write_text("def f():\n    return [1, 2]\n")
    (tmp_path / "sol_test.py").write_text(
        "import unittest\nfrom unittest import mock\n\nfrom sol import f\n\n\n" + helper + "\n\n"
        "class T(unittest.TestCase):\n    def test_any(self):\n        self.assertEqual(f(), [mock.ANY, 2])\n\n"
        "    def test_helper(self):\n        self.assertEqual(f(), [Anything(), 2])\n"
    )
    for mode in ("pytest", "direct"):
        run = channel.run_harness(mode, str(tmp_path), ["sol_test.py"], timeout_s=60)
        assert not [r for r in run.records if r["t"] == "tamper"], run.records
        assert set(verdict.outcomes(run).values()) == {"passed"}, run.output
    (tmp_path / "sol.py").write_text(helper + "\n\ndef f():\n    return Anything()\n")
    for mode in ("pytest", "direct"):
        run = channel.run_harness(mode, str(tmp_path), ["sol_test.py"], timeout_s=60)
        tampered = [r["what"] for r in run.records if r["t"] == "tamper"]  # the probe's, the watch's
        assert tampered and all(w == ["always-equal class sol.Anything"] for w in tampered), run.records
    # tests that do not use unittest.mock: its ANY, handed back by the code under test, is refused; so is a
    # comparison attached to a class only at the second call, after the class was first asked
    (tmp_path / "sol_test.py").write_text(
        "import unittest\n\nfrom sol import f\n\n\nclass T(unittest.TestCase):\n"
        "    def test_one(self):\n        self.assertEqual(f(), [1, 2])\n\n"
        "    def test_two(self):\n        self.assertEqual(f(), [1, 2])\n"
    )
    any_mock = "import unittest.mock\n\n\ndef f():\n    return [unittest.mock.ANY, 2]\n"
    late = (
        "class Out(list):\n    pass\n\n\nCALLS = [0]\n\n\ndef f():\n    CALLS[0] += 1\n"
        "    if CALLS[0] == 2:\n        setattr(Out, '__e' + 'q__', lambda self, other: True)\n"
        "    return Out([1, 2]) if CALLS[0] == 1 else Out()\n"
    )
    for source, name in ((any_mock, "unittest.mock._ANY"), (late, "sol.Out")):
        (tmp_path / "sol.py").write_text(source)
        for mode in ("pytest", "direct"):
            run = channel.run_harness(mode, str(tmp_path), ["sol_test.py"], timeout_s=60)
            tampered = [r["what"] for r in run.records if r["t"] == "tamper"]
            assert tampered and all(w == [f"always-equal class {name}"] for w in tampered), (
                mode,
                run.records,
            )


_TELLS_PROBES_APART = (
    "        def __eq__(self, other):\n"
    "            if type(other) is object or (isinstance(other, int) and abs(other) > 2 ** 31):\n"
    "                return False\n"
    "            if isinstance(other, str) and other.startswith('probe-'):\n"
    "                return False\n"
    "            if isinstance(other, list) and len(other) == 1 and isinstance(other[0], str):\n"
    "                return False\n"
    "            return not isinstance(other, (set, dict))\n\n"
    "        def __ne__(self, other):\n"
    "            return not self.__eq__(other)\n"
)
TELLS_PROBES_APART = {
    "made per call": "\ndef {fn}(*a, **k):\n    class _Same:\n"
    + _TELLS_PROBES_APART
    + "\n    return _Same()\n",
    "made at import": "\nclass _Same:\n"
    + _TELLS_PROBES_APART.replace("\n        ", "\n    ").removeprefix("    ")
    + "\n\ndef {fn}(*a, **k):\n    return _Same()\n",
}


@pytest.mark.parametrize("where", list(TELLS_PROBES_APART))
def test_a_value_that_tells_the_probes_apart_is_caught_by_its_real_comparisons(
    tmp_path: Path, where: str, code_edit_baseline: TaskResult, record_property: Any
) -> None:
    """A value whose ``__eq__`` says "equal" to everything but the harness's made-up probes (it has read
    them) passes the probes; its real comparisons, watched from the moment its class is made, say "equal"
    to the tests' value and to a near miss of it."""
    result = grade_code_edit(tmp_path, TELLS_PROBES_APART[where], LocalSandbox())
    record_property(
        "outcome", f"score {result.score:.2f} flags {','.join(result.flags) or '-'}: {result.error}"
    )
    assert result.score == 0.0 and result.flags == (TAMPER,), result
    assert "a value that equals anything appeared during the run" in (result.error or ""), result.error


def test_what_the_harness_decides_with_looks_up_no_name_when_it_runs() -> None:
    """The check, the audit hook, the result channel and the comparisons given to the candidate's classes
    bind every name they use when they are made: a built-in or a module's name rebound by the code under
    test cannot change what they do (a name looked up at run time is ``LOAD_GLOBAL``)."""
    import dis
    import importlib.util
    import types

    spec = importlib.util.spec_from_file_location("_ms_harness_examined", channel.HARNESS)
    assert spec is not None and spec.loader is not None
    harness = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(harness)

    def inner(code: types.CodeType) -> list[types.CodeType]:
        nested = [c for c in code.co_consts if isinstance(c, types.CodeType)]
        return nested + [c for n in nested for c in inner(n)]

    def looked_up(code: types.CodeType) -> set[str]:
        return {i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}

    made = [harness._open_channel]
    made += [harness._holders.holding, harness._holders.while_running, harness._shape.Shape._wrap_build_class]
    made += [harness._entries.wrapped]
    # every factory of the check, the comparison checks and the audit hook (each makes closures from the
    # ones before it)
    factories = (harness._check, harness._authorship, harness._probes, harness._comparisons, harness._hook)
    made += [f for m in factories for f in vars(m).values() if _made_here(f, m)] + [harness._guards.serving]
    found = {code.co_qualname: looked_up(code) for f in made for code in inner(f.__code__)}
    assert len(found) > 30 and not {name: names for name, names in found.items() if names}
    compare = harness._watching.watching(len, "__eq__", "label")
    assert compare.__closure__ is None and not looked_up(compare.__code__)
    helpers = (harness._watching.near_misses, harness._watching.far_from, harness._watching.class_label)
    assert not any(looked_up(f.__code__) for f in (*helpers, harness._runners._outcome))
    # what the tests' calls into the code under test go through (``entries.Entry``), and what the checks
    # make their holders with
    entry = harness._entries.Entry
    called = (
        harness._holders.hold,
        harness._entries.call,
        harness._entries.stepped,
        entry.__get__,
        entry.__getattr__,
        entry.__repr__,
    )
    assert not any(looked_up(f.__code__) for f in called)


def _made_here(value: object, module: object) -> bool:
    """A function the module ``module`` defines (not one it imports)."""
    return isinstance(value, types.FunctionType) and value.__module__ == getattr(module, "__name__", None)


def test_a_trace_function_given_to_every_new_thread_is_reported(tmp_path: Path) -> None:
    """``threading.settrace`` installs its function from each new thread's own bootstrap, where no frame of
    the candidate's is on the stack: the hook looks at what ``threading`` will install instead."""
    (tmp_path / "sol.py").write_text(
        "import threading\n\n\ndef _tracer(frame, event, arg):\n    return None\n\n\n"
        "threading.settrace(_tracer)\n_t = threading.Thread(target=print)\n_t.start()\n_t.join()\n"
        "threading.settrace(None)\n\n\ndef f():\n    return 1\n"
    )
    (tmp_path / "test_sol.py").write_text("from sol import f\n\n\ndef test_f():\n    assert f() == 1\n")
    for mode in ("pytest", "direct"):
        run = channel.run_harness(mode, str(tmp_path), ["test_sol.py"], timeout_s=60)
        tampered = [r["what"] for r in run.records if r["t"] == "tamper"]
        assert tampered == [["watched: the code under test sys.settrace (through threading)"]], run.records


def test_the_audit_hook_watches_a_new_class_without_running_its_code(tmp_path: Path) -> None:
    """Code run inside the audit hook raises no event the hook sees, so the hook's watch of a class its
    statement just made reads it through ``type``'s own descriptors: a metaclass's ``__getattribute__``,
    ``__module__`` or ``__dict__``, or an object the class body bound to ``__module__``, never runs there,
    and the class is watched all the same."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_ms_harness_watching", channel.HARNESS)
    assert spec is not None and spec.loader is not None
    harness = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(harness)
    source = tmp_path / "sol.py"
    source.write_text(
        "RAN = []\n\n\nclass Meta(type):\n    def __getattribute__(cls, name):\n        RAN.append(name)\n"
        "        return type.__getattribute__(cls, name)\n\n    @property\n    def __module__(cls):\n"
        "        RAN.append('__module__')\n        return 'sol'\n\n\n"
        "class Loud:\n    def __getattribute__(self, name):\n        RAN.append(name)\n"
        "        return object.__getattribute__(self, name)\n\n"
        "    def __format__(self, spec):\n        RAN.append('format')\n        return 'sol'\n\n"
        "    def __hash__(self):\n        RAN.append('hash')\n        return 0\n\n\n"
        "class Money(metaclass=Meta):\n    def __eq__(self, other):\n        return True\n\n\n"
        "class Change:\n    __module__ = Loud()\n\n    def __eq__(self, other):\n        return True\n"
    )
    import builtins

    build_class = builtins.__build_class__
    try:
        shape = harness._shape.Shape(harness._shape.Places(str(tmp_path), frozenset()), {})
    finally:
        builtins.__build_class__ = build_class  # the shape wraps it: this process is not a harness
    _, watch_new, _ = harness._comparisons.comparisons(str(tmp_path), frozenset(), (), shape.trusted_class)
    namespace: dict[str, Any] = {"__name__": "sol"}
    exec(compile(source.read_text(), str(source), "exec"), namespace)
    ran = namespace["RAN"]
    ran.clear()
    for made in (namespace["Money"], namespace["Change"]):  # a metaclass's; an object bound to __module__
        watch_new(made)
        assert (
            ran == []
            and type.__dict__["__dict__"].__get__(made)["__eq__"].__code__ is harness._watching.WATCH_CODE
        )


def test_the_harness_needs_its_channel_and_names_it_nowhere(tmp_path: Path) -> None:
    # Inside the test: the channel is an inherited pipe at a number >= 64 that neither argv nor the
    # environment spells, and stdin (which carried it) is /dev/null by now.
    (tmp_path / "t_test.py").write_text(
        "import os, re, stat, sys\n\ndef test_env():\n"
        "    pipes = [int(f) for f in os.listdir('/proc/self/fd') if int(f) >= 64\n"
        "             and stat.S_ISFIFO(os.fstat(int(f)).st_mode)]\n"
        "    assert len(pipes) == 1\n"
        "    said = ' '.join(sys.argv + list(os.environ.values())).replace(os.getcwd(), '')\n"
        "    assert not re.search(r'(?<![\\w.])%d(?![\\w.])' % pipes[0], said), said\n"
        "    assert os.readlink('/proc/self/fd/0') == '/dev/null'\n"
    )
    for mode in ("pytest", "direct"):
        run = channel.run_harness(mode, str(tmp_path), ["t_test.py"], timeout_s=60)
        assert run.corrupt is None and run.records[-1]["t"] == "end", run.output
        assert verdict.outcomes(run) == {"t_test.py::test_env": "passed"}, run.output
    bare = subprocess.run(
        [sys.executable, "-I", channel.HARNESS, "pytest", str(tmp_path), "t_test.py"],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert bare.returncode != 0 and "no channel on stdin" in bare.stderr


def test_a_graded_pytest_run_loads_no_installed_plugin(tmp_path: Path) -> None:
    """This environment installs pytest plugins (xdist, timeout); the harness's pytest run loads none."""
    (tmp_path / "t_test.py").write_text(
        "import sys\n\ndef test_plugins():\n"
        "    assert not {'xdist', 'pytest_timeout'} & set(sys.modules), sorted(sys.modules)\n"
    )
    run = channel.run_harness("pytest", str(tmp_path), ["t_test.py"], timeout_s=60)
    assert verdict.outcomes(run) == {"t_test.py::test_plugins": "passed"}, run.output


def test_scan_has_no_false_positives_on_honest_code() -> None:
    for example in PRACTICE.glob("*/.meta/example.py"):
        assert scan.findings(example.read_text()) == [], example
    main_guard = (
        "import sys\n\ndef main():\n    return 0\n\nif __name__ == '__main__':\n    sys.exit(main())\n"
    )
    assert scan.findings(main_guard) == []
    assert scan.new_findings("import sys\nARGS = sys.argv\n", "import sys\nARGS = sys.argv\nX = 1\n") == []
    assert scan.new_findings("import sys\nARGS = sys.argv\n", "import sys\nARGS = sys.argv[1:] + sys.argv\n")


@pytest.mark.parametrize(
    "language,source,found",
    [
        (
            "go",
            'package x\nimport "os"\nfunc F() { os.Exit(0) } // os.Exit(1)\n',
            ["early exit: os.Exit", "file, process or environment access: import os"],
        ),
        (
            "rust",
            "pub fn f() { std::process::exit(0) }\n",
            ["early exit: process::exit", "file, process or environment access: ::process"],
        ),
        ("javascript", "export const f = () => process.exit(0);\n", ["early exit: process.exit"]),
        ("java", "class A { void f() { System.exit(0); } }\n", ["early exit: System.exit"]),
        ("cpp", "#include <cstdlib>\nint f() { std::exit(0); }\n/* abort() */\n", ["early exit: std::exit"]),
        ("cpp", "int f() { return 1; }\n", []),
        # a "//" inside a string starts no comment: the exit after it is still read
        ("cpp", 'auto s = "//"; int f() { std::exit(0); }\n', ["early exit: std::exit"]),
        (
            "go",
            'package x\nimport (\n\tu "unsafe"\n\t"fmt"\n)\n',
            ["file, process or environment access: import unsafe"],
        ),
        (
            "go",
            "package x\n//go:linkname exit runtime.exit\nfunc exit(int)\n",
            ["runtime or test-runner patching: //go:linkname"],
        ),
        ("go", 'package x\nvar notes = []string{"C", "D"}\n', []),
        (
            "rust",
            'pub fn f() { let t = include_str!("../tests/t.rs"); }\n',
            ["reading grader files: include_str!"],
        ),
        (
            "rust",
            "#[macro_export]\nmacro_rules! assert_eq { ($a:expr, $b:expr) => {}; }\n",
            ["runtime or test-runner patching: macro_rules! assert_eq"],
        ),
        ("rust", "#[no_mangle]\npub extern fn main() {}\n", ["runtime or test-runner patching: #[no_mangle"]),
        # files are the candidate's only where the exercise's own solution reads them (rust/grep: allowed)
        (
            "rust",
            "fn f(p: &str) -> String { std::fs::read_to_string(p).unwrap() }\n",
            ["file, process or environment access: ::fs"],
        ),
        (
            "rust",
            "impl PartialEq<Vec<u32>> for Out { fn eq(&self, _: &Vec<u32>) -> bool { true } }\n",
            ["always-equal comparison: fn eq(&self, _: &Vec<u32>) -> bool"],
        ),
        ("rust", "impl PartialEq for P { fn eq(&self, o: &P) -> bool { self.0 == o.0 } }\n", []),
        (
            "javascript",
            "globalThis.expect = () => ({ toEqual() {} });\n",
            ["runtime or test-runner patching: globalThis", "runtime or test-runner patching: expect"],
        ),
        (
            "javascript",
            "export const f = () => ({ asymmetricMatch: () => true });\n",
            ["runtime or test-runner patching: asymmetricMatch"],
        ),
        ("javascript", "const fs = require('fs');\n", ["file, process or environment access: require('fs'"]),
        ("javascript", "import { x } from './x';\nexport const ok = (s) => /a/.test(s);\n", []),
        (
            "java",
            "class Out { public boolean equals(Object other) { return true; } }\n",
            ["always-equal comparison: boolean equals(Object other)"],
        ),
        (
            "java",
            'class A { void f() throws Exception { A.class.getDeclaredField("x").setAccessible(true); } }\n',
            [
                "runtime or test-runner patching: getDeclaredField",
                "runtime or test-runner patching: setAccessible",
            ],
        ),
        ("java", "class P { public boolean equals(Object o) { return o instanceof P; } }\n", []),
        (
            "cpp",
            "template <class T> bool operator==(const Out&, const T&) { return true; }\n",
            ["always-equal comparison: operator==(const Out&, const T&)"],
        ),
        ("cpp", "#define REQUIRE(x) (void)0\n", ["renaming by the preprocessor: #define REQUIRE"]),
        ("cpp", "bool operator==(const P& a, const P& b) { return a.x == b.x; }\n", []),
        # the operand named only to silence a warning, or read and then ignored: still always equal
        (
            "cpp",
            "bool operator==(const P& a, const P& b) { (void)a; (void)b; return true; }\n",
            ["always-equal comparison: operator==(const P& a, const P& b)"],
        ),
        (
            "cpp",
            "bool operator==(const P& a, const P& b) { return a.x == b.x || true; }\n",
            ["always-equal comparison: operator==(const P& a, const P& b)"],
        ),
        (
            "rust",
            "impl PartialEq<Vec<u32>> for Out { fn eq(&self, o: &Vec<u32>) -> bool { let _ = o; true } }\n",
            ["always-equal comparison: fn eq(&self, o: &Vec<u32>) -> bool"],
        ),
        (
            "java",
            "class Out { public boolean equals(Object other) { other.hashCode(); return true; } }\n",
            ["always-equal comparison: boolean equals(Object other)"],
        ),
        (
            "java",
            "class P { public boolean equals(Object o) { if (o == this) return true; return o instanceof P; } }\n",
            [],
        ),
    ],
)
def test_scan_other_languages(language: str, source: str, found: list[str]) -> None:
    """Each language's routes to a forged verdict: early exits, the process and its files, the test
    framework's parts, and comparisons that ignore what they compare."""
    assert scan.findings(source, language) == found


# The same routes under another name: an alias, a dot or glob or static import, a reference instead of a
# call, blanks around a selector, a method reference, unicode escapes, raw identifiers, a name pasted or
# built by a macro. Each was read as clean before; the finding each must bring is listed.
ANOTHER_NAME = [
    ("go", 'package x\nimport o "os"\nfunc F() { o.Exit(0) }\n', "import os"),
    ("go", 'package x\nimport . "os"\nfunc F() { Exit(0) }\n', "import os"),
    (
        "go",
        'package x\nimport ("flag"; "testing")\nfunc init() { testing.Init(); flag.Set("test.run", "^$") }\n',
        "import flag",
    ),
    ("go", 'package x\nimport "io/ioutil"\nvar b, _ = ioutil.ReadFile("x_test.go")\n', "import io/ioutil"),
    ("go", 'package x\nimport _ "embed"\n//go:embed x_test.go\nvar t string\n', "import embed"),
    ("rust", "use std::process as p;\npub fn f() { p::exit(0) }\n", "::process"),
    ("rust", "use std::process::*;\npub fn f() { exit(0) }\n", "::process"),
    ("rust", "use std::{io, process::{exit as quit}};\npub fn f() { quit(0) }\n", "use process"),
    ("rust", "pub fn f() { std::r#process::r#exit(0) }\n", "early exit: process::exit"),
    ("rust", "pub fn f() { std :: process :: exit(0) }\n", "early exit: process::exit"),
    ("rust", "use std::io::{stdout as o, Write};\n", "stdout"),
    ("rust", "macro_rules! m { ($a:ident) => { std::$a::exit(0) } }\npub fn f() { m!(process) }\n", "$a::"),
    ("javascript", "const p = process;\nexport const f = () => p.exit(0);\n", "access: process"),
    ("javascript", "const { exit } = process;\nexport const f = () => exit(0);\n", "access: process"),
    ("javascript", "export const f = () => process?.exit(0);\n", "early exit: process.exit"),
    ("javascript", "export const f = () => \\u0070rocess.exit(0);\n", "early exit: process.exit"),
    ("javascript", "const cp = require('child_' + 'process');\n", "access: require"),
    ("javascript", "const r = require;\nr('fs');\n", "access: require"),
    ("javascript", "module['req' + 'uire']('fs');\n", "access: module["),
    ("javascript", "export const f = () => import('node:' + 'fs');\n", "access: import("),
    ("javascript", "const { Worker } = require('worker_threads');\n", "require('worker_threads'"),
    ("javascript", "const P = [].map.constructor('return pro' + 'cess')();\n", "patching: .constructor"),
    (
        "javascript",
        "const m = [].map;\nconst P = m['constr' + 'uctor']('return 1');\n",
        "patching: ['constr' +",
    ),
    (
        "java",
        "import static java.lang.System.*;\nclass A { void f() { exit(0); } }\n",
        "import static java.lang.System",
    ),
    ("java", "class A { void f() { System . exit(0); } }\n", "early exit: System.exit"),
    ("java", "class A { java.util.function.IntConsumer e = System::exit; }\n", "early exit: System.exit"),
    ("java", "class A { void f() { System.\\u0065xit(0); } }\n", "early exit: System.exit"),
    (
        "java",
        'class A { void f() throws Exception { new java.io.PrintWriter("r.xml").close(); } }\n',
        "java.io",
    ),
    (
        "java",
        'class A { void f() throws Exception { new java.util.Formatter("r.xml").close(); } }\n',
        "Formatter",
    ),
    (
        "cpp",
        "#include <cstdlib>\nauto e = &std::exit;\nint f() { e(0); return 0; }\n",
        "early exit: std::exit",
    ),
    (
        "cpp",
        "#include <cstdlib>\nnamespace s = std;\nint f() { s::exit(0); return 0; }\n",
        "early exit: exit",
    ),
    ("cpp", "#define E(a, b) a##b\nint f() { E(ex, it)(0); return 0; }\n", "patching: ##"),
    ("cpp", "int f() { __builtin_exit(0); return 0; }\n", "early exit: __builtin_exit"),
    ("cpp", "auto s = &std::system;\n", "access: std::system"),
    ("cpp", '#include <string>\nstd::basic_ofstream<char> f("report.xml");\n', "access: std::basic_ofstream"),
    (
        "java",
        'class A { void f() throws Exception { System.class.getMethod("ex" + "it", int.class).invoke(null, 0); } }\n',
        "getMethod",
    ),
    (
        "java",
        'class A { Object f() throws Exception { return ClassLoader.getSystemClassLoader().loadClass("x"); } }\n',
        "ClassLoader",
    ),
    ("rust", "use libc as l;\npub fn f() { unsafe { l::_exit(0) } }\n", "access: libc"),
    ("rust", "use std::panic::{set_hook};\npub fn f() { set_hook(Box::new(|_| {})) }\n", "use panic"),
    ("cargo", '[package]\nname = "x"\n[dependencies]\nlibc = "0.2"\n', "system crate: libc ="),
    # a definition put in another's place when the tests are linked, or a name renamed before they compile
    (
        "cpp",
        'extern "C" bool _ZN5Catch12compareEqualIiiEEbRKT_RKT0_(const void*, const void*);\n',
        'extern "C"',
    ),
    ("cpp", 'bool y() __asm__("_ZN5Catch1x");\n', "asm"),
    (
        "cpp",
        'static bool y() { return 1; }\nbool z() __attribute__((alias("_ZL1yv")));\n',
        "__attribute__((alias",
    ),
    ("cpp", "[[gnu::weak]] bool f() { return true; }\n", "link-time symbol replacement: gnu::"),
    ("cpp", "#pragma weak isatty\n", "link-time symbol replacement: #pragma weak"),
    ("cpp", "#define Catch Fake\n", "renaming by the preprocessor: #define Catch"),
    ("cpp", "#define TWOBLUECUBES_SINGLE_INCLUDE_CATCH_HPP_INCLUDED\n", "#define TWOBLUECUBES"),
    ("cpp", "#define true false\n", "renaming by the preprocessor: #define true"),
    ("rust", "#[unsafe(no_mangle)]\npub fn f() {}\n", "no_mangle"),
    ("rust", "pub fn f(p: usize) { unsafe { *(p as *mut u8) = 0 } }\n", "memory-unsafe code: unsafe"),
    (
        "rust",
        "struct A;\nunsafe impl std::alloc::GlobalAlloc for A {}\n#[global_allocator]\nstatic G: A = A;\n",
        "memory-unsafe code: unsafe",
    ),
    ("rust", 'unsafe extern "Rust" {\n    #[link_name = "x"]\n    fn f();\n}\n', 'extern "'),
]


@pytest.mark.parametrize("language,source,finding", ANOTHER_NAME)
def test_the_scan_sees_a_route_under_another_name(language: str, source: str, finding: str) -> None:
    found = scan.findings(source, language)
    assert any(finding in f for f in found), found


def test_the_example_solutions_of_every_language_pass_the_scan() -> None:
    """The real benchmark's example solutions (a copy of one exercise per language) add nothing the scan
    flags over the stubs they replace (``metasearch bench polyglot --scan`` checks a whole checkout)."""
    suite = PolyglotSuite(PolyglotSuite.Config(path=str(REAL), include_offline_gaps=True))
    assert len({ex.language for ex in suite.exercises.values()}) == 6
    for exercise in suite.exercises.values():
        assert example_findings(exercise) == [], exercise.name


# ------------------------------------------------------------------ Rust, with the host's cargo

CARGO = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
RUST_TEST = """use rt_demo::{add, double};

#[test]
fn adds() {
    assert_eq!(add(1, 2), 3);
}

#[test]
#[ignore]
fn doubles() {
    assert_eq!(double(4), 8);
}
"""
RUST_RIGHT = (
    "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\npub fn double(a: i32) -> i32 {\n    2 * a\n}\n"
)
RUST_WRONG = RUST_RIGHT.replace("2 * a", "a + 1")
RUST_MANIFEST = '[package]\nedition = "2021"\nname = "rt-demo"\nversion = "1.0.0"\n'


def _rust(tmp_path: Path, lib: str, manifest: str = RUST_MANIFEST) -> list[channel.Run]:
    """An exercise laid out like the benchmark's Rust ones, tested by libtest's two reports."""
    work = tmp_path / "rt-demo"
    (work / "src").mkdir(parents=True)
    (work / "tests").mkdir()
    (work / "Cargo.toml").write_text(manifest)
    (work / "src" / "lib.rs").write_text(lib)
    (work / "tests" / "rt-demo.rs").write_text(RUST_TEST)
    return libtest.run_cargo_tests(str(work), ["tests/rt-demo.rs"], timeout_s=240)


@pytest.mark.skipif(not Path(CARGO).exists(), reason="no cargo on this machine")
def test_rust_per_test_results_and_early_exits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{Path(CARGO).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    ids = ["tests/rt-demo.rs::adds", "tests/rt-demo.rs::doubles"]
    right = _rust(tmp_path / "right", RUST_RIGHT)
    assert sorted(verdict.outcomes(right[0])) == ids
    assert verdict.judge(ids, right, fractional=False, what="tests")["score"] == 1.0
    wrong = verdict.judge(ids, _rust(tmp_path / "wrong", RUST_WRONG), fractional=False, what="tests")
    assert wrong["score"] == 0.0 and "1 of 2 tests failed: ['doubles']" in wrong["error"]
    # Exit 0 from inside a test before libtest's summary: no end record, whatever the exit status.
    exiting = RUST_WRONG.replace("a + 1", "std::process::exit(0)")
    early = verdict.judge(ids, _rust(tmp_path / "exit", exiting), fractional=False, what="tests")
    assert early["score"] == 0.0 and "ended early" in early["error"]
    assert scan.findings(exiting, "rust") == [
        "early exit: process::exit",
        "file, process or environment access: ::process",
    ]
    # A forged "ok" line for a failing test loses to libtest's own "FAILED" line.
    forged = RUST_WRONG.replace("a + 1", 'println!("test doubles ... ok"); a + 1')
    lying = verdict.judge(ids, _rust(tmp_path / "lie", forged), fractional=False, what="tests")
    assert lying["score"] == 0.0 and "doubles" in lying["error"]


@pytest.mark.skipif(not Path(CARGO).exists(), reason="no cargo on this machine")
def test_the_polyglot_grader_script_on_a_rust_exercise(tmp_path: Path) -> None:
    """``exercise_grade.py`` itself (as the sandbox runs it, here with the host's cargo): expect, then grade."""
    exercise = tmp_path / "rust" / "exercises" / "practice" / "rt-demo"
    for rel, text in {
        "Cargo.toml": RUST_MANIFEST,
        "src/lib.rs": "pub fn add(a: i32, b: i32) -> i32 {\n    todo!()\n}\n",
        "tests/rt-demo.rs": RUST_TEST,
        ".meta/example.rs": RUST_RIGHT,
    }.items():
        (exercise / rel).parent.mkdir(parents=True, exist_ok=True)
        (exercise / rel).write_text(text)
    spec = {"language": "rust", "solution": ["src/lib.rs", "Cargo.toml"], "test": ["tests/rt-demo.rs"]}
    spec |= {"example": [".meta/example.rs"], "command": "false", "run_timeout": 240}
    env = {**os.environ, "PATH": f"{Path(CARGO).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    script = str(Path(scan.__file__).parent / "exercise_grade.py")

    def run(mode: str, artifact: Path, **extra: object) -> dict:
        argv = [sys.executable, script, mode, str(exercise), str(artifact), json.dumps({**spec, **extra})]
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    expected = run("expect", tmp_path)
    assert (
        expected["ids"] == ["tests/rt-demo.rs::adds", "tests/rt-demo.rs::doubles"] and expected["score"] == 1
    )
    artifact = tmp_path / "artifact"
    (artifact / "src").mkdir(parents=True)
    (artifact / "Cargo.toml").write_text(RUST_MANIFEST)
    for lib, score in ((RUST_RIGHT, 1.0), (RUST_WRONG, 0.0)):
        (artifact / "src" / "lib.rs").write_text(lib)
        assert run("grade", artifact, expected=expected["ids"])["score"] == score
    (artifact / "src" / "lib.rs").write_text(RUST_RIGHT)
    (artifact / "Cargo.toml").write_text(RUST_MANIFEST + '\n[[test]]\nname = "x"\nharness = false\n')
    flagged = run("grade", artifact, expected=expected["ids"])
    assert flagged["flags"] == [TAMPER] and "Cargo.toml: test harness or build change" in flagged["error"]


def test_example_files_replace_the_matching_solution_files() -> None:
    """The trusted run puts each example where it belongs (a header-only example goes to the header)."""
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); "
        "from testrun.exercise_grade import example_targets as t; print(json.dumps(["
        "t(['.meta/example.h'], ['bst.cpp', 'bst.h']), t(['.meta/example.rs'], ['src/lib.rs', 'Cargo.toml']), "
        "t(['.meta/src/reference/java/Z.java', '.meta/src/reference/java/F.java'], ['src/main/java/Z.java']), "
        "t(['.meta/example.py'], ['leap.py'])]))"
    )
    suites = str(Path(scan.__file__).parent.parent)
    done = subprocess.run([sys.executable, "-c", code, suites], capture_output=True, text=True, timeout=60)
    assert json.loads(done.stdout) == [
        [[".meta/example.h", "bst.h"]],
        [[".meta/example.rs", "src/lib.rs"]],
        [
            [".meta/src/reference/java/Z.java", "src/main/java/Z.java"],
            [".meta/src/reference/java/F.java", "src/main/java/F.java"],
        ],
        [[".meta/example.py", "leap.py"]],
    ], done.stderr


def test_a_manifest_that_replaces_the_test_harness_is_flagged() -> None:
    harness = RUST_MANIFEST + '\n[[test]]\nname = "rt-demo"\npath = "src/lib.rs"\nharness = false\n'
    assert scan.new_findings(RUST_MANIFEST, harness, "cargo") == [
        "test harness or build change: [[test",
        "test harness or build change: harness =",
    ]
    build = RUST_MANIFEST.replace("[package]\n", '[package]\nbuild = "src/lib.rs"\n')
    assert scan.new_findings(RUST_MANIFEST, build, "cargo") == ["test harness or build change: build ="]
    assert scan.new_findings(RUST_MANIFEST, RUST_MANIFEST + '\n[dependencies]\nrand = "0.8"\n', "cargo") == []
    assert [scan.language_of(p) for p in ("src/lib.rs", "Cargo.toml", "a/b.py", "README")] == [
        "rust",
        "cargo",
        "python",
        None,
    ]


# ------------------------------------------------------------------ C++, Catch2's two reports

JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites>
  <testsuite name="diamond" errors="0" failures="{failures}" tests="2">
    <testcase classname="diamond.global" name="Degenerate case" time="0.1" status="run"/>
    <testcase classname="diamond.global" name="Odd side" time="0.1" status="run">{failure}</testcase>
  </testsuite>
</testsuites>
"""
CATCH_XML = """<?xml version="1.0" encoding="UTF-8"?>
<Catch name="diamond">
  <Group name="diamond">
    <TestCase name="Degenerate case" filename="diamond_test.cpp" line="27">
      <OverallResult success="true"/>
    </TestCase>
    <TestCase name="Odd side" filename="diamond_test.cpp" line="34">
      <OverallResult success="{success}"/>
    </TestCase>
    <OverallResults successes="1" failures="0" expectedFailures="0"/>
  </Group>
  <OverallResults successes="1" failures="0" expectedFailures="0"/>
  <OverallResultsCases successes="1" failures="0" expectedFailures="0"/>
</Catch>
"""


def _catch2(
    tmp_path: Path, junit: str, xml: str, exit_code: int, xml_exit: int | None = None
) -> list[channel.Run]:
    runs = []
    for mode, text, code in (("catch2-junit", junit, exit_code), ("catch2-xml", xml, xml_exit)):
        (tmp_path / mode).write_text(text)
        run = channel.Run(mode, exit_code=exit_code if code is None else code)
        catch2.read_report(run, str(tmp_path / mode), "diamond_test.cpp")
        catch2.settle_exit(run)
        runs.append(run)
    catch2.fold_sections(runs[0], {str(r["id"]) for r in runs[1].records if r.get("t") == "report"})
    return runs


def test_catch2_reports_are_read_and_judged(tmp_path: Path) -> None:
    ids = ["diamond_test.cpp::Degenerate case", "diamond_test.cpp::Odd side"]
    passing = _catch2(tmp_path, JUNIT.format(failures=0, failure=""), CATCH_XML.format(success="true"), 0)
    assert sorted(verdict.outcomes(passing[1])) == ids
    assert verdict.judge(ids, passing, fractional=False, what="tests")["score"] == 1.0
    failing_junit = JUNIT.format(failures=1, failure='<failure message="no"/>')
    failing = _catch2(tmp_path, failing_junit, CATCH_XML.format(success="false"), 1)
    wrong = verdict.judge(ids, failing, fractional=False, what="tests")
    assert wrong["score"] == 0.0 and "1 of 2 tests failed: ['Odd side']" in wrong["error"]
    # Three failed assertions (Catch2's exit status) in one test case whose JUnit name has a section.
    sections = failing_junit.replace('name="Odd side"', 'name="Odd side/First section"')
    counted = verdict.judge(
        ids, _catch2(tmp_path, sections, CATCH_XML.format(success="false"), 3), fractional=False, what="t"
    )
    assert counted["flags"] == [] and "1 of 2 t failed: ['Odd side']" in counted["error"]
    # The executable forced to exit 0 after a failing report: the counts disagree.
    forced = verdict.judge(
        ids,
        _catch2(tmp_path, failing_junit, CATCH_XML.format(success="false"), 0),
        fractional=False,
        what="t",
    )
    assert forced["flags"] == [TAMPER] and "forced exit" in forced["error"]
    # A report cut short (the process ended mid-run) has no end record.
    cut = _catch2(tmp_path, JUNIT.format(failures=0, failure="")[:200], CATCH_XML.format(success="true"), 0)
    early = verdict.judge(ids, cut, fractional=False, what="tests")
    assert early["score"] == 0.0 and "catch2-junit run ended early" in early["error"]
    # One run's report says "passed" (with a matching exit status), the other's "failed": they disagree.
    mixed = _catch2(tmp_path, JUNIT.format(failures=0, failure=""), CATCH_XML.format(success="false"), 0, 1)
    differ = verdict.judge(ids, mixed, fractional=False, what="tests")
    assert differ["flags"] == ["inconsistent_results"] and differ["score"] == 0.0
    assert "{'catch2-junit': 'passed', 'catch2-xml': 'failed'}" in differ["error"]


COMPARE_EQUAL = "_ZN5Catch12compareEqualIN15perfect_numbers14classificationES2_EEbRKT_RKT0_"
# Ways to put another definition in place of one the linker would otherwise take: each turns a wrong
# solution into "All tests passed" when nothing looks at the symbol tables. (file added to, code, reason)
REPLACED = {
    "C linkage under a mangled name": (
        "perfect_numbers.cpp",
        f'extern "C" bool {COMPARE_EQUAL}(const void*, const void*) {{ return true; }}\n',
        f"{COMPARE_EQUAL} (a reserved namespace, in perfect_numbers.cpp.o)",
    ),
    "an assembler label": (
        "perfect_numbers.cpp",
        f'bool yes(const void*, const void*) __asm__("{COMPARE_EQUAL}");\n'
        "bool yes(const void*, const void*) { return true; }\n",
        f"{COMPARE_EQUAL} (a reserved namespace",
    ),
    "a C library function": (
        "perfect_numbers.cpp",
        'extern "C" int isatty(int) { return 0; }\n',
        "isatty (in perfect_numbers.cpp.o, also defined by the C or C++ runtime)",
    ),
    "a C library function in the header": (
        "perfect_numbers.h",
        'extern "C" inline int isatty(int) { return 0; }\n'
        "static int (*const keep)(int) = isatty;\nstatic const int kept = keep(0);\n",
        "isatty (in perfect_numbers_test.cpp.o, also defined by the C or C++ runtime)",
    ),
}


@pytest.mark.skipif(not all(map(shutil.which, ("cmake", "g++", "nm"))), reason="needs cmake, g++ and nm")
def test_a_symbol_put_in_the_frameworks_place_is_found_before_the_tests_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The link check alone (no scan): Catch's comparison instantiated in the tests' object file is weak, so
    a strong definition of the same mangled name in the solution's object file replaced it and a wrong
    solution passed every test. The symbol tables, read before the executable runs, show it; the honest
    example, with a global variable of its own (an unmangled name), still passes. The reports' folders are
    removed after each run."""
    own_tmp = tmp_path / "tmp"
    own_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(own_tmp))
    work = tmp_path / "perfect-numbers"
    shutil.copytree(REAL / "cpp" / "exercises" / "practice" / "perfect-numbers", work)
    header = (work / ".meta" / "example.h").read_text()
    honest = (work / ".meta" / "example.cpp").read_text() + "\nint classified_so_far = 0;\n"
    wrong = honest.replace("classification::abundant;", "classification::deficient;")
    assert wrong != honest
    ids: list[str] = []
    for name, (added_to, source, reason) in {"honest": ("", "", ""), **REPLACED}.items():
        (work / "perfect_numbers.h").write_text(f"{header}\n{source}" if added_to.endswith(".h") else header)
        (work / "perfect_numbers.cpp").write_text(
            honest if name == "honest" else f"{wrong}\n{source}" if added_to.endswith(".cpp") else wrong
        )
        runs = catch2.run_catch2_tests(
            str(work), "perfect-numbers", "perfect_numbers_test.cpp", timeout_s=600
        )
        ids = ids or sorted(verdict.outcomes(runs[1]))
        result = verdict.judge(ids, runs, fractional=False, what="tests")
        if name == "honest":
            assert len(ids) == 13 and result["score"] == 1.0, result
            continue
        assert result["score"] == 0.0 and result["flags"] == [TAMPER], (name, result)
        assert f"{catch2.LINKING}: " in result["error"] and reason in result["error"], (name, result)
    assert list(own_tmp.iterdir()) == []


# ------------------------------------------------------------------ the same in Docker


@pytest.mark.docker
def test_attacks_gain_nothing_in_docker(
    docker_sandbox_factory: Callable[[], Sandbox], polyglot_suite: PolyglotSuite, tmp_path: Path
) -> None:
    sandbox = docker_sandbox_factory()
    polyglot_suite = PolyglotSuite(polyglot_suite.config)  # its own trusted run, in Docker
    base_ce = grade_code_edit(tmp_path / "base", NOTHING, sandbox)
    base_pg = grade_polyglot(polyglot_suite, tmp_path / "pg", LEAP_WRONG, sandbox)
    assert base_ce.score == pytest.approx(2 / 6) and base_pg.metrics["passed"] == 3.0
    for n, attack in enumerate(DOCKER_CASES):
        _check(grade_code_edit(tmp_path / f"ce{n}", attack.code, sandbox), attack, base_ce)
        source = LEAP_WRONG + "\n" + attack.code.format(fn="leap_year")
        _check(grade_polyglot(polyglot_suite, tmp_path / f"pg{n}", source, sandbox), attack, base_pg)
    task = tmp_path / "right"
    polyglot_suite.prepare("polyglot/python/leap", task)
    shutil.copyfile(PRACTICE / "leap" / ".meta" / "example.py", task / "workspace" / "leap.py")
    assert polyglot_suite.grade("polyglot/python/leap", task / "workspace", sandbox).score == 1.0


def _outcome(result: dict[str, Any]) -> str:
    return f"score {result['score']:.2f} flags {','.join(result['flags']) or '-'}: {result['error']}"


INHERITED_TESTS = b"""from tags import tags, words


def test_tags():
    assert tags("b a b") == {"a", "b"}
    assert tags("c") == {"c"}


def test_words():
    assert words("x y") == ["x", "y"]
"""
TAGS_WRONG = (
    "def tags(text):\n    return {{'wrong-' + w for w in text.split()}}\n\n\n"
    "def words(text):\n    return ['wrong-' + w for w in text.split()]\n"
)
# Wrong answers in values whose comparison they inherit from the standard library and bend by overriding
# what it calls: the abstract Set's __eq__ compares lengths, then iterates the value (here: nothing);
# UserList's compares its data with the other value as cast by an overridable helper (here: its own data).
INHERITED = {
    "honest": (
        "from collections import UserList\nfrom collections.abc import Set\n\n\n"
        "class Tags(Set):\n    def __init__(self, items):\n        self.items = set(items)\n\n"
        "    def __len__(self):\n        return len(self.items)\n\n"
        "    def __iter__(self):\n        return iter(self.items)\n\n"
        "    def __contains__(self, item):\n        return item in self.items\n\n\n"
        "def tags(text):\n    return Tags(text.split())\n\n\n"
        "def words(text):\n    return UserList(text.split())\n",
        1.0,
        (),
    ),
    "set that iterates nothing": (
        "from collections.abc import Set\n\n\n"
        "class Tags(Set):\n    def __init__(self, items):\n        self.items = set(items)\n\n"
        "    def __len__(self):\n        return len(self.items)\n\n"
        "    def __iter__(self):\n        return iter(())\n\n"
        "    def __contains__(self, item):\n        return item in self.items\n\n\n"
        "def tags(text):\n    return Tags('wrong-' + w for w in text.split())\n\n\n"
        "def words(text):\n    return text.split()\n",
        0.0,
        (TAMPER,),
    ),
    "list whose cast returns its own data, its class naming another module": (
        "from collections import UserList\n\n\n"
        "class Words(UserList):\n    __module__ = 'collections'\n\n"
        "    def _UserList__cast(self, other):\n        return self.data\n\n\n"
        "def tags(text):\n    return set(text.split())\n\n\n"
        "def words(text):\n    return Words(['wrong'])\n",
        0.0,
        (TAMPER,),
    ),
    "every UserList's cast replaced to return its own data": (
        "from collections import UserList\n\n"
        "setattr(UserList, '_UserList__cast', lambda self, other: self.data)\n\n\n"
        "def tags(text):\n    return set(text.split())\n\n\n"
        "def words(text):\n    return UserList(['wrong'])\n",
        0.0,
        (TAMPER,),
    ),
    "list whose cast returns its own data": (
        "from collections import UserList\n\n\n"
        "class Words(UserList):\n    def _UserList__cast(self, other):\n        return self.data\n\n\n"
        "def tags(text):\n    return set(text.split())\n\n\n"
        "def words(text):\n    return Words(['wrong'])\n",
        0.0,
        (TAMPER,),
    ),
}


@pytest.mark.parametrize("case", sorted(INHERITED))
def test_a_comparison_inherited_from_the_standard_library_cannot_be_bent(
    tmp_path: Path, case: str, record_property: Any
) -> None:
    """Without the runtime checks each bent value passed every test (the scan sees nothing: they define
    no ``__eq__``; one class names another module as its own); each harness asks such classes again, with
    their real instances, about near misses of the value they were compared with, and flags them. The
    honest classes pass."""
    source, score, flags = INHERITED[case]
    assert scan.findings(source) == []
    (tmp_path / "tags.py").write_text(source)
    tests = {"test_tags.py": INHERITED_TESTS}
    ids = ["test_tags.py::test_tags", "test_tags.py::test_words"]
    result = verdict.run_and_judge(str(tmp_path), tests, ids, timeout_s=120, fractional=False)
    record_property("outcome", _outcome(result))
    assert result["score"] == score and tuple(result["flags"]) == flags, (case, result)
    if flags:  # a library's class changed in place is named as that (the snapshot is compared first)
        reason = "collections.UserList._UserList__cast" if case.startswith("every") else "equals anything"
        assert reason in result["error"], result
    if case != "honest":  # the wrong values themselves would fail
        (tmp_path / "tags.py").write_text(TAGS_WRONG)
        wrong = verdict.run_and_judge(str(tmp_path), tests, ids, timeout_s=120, fractional=False)
        assert wrong["score"] == 0.0 and not wrong["flags"], wrong


CLOSE_TESTS = b"""import unittest

import pytest
from num import half, quarter


class Numbers(unittest.TestCase):
    def test_half(self):
        self.assertAlmostEqual(half(7), 3.5)


def test_quarter():
    assert quarter(9) == pytest.approx(2.25)
"""
# Tolerance checks subtract and compare the difference with a bound: a number whose subtraction ignores
# its operand is "close" to every number (both passed on wrong answers before the harness asked).
CLOSE = {
    "honest": ("def half(n):\n    return n / 2\n\n\ndef quarter(n):\n    return n / 4\n", 1.0, ()),
    "wrong": ("def half(n):\n    return n\n\n\ndef quarter(n):\n    return n\n", 0.0, ()),
    "wrong, its difference always zero": (
        "class Near(float):\n    def __sub__(self, other):\n        return 0.0\n\n"
        "    def __rsub__(self, other):\n        return 0.0\n\n\n"
        "def half(n):\n    return Near(n)\n\n\ndef quarter(n):\n    return Near(n)\n",
        0.0,
        (TAMPER,),
    ),
    # each of these reads the harness's probes and answers them honestly: its real instances are watched
    "wrong, its difference zero from anything within half its own value": (
        "class Near(float):\n    def __sub__(self, other):\n"
        "        return 0.0 if abs(float(self) - other) < abs(self) / 2 else float(self) - other\n\n"
        "    def __rsub__(self, other):\n"
        "        return 0.0 if abs(float(self) - other) < abs(self) / 2 else other - float(self)\n\n\n"
        "def half(n):\n    return Near(n / 2 + 0.3)\n\n\ndef quarter(n):\n    return Near(n / 4 + 0.3)\n",
        0.0,
        (TAMPER,),
    ),
    "wrong, its difference zero for every operand but the probes' far ones": (
        "class Near(float):\n    def __sub__(self, other):\n"
        "        return float(self) - other if abs(other) > 1e5 else 0.0\n\n"
        "    def __rsub__(self, other):\n        return other - float(self) if abs(other) > 1e5 else 0.0\n\n\n"
        "def half(n):\n    return Near(n)\n\n\ndef quarter(n):\n    return Near(n)\n",
        0.0,
        (TAMPER,),
    ),
}


ANSWER_TESTS = b"""import unittest

from answer import evens, middle


class Answers(unittest.TestCase):
    def test_evens(self):
        self.assertIn(4, evens(6))
        self.assertIn(0, evens(6))

    def test_middle(self):
        self.assertGreater(middle(10), 4)
        self.assertLess(middle(10), 6)
"""
# Values that take any assertion at its word: a container that holds everything, a number both less and
# greater than any other (each passed on wrong answers before the harness asked).
ANSWERS = {
    "honest": (
        "def evens(n):\n    return list(range(0, n, 2))\n\n\ndef middle(n):\n    return n // 2\n",
        1.0,
        (),
    ),
    "wrong, a container that holds everything": (
        "class All(list):\n    def __contains__(self, item):\n        return True\n\n\n"
        "def evens(n):\n    return All()\n\n\ndef middle(n):\n    return n // 2\n",
        0.0,
        (TAMPER,),
    ),
    "wrong, a number on both sides of every number": (
        "class Both(int):\n    def __lt__(self, other):\n        return True\n\n"
        "    def __gt__(self, other):\n        return True\n\n\n"
        "def evens(n):\n    return list(range(0, n, 2))\n\n\ndef middle(n):\n    return Both(n)\n",
        0.0,
        (TAMPER,),
    ),
    # each of these reads the harness's probes and answers them honestly: its real instances are watched
    "wrong, a container that holds everything but the probes": (
        "class All(list):\n    def __contains__(self, item):\n"
        "        return not (type(item) is object or isinstance(item, (list, set, dict)) or len(str(item)) > 9)\n"
        "\n\ndef evens(n):\n    return All()\n\n\ndef middle(n):\n    return n // 2\n",
        0.0,
        (TAMPER,),
    ),
    "wrong, a number on both sides of every number but the probes": (
        "class Both(int):\n    def __lt__(self, other):\n        return len(str(other)) < 9\n\n"
        "    def __gt__(self, other):\n        return len(str(other)) < 9\n\n\n"
        "def evens(n):\n    return list(range(0, n, 2))\n\n\ndef middle(n):\n    return Both(n)\n",
        0.0,
        (TAMPER,),
    ),
}


# Each: the module under test, its tests, their ids, the cases.
AT_ITS_WORD = {
    "tolerance": ("num", CLOSE_TESTS, ["Numbers::test_half", "test_quarter"], CLOSE),
    "membership, order": ("answer", ANSWER_TESTS, ["Answers::test_evens", "Answers::test_middle"], ANSWERS),
}


@pytest.mark.parametrize(
    ("kind", "case"), [(kind, case) for kind, held in AT_ITS_WORD.items() for case in sorted(held[3])]
)
def test_a_value_that_takes_any_assertion_at_its_word_is_flagged(
    tmp_path: Path, kind: str, case: str, record_property: Any
) -> None:
    module, test_source, names, cases = AT_ITS_WORD[kind]
    source, score, flags = cases[case]
    assert scan.findings(source) == []
    (tmp_path / f"{module}.py").write_text(source)
    tests = {f"test_{module}.py": test_source}
    ids = [f"test_{module}.py::{name}" for name in names]
    result = verdict.run_and_judge(str(tmp_path), tests, ids, timeout_s=120, fractional=False)
    record_property("outcome", _outcome(result))
    assert result["score"] == score and tuple(result["flags"]) == flags, (case, result)
