"""Static tamper scan of candidate source: the routes by which code under test could forge its verdict.

Stdlib only (imported by graders in the sandbox and by the host for SWE-bench patches). ``findings``
lists what a file's text does that honest solutions to these tasks never need; ``new_findings`` counts
only what the candidate added (the pristine version of the same file is the baseline), so a repository
that already parses ``sys.argv`` in a CLI is not held against a patch. Python is read as tokens, so line
continuations, spacing and comments do not hide or invent a match; ``sys.exit``/``exit()``/``quit()``
inside ``if __name__ == "__main__":`` blocks are allowed. Other languages get a regex scan of the code with
comments stripped (string literals kept whole) for early exits, the process, its files and environment,
the test framework's parts, and Go's compiler directives. A route is found under another name too: the
code is read as its compiler reads names (Java's and JavaScript's ``\\u`` escapes, Rust's ``r#``), blanks
around ``.``/``::`` and Java's method references (``System::exit``) are normalised, Go imports must be of
pure computation (``GO_PURE``: an alias or dot import of ``os`` hides nothing), Rust's forbidden modules
are found anywhere in a path or use tree, C++'s exits are found as references (``&std::exit``) and
through token pasting, and JavaScript's ``process``, ``require`` and ``import()`` anywhere but in a plain
call with one literal. C++ may neither put a symbol in another's place when the tests are linked (C
linkage, mangled names, aliases, weak symbols: ``catch2.replaced_symbols`` checks the object files too)
nor rename by the preprocessor a name the tests or Catch use. Every language's equality definitions are read
too: one that never looks at what it compares (``__eq__``, Rust ``eq``, Java ``equals``, C++
``operator==``; naming it only to silence a warning, ``(void)other`` or ``let _ = other``, is not
looking) or whose every return is "equal" (``return true``, ``... || true``) makes a value that passes
every equality assertion.

A scan is a tripwire, not a proof: code built from strings at run time (``getattr(m, "_e" + "xit")``)
evades it, which is why the dynamic checks in ``verdict.py`` exist; the obvious building blocks of such
code (``__import__``, ``importlib``, ``exec``, ``eval``, ``compile``, ``globals()``) are findings too.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections import Counter

from .equality import equality_findings, python_equality_findings

# (what, pattern) on the normalized code: tokens joined, strings replaced by "S", no comments.
PYTHON_CODE = [
    ("early exit", r"\bos\._exit\b|\b_exit\b|\bos\.(abort|kill|killpg)\b|\bimport atexit\b|\batexit\."),
    ("early exit", r"\bsignal\.(signal|alarm|setitimer|raise_signal|pthread_kill)\b|\bimport signal\b"),
    ("early exit", r"\bfrom (signal|atexit) import\b"),
    (
        "early exit outside __main__",
        r"\bsys\.exit\b|(?<![\w.])(?<!def )(exit|quit)\(|\bfrom sys import\b[^;]*\bexit\b",
    ),
    ("argv/environment inspection", r"\bargv\b|\benviron\b|\bgetenv\b|\bos\.environ\b"),
    ("runner import", r"\b(import|from) (pytest|_pytest|unittest|pluggy|doctest|__main__)\b"),
    ("interpreter patching", r"\bsys\.modules\b|\b__main__\b|\bbuiltins\b|\b__builtins__\b"),
    ("interpreter patching", r"\b(settrace|setprofile|_getframe|get_objects|get_referrers|get_referents)\b"),
    ("interpreter patching", r"\binspect\.(stack|currentframe|getouterframes)\b|\bimport (ctypes|gc)\b"),
    ("interpreter patching", r"\bfrom (ctypes|gc|inspect|sys|builtins) import\b|\bctypes\b"),
    ("interpreter patching", r"\b__(import|globals|code|subclasses|closure)__\b|\bimportlib\b"),
    ("interpreter patching", r"(?<![\w.])(exec|eval|compile|globals)\("),
    ("file descriptor games", r"\bos\.(dup2?|write|open|fdopen|close|closerange|pipe|fork|setsid)\b"),
    ("file descriptor games", r"\bimport fcntl\b|\bfcntl\.|\bos\.(system|popen|exec\w*|spawn\w*)\b"),
    ("file descriptor games", r"\bimport (subprocess|multiprocessing|pty)\b|\bsubprocess\."),
]
# (what, pattern) on the text of string literals: paths and names of the grader's channel and files.
PYTHON_STRINGS = [
    ("report or argv inspection", r"junit|PYTEST_|--junitxml|/dev/fd|/proc"),
    ("reading grader files", r"hidden_tests|/grader|/exercise|/testrun|\.meta\b|conftest|_test\.py"),
]
EARLY_EXIT = "early exit"
OUTPUT = "output stream write"
ACCESS = "file, process or environment access"
PATCHING = "runtime or test-runner patching"
GRADER_FILES = "reading grader files"
RENAMING = "renaming by the preprocessor"
MEMORY = "memory-unsafe code"
LINKING = "link-time symbol replacement"
# Compiled and JavaScript solutions: each pattern is a route by which code under test could end the run
# early, reach the process, its files (the tests, the reports) or its environment, redirect the streams a
# report is written to, or replace the test framework's parts. Printing alone is not among them: every
# language's run must exit 0 when its reports say all passed, and a forged line cannot change the exit
# status. None is needed by any example solution of the polyglot benchmark (``metasearch bench polyglot
# --scan`` checks that on a checkout).
_NODE_MODULES = (
    "fs|fs/promises|child_process|vm|module|v8|inspector|cluster|process|net|dgram|http|https|http2|repl|tls"
    "|async_hooks|perf_hooks|trace_events|wasi|os|worker_threads|diagnostics_channel|dns|jest\\S*|@jest/\\S+"
    "|expect"
)
# The Go packages a solution may import: pure computation. Any other import (os, flag, testing, runtime,
# syscall, unsafe, embed, cgo's "C" ...) reaches the process, its files or the test binary, under whatever
# name it is imported as (an alias or a dot import hides nothing from an import path).
GO_PURE = (
    r"bufio|bytes|cmp|container/(heap|list|ring)|encoding/(json|hex|base32|base64|binary|csv)|errors|fmt"
    r"|hash(/(adler32|crc32|crc64|fnv|maphash))?|io|iter|maps|math(/(big|bits|cmplx|rand(/v2)?))?|reflect"
    r"|regexp(/syntax)?|slices|sort|strconv|strings|sync(/atomic)?|text/(scanner|tabwriter)|time|unicode"
    r"|unicode/(utf8|utf16)|crypto/(md5|sha1|sha256|sha512|rand)"
)
# Rust modules that reach the process, its files, the system or the compiler's internals, named anywhere
# in a path or a use tree (``use std::{process as p}``, ``use std::process::*``, ``r#process``).
RUST_MODULES = r"process|env|fs|net|os|ffi|arch|intrinsics|backtrace|panic"
OTHER_LANGUAGES: dict[str, list[tuple[str, str]]] = {
    "go": [
        (
            EARLY_EXIT,
            r"\bos\.Exit\b|\bsyscall\.Exit\b|\bruntime\.Goexit\b|\bunix\.Exit\b|\blog\.(Fatal|Panic)\w*",
        ),
        (
            ACCESS,
            r"\bos\.(OpenFile|Create|WriteFile|ReadDir|Remove|RemoveAll|Rename|Chdir|Getwd|Args|Getenv|LookupEnv"
            r"|Environ|Setenv|Pipe|StartProcess|FindProcess|Getpid|Getppid|DirFS|NewFile|Stdout|Stderr)\b"
            r"|\bfilepath\.(Walk|WalkDir|Glob)\b",
        ),
        (PATCHING, r"\bruntime\.(Callers?|FuncForPC|Stack|Breakpoint)\b"),
    ],
    "rust": [
        (EARLY_EXIT, r"\bprocess::(exit|abort)\b|\blibc::(_exit|exit|abort|atexit)\b|\batexit\b"),
        (
            "argv/environment inspection",
            r"\benv::(args|args_os|var|vars|var_os)\b|--logfile|\b(option_)?env!",
        ),
        (
            ACCESS,
            r"\bfs::(write|remove\w*|rename|copy|create_dir\w*|read_dir|set_permissions|hard_link|soft_link"
            r"|symlink\w*)\b|\bFile::create\b|\bOpenOptions\b|\bstd::(net|os)\b|\bprocess::Command\b|\bCommand::new\b"
            r"|\b(libc|nix|rustix|errno)\b|\bextern\s+\"|\b(global_)?asm!|\b(stdout|stderr)\b"
            rf"|\b({RUST_MODULES})::|::\{{?\s*({RUST_MODULES})\b",
        ),
        (GRADER_FILES, r"\binclude(_str|_bytes)?!|#\s*\[\s*path\b"),
        # Raw memory: the test runner shares the process, and its results, its state and its exit status
        # are bytes that unsafe code can rewrite (a global allocator sees every one of them made).
        (MEMORY, r"\bunsafe\b"),
        (
            PATCHING,
            r"#\s*\[\s*(unsafe\s*\(\s*)?(no_mangle|export_name|link_section|link|link_name|linkage|used)\b"
            r"|#!\s*\[\s*(feature|no_std|no_main|test_runner|reexport_test_harness_main)\b"
            r"|macro_rules!\s*(assert\w*|debug_assert\w*|panic|unreachable|unimplemented|todo|matches)\b"
            r"|\bpanic::(set_hook|take_hook|always_abort)\b|\$(?!crate\b)\w+\s*::",
        ),
    ],
    "javascript": [
        (EARLY_EXIT, r"\bprocess\.(exit|abort|kill|reallyExit)\b|\bprocess\["),
        (
            ACCESS,
            r"(?<![\w.$])process\s*\.\s*(?!(exit|abort|kill|reallyExit)\b)\w+"
            r"|(?<![\w.$])process\b(?!\s*[.\[:(])|\bgetBuiltinModule\b"
            r"|\brequire\b(?!\s*\(\s*[\"'][^\"'`$]*[\"']\s*\))|\bimport\s*\((?!\s*[\"'][^\"'`$]*[\"']\s*\))"
            r"|(?<![\w.$])module\s*\.\s*(?!exports\b)\w+|(?<![\w.$])module\s*\["
            rf"|\b(require\s*\(|from|import)\s*[\"'`](node:)?({_NODE_MODULES})[\"'`/]",
        ),
        (
            PATCHING,
            r"\b(globalThis|global|window)\b|\b(eval|Function)\s*\(|\bnew\s+Function\b|\bProxy\b|__proto__"
            r"|\.\s*constructor\b|\[\s*[\"'`][^\]\"'`]*[\"'`]\s*\+"
            r"|\b(Object|Reflect)\.(defineProperty|defineProperties|setPrototypeOf|assign\s*\(\s*(Object|Array"
            r"|String|Number|Promise|Function|Math|JSON)\b)|\b(Object|Array|String|Number|Boolean|Promise|Function"
            r"|Symbol|RegExp|Map|Set|Date|Error)\.prototype\.\w+\s*=(?!=)|\basymmetricMatch\b|\bexpect\b|\bjest\b"
            r"|(?<![\w.$])(describe|test|it|beforeAll|beforeEach|afterAll|afterEach|xtest)\s*\.\s*\w+\s*=(?!=)",
        ),
    ],
    "java": [
        (
            EARLY_EXIT,
            r"\bSystem\.exit\b|\bRuntime\.getRuntime\(\)\.(halt|exit)\b|\baddShutdownHook\b"
            r"|\bimport\s+static\s+java\.lang\.(System|Runtime|ProcessHandle|Thread)\b",
        ),
        (OUTPUT, r"\bSystem\.(setOut|setErr|console)\b|\bFileDescriptor\b"),
        (
            ACCESS,
            r"\bjava\.nio\.file\b|\b(Files|Paths|Path)\.\w|\bnew\s+(File|FileWriter|FileOutputStream|FileReader"
            r"|FileInputStream|RandomAccessFile|PrintStream|ProcessBuilder)\b|\bRuntime\.getRuntime\b"
            r"|\bProcessHandle\b|\bSystem\.(getenv|getProperty|setProperty|getProperties|load|loadLibrary)\b"
            r"|\bjava\.(io|nio|net|rmi|sql|beans)\b|\bjava\.util\.(logging|jar|zip|prefs|spi)\b|\bjavax\.\w"
            r"|\bcom\.sun\.|\bnew\s+(java\.util\.)?Formatter\s*\(\s*[^)\s]",
        ),
        (
            PATCHING,
            r"\bjava\.lang\.(reflect(?!\.Array\b)|instrument|invoke)\b|\b(setAccessible|getDeclaredFields?|getDeclaredMethods?"
            r"|getDeclaredConstructors?|forName|getClassLoader|defineClass|getStackTrace|getMethods?|getFields?"
            r"|getConstructors?|getRecordComponents|loadClass|ClassLoader|ModuleLayer|(?<!Array\.)newInstance)\b"
            r"|\.\s*invoke\s*\(|\bsun\.misc\b"
            r"|\bjdk\.internal\b|\bMethodHandles\b|\bStackWalker\b|\borg\.(junit|opentest4j|assertj|apiguardian)\b",
        ),
    ],
    "cpp": [
        (
            EARLY_EXIT,
            r"(?<![\w.>])(std::|::)?(_Exit|exit|quick_exit|abort|_exit|atexit|at_quick_exit)\b(?!\s*[.:])"
            r"|\b__builtin_\w*(exit|Exit|abort|trap)\b",
        ),
        (
            OUTPUT,
            r"(?<![\w.])(std::)?(cout|cerr|clog|stdout|stderr)\b"
            r"|(?<![\w.])(std::)?(printf|puts|fputs|fprintf|fwrite|putchar|perror|dprintf|vprintf)\s*\("
            r"|(?<![\w.>)\]])::\s*write\s*\(",
        ),
        (
            ACCESS,
            r"(?<![\w.])(std::)?(basic_)?(ofstream|ifstream|fstream|filebuf|filesystem)\b"
            r"|(?<![\w.>])(std::|::)?(fopen|freopen|dup2|fork|vfork|exec[lv]\w*|system|popen|syscall|ptrace|getenv"
            r"|setenv|putenv|sigaction|dlopen|dlsym|mmap|mprotect)\b(?!\s*[.:])"
            r"|(?<![\w.>)\]])::\s*(open|creat|dup|pipe|kill|raise|signal)\s*\("
            r"|#\s*include\s*<(unistd\.h|fcntl\.h|sys/[\w/]+\.h|signal\.h|csignal|dlfcn\.h|fstream|filesystem"
            r"|spawn\.h)>|\b(__asm__|asm)\b",
        ),
        (
            PATCHING,
            r"\bCatch::|\bnamespace\s+Catch\b|#\s*include\s*[\"<]catch|##",
        ),
        # A name the tests or the framework use, renamed by the preprocessor before they are compiled: a
        # macro whose name has a lower-case letter (macros are upper case; ``Catch``, ``std``, ``true`` are
        # not), or one of the framework's (its macros and include guard).
        (
            RENAMING,
            r"#\s*(define|undef)\s+(\w*[a-z]\w*|\w*CATCH\w*|TWOBLUECUBES\w*|TEST\w*|REQUIRE\w*|CHECK\w*"
            r"|SECTION\w*|SCENARIO\w*|GIVEN|WHEN|THEN|AND_\w+|INFO|UNSCOPED_INFO|CAPTURE|WARN|FAIL\w*|SUCCEED"
            r"|STATIC_REQUIRE\w*)\b|#\s*pragma\s+(push_macro|pop_macro)\b",
        ),
        # A symbol that takes another's place when the test executable is linked: C linkage carries any
        # name the linker sees (libc's, or the mangled name of the framework's comparison that the tests'
        # own object file holds only weakly), and so do aliases, weak symbols and sections.
        (
            LINKING,
            r"\bextern\s*\"C\"|\b_Z\w+|\b(gnu|clang)\s*::|#\s*pragma\s+(weak|redefine_extname|GCC\s+visibility)\b"
            r"|__attribute__\s*\(\s*\((?:[^()]|\([^()]*\))*\b(weak|weakref|alias|ifunc|section|visibility|symver"
            r"|constructor|destructor|init_priority|used|retain|externally_visible|cleanup)\b",
        ),
    ],
    # A manifest can replace the test harness or run a build script: what it adds beyond the stub is flagged.
    "cargo": [
        ("test harness or build change", r"(?m)^\s*(build|harness|links|proc-macro|test|autotests)\s*="),
        (
            "test harness or build change",
            r"\[\[?(lib|bin|test|bench|example|target|patch|replace|profile|workspace)\b",
        ),
        ("system crate", r"(?m)^\s*\"?(libc|nix|rustix|errno|memmap2?|tempfile|walkdir|glob)\"?\s*="),
    ],
}
LANGUAGE_OF_SUFFIX = {
    ".py": "python",
    ".rs": "rust",
    ".go": "go",
    ".js": "javascript",
    ".mjs": "javascript",
    ".java": "java",
    ".cpp": "cpp",
    ".cc": "cpp",
    ".h": "cpp",
    ".hpp": "cpp",
}


def language_of(path: str) -> str | None:
    """The scan language of a solution file, by name; None for files no scan reads."""
    name = path.rsplit("/", 1)[-1]
    if name == "Cargo.toml":
        return "cargo"
    return LANGUAGE_OF_SUFFIX.get("." + name.rsplit(".", 1)[-1]) if "." in name else None


def findings(text: str, language: str = "python") -> list[str]:
    """Every finding in ``text``, as ``"what: matched text"`` (repeated once per occurrence)."""
    if language != "python":
        text = _unescape(text, language)
        stripped = _strip_comments(text, language)
        code = _joined(stripped, language)
        rules = OTHER_LANGUAGES.get(language, [])
        found = [f"{what}: {m.group(0).strip()}" for what, pat in rules for m in re.finditer(pat, code)]
        if language == "go":  # compiler directives are comments: read them before the comments go
            found += [f"{PATCHING}: {m.group(0)}" for m in re.finditer(r"//go:(linkname|cgo_\w+)\b", text)]
            found += [
                f"{ACCESS}: import {path}"
                for path in _go_imports(stripped)
                if not re.fullmatch(GO_PURE, path)
            ]
        if language == "rust":  # a use tree names its modules anywhere inside its braces
            for use in re.finditer(r"\buse\b[^;]*;", code):
                found += [
                    f"{ACCESS}: use {m.group(0)}" for m in re.finditer(rf"\b({RUST_MODULES})\b", use.group(0))
                ]
        return found + equality_findings(code, language)
    code, strings = _normalize(_outside_main(text))
    found = [f"{what}: {m.group(0)}" for what, pat in PYTHON_CODE for m in re.finditer(pat, code)]
    found += python_equality_findings(text)
    for literal in strings:
        found += [f"{what}: {m.group(0)}" for what, pat in PYTHON_STRINGS for m in re.finditer(pat, literal)]
    return found


def new_findings(before: str | None, after: str, language: str = "python") -> list[str]:
    """Findings of ``after`` beyond those already in ``before`` (the pristine file, or None if new)."""
    extra = Counter(findings(after, language)) - Counter(findings(before or "", language))
    return sorted(extra)


def patch_findings(diff: str, extra_strings: tuple[str, ...] = ()) -> list[str]:
    """Findings in what a unified diff adds to Python files, beyond what it removes from them.

    For patches whose pristine files are not at hand (SWE-bench): each file's added and removed lines are
    read as flat code (indentation dropped), so ``if __name__ == "__main__":`` blocks are not recognised
    here. ``extra_strings`` are text fragments that no added string literal may contain (e.g. hidden test
    names, result markers a log parser trusts).
    """
    added: dict[str, list[str]] = {}
    removed: dict[str, list[str]] = {}
    current = ""
    for line in diff.splitlines():
        if line.startswith("+++ "):
            current = line[4:].split("\t", 1)[0].strip()
            current = current[2:] if current.startswith("b/") else current
        elif line.startswith("--- ") or line.startswith("diff --git "):
            continue
        elif current.endswith(".py") and line.startswith("+"):
            added.setdefault(current, []).append(line[1:].strip())
        elif current.endswith(".py") and line.startswith("-"):
            removed.setdefault(current, []).append(line[1:].strip())
    found = []
    for path, lines in added.items():
        after = "\n".join(lines) + "\n"
        before = "\n".join(removed.get(path, [])) + "\n"
        found += [f"{path}: {f}" for f in new_findings(before, after)]
        literals = _normalize(after)[1]
        found += [f"{path}: result line: {x}" for x in extra_strings if any(x in lit for lit in literals)]
    return found


def _normalize(text: str) -> tuple[str, list[str]]:
    """Code tokens joined (one space between words), string literals as ``S``; and the literals."""
    parts: list[str] = []
    strings: list[str] = []
    previous = ""
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT):
                continue
            if tok.type == tokenize.STRING or tok.type in _FSTRING:
                strings.append(tok.string)
                value = "S"
            elif tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
                value = ";"
            else:
                value = tok.string
            if value and previous and _wordy(previous[-1]) and _wordy(value[0]):
                parts.append(" ")
            parts.append(value)
            previous = value or previous
    except (tokenize.TokenError, SyntaxError, IndentationError):
        # A fragment (an unclosed bracket, a patch hunk): keep the tokens read, and read the rest raw.
        raw = re.sub(r"#.*", "", text)
        return "".join(parts) + ";" + raw, strings + re.findall(r"[\"'][^\"'\n]*[\"']", text)
    return "".join(parts), strings


def _wordy(char: str) -> bool:
    return char.isalnum() or char == "_"


_FSTRING = {
    getattr(tokenize, n) for n in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END") if hasattr(tokenize, n)
}


def _outside_main(text: str) -> str:
    """``text`` with the bodies of ``if __name__ == "__main__":`` blocks blanked (lines kept)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return text
    lines = text.splitlines(keepends=True)
    for node in tree.body:
        if isinstance(node, ast.If) and _is_main_guard(node.test) and node.end_lineno:
            for n in range(node.lineno - 1, node.end_lineno):
                lines[n] = "\n"
    return "".join(lines)


def _is_main_guard(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


# string and character literals are kept whole (a "//" inside one starts no comment); comments go
_C_FAMILY_TOKENS = re.compile(
    r"\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n]){1,8}'|`(?:\\.|[^`\\])*`|(//[^\n]*|/\*.*?\*/)", re.S
)


def _unescape(text: str, language: str) -> str:
    """The text as the compiler reads its names. Java turns every ``\\uXXXX`` (any number of ``u``) into its
    character before it reads anything else; JavaScript names may be spelled with ``\\uXXXX`` and
    ``\\u{X}``; Rust's raw identifiers (``r#exit``) are the plain names."""
    if language == "java":
        return re.sub(r"\\u+([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)
    if language == "javascript":

        def name_char(m: re.Match[str]) -> str:
            char = chr(int(m.group(1) or m.group(2), 16))
            return char if char.isalnum() or char in "_$" else m.group(0)

        return re.sub(r"\\u(?:([0-9a-fA-F]{4})|\{([0-9a-fA-F]{1,6})\})", name_char, text)
    if language == "rust":
        return re.sub(r"\br#(?=[A-Za-z_])", "", text)
    return text


def _joined(code: str, language: str) -> str:
    """Selectors written as the rules expect them: no blanks around ``.`` and ``::`` (``os . Exit``), Java's
    method references as calls' names (``System::exit``), JavaScript's optional chaining as a plain
    selector (``process?.exit``)."""
    code = re.sub(r"\s*(::|(?<![.\d])\.(?![.\d]))\s*", r"\1", code)
    if language == "java":
        code = code.replace("::", ".")
    if language == "javascript":
        code = code.replace("?.", ".")
    return code


def _strip_comments(text: str, language: str) -> str:
    if language == "cargo":  # TOML
        return re.sub(r"#[^\n]*", "", text)
    return _C_FAMILY_TOKENS.sub(lambda m: " " if m.group(1) else m.group(0), text)


def _go_imports(code: str) -> list[str]:
    """The package paths a Go file imports (single imports and import blocks, aliases dropped)."""
    specs = re.findall(r"\bimport\s*\(([^)]*)\)", code) + re.findall(
        r"\bimport\s+((?:[\w.]+\s+)?\"[^\"]*\")", code
    )
    return [path for spec in specs for path in re.findall(r"\"([^\"]*)\"", spec)]
