"""Static tamper scan of candidate source: the routes by which code under test could forge its verdict.

Stdlib only (imported by graders in the sandbox and by the host for SWE-bench patches). ``findings``
lists what a file's text does that honest solutions to these tasks never need; ``new_findings`` counts
only what the candidate added (the pristine version of the same file is the baseline), so a repository
that already parses ``sys.argv`` in a CLI is not held against a patch. Python is read as tokens, so line
continuations, spacing and comments do not hide or invent a match; ``sys.exit``/``exit()``/``quit()``
inside ``if __name__ == "__main__":`` blocks are allowed. Other languages get a comment-stripped regex
scan for early exits.

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
OTHER_LANGUAGES = {
    "go": [(EARLY_EXIT, r"\bos\.Exit\b|\bsyscall\.Exit\b|\bruntime\.Goexit\b|\bunix\.Exit\b")],
    "rust": [
        (EARLY_EXIT, r"\bprocess::(exit|abort)\b|\blibc::(_exit|exit|abort|atexit)\b|\batexit\b"),
        ("argv/environment inspection", r"\benv::(args|args_os|var|vars|var_os)\b|--logfile"),
    ],
    "javascript": [(EARLY_EXIT, r"\bprocess\.(exit|abort|kill|reallyExit)\b|\bprocess\[")],
    "java": [(EARLY_EXIT, r"\bSystem\.exit\b|\bRuntime\.getRuntime\(\)\.(halt|exit)\b|\baddShutdownHook\b")],
    "cpp": [(EARLY_EXIT, r"(?<![\w.])(std::)?(_Exit|exit|quick_exit|abort|_exit|atexit|at_quick_exit)\s*\(")],
    # A manifest can replace the test harness or run a build script: what it adds beyond the stub is flagged.
    "cargo": [
        ("test harness or build change", r"(?m)^\s*(build|harness|links|proc-macro|test|autotests)\s*="),
        (
            "test harness or build change",
            r"\[\[?(lib|bin|test|bench|example|target|patch|replace|profile|workspace)\b",
        ),
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
        code = _strip_comments(text)
        rules = OTHER_LANGUAGES.get(language, [])
        return [f"{what}: {m.group(0).strip()}" for what, pat in rules for m in re.finditer(pat, code)]
    code, strings = _normalize(_outside_main(text))
    found = [f"{what}: {m.group(0)}" for what, pat in PYTHON_CODE for m in re.finditer(pat, code)]
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


def _strip_comments(text: str) -> str:
    return re.sub(r"//[^\n]*|/\*.*?\*/|#[^\n]*", "", text, flags=re.S)
