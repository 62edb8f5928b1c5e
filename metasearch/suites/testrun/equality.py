"""The static scan's reading of equality definitions (``scan.py``): comparisons that ignore what they compare.

An always-equal value passes every equality assertion. A definition is a finding when it never reads the
operand it compares against (naming it only to silence a warning, ``(void)other`` or ``let _ = other``, is
not reading it), leaves a parameter unnamed, or returns "equal" from every return (``return true``,
``... || true``): Python ``__eq__``/``__ne__`` (``python_equality_findings``; also one written as a string,
for a class made at run time), Rust ``eq``/``ne``, Java ``equals``, C++ ``operator==``/``!=``/``<=>``
(``equality_findings``). Stdlib only.
"""

from __future__ import annotations

import ast
import re

ALWAYS_EQUAL = "always-equal comparison"
_EQUALITY_HEADS = {
    # (pattern of a definition's head up to its parameter list's end, group of the compared operand)
    "rust": r"\bfn\s+(eq|ne)\s*(<[^>{]*>)?\s*\(\s*&\s*(mut\s+)?self\s*,\s*(?P<operand>\w+)\s*:[^{;]*",
    "java": r"\bboolean\s+equals\s*\(\s*(final\s+)?[\w.<>?\[\]\s]+?\s(?P<operand>\w+)\s*\)[^{;]*",
    "cpp": r"\boperator\s*(==|!=|<=>)\s*\((?P<params>[^()]*)\)[^{;]*",
}


def equality_findings(code: str, language: str) -> list[str]:
    """Equality definitions (Rust ``eq``/``ne``, Java ``equals``, C++ ``operator==``/``!=``/``<=>``) whose
    body never reads what it compares against, or that leave a parameter unnamed."""
    pattern = _EQUALITY_HEADS.get(language)
    if not pattern:
        return []
    found = []
    for m in re.finditer(pattern, code):
        body = _braced_body(code, m.end())
        if body is None:  # a declaration, or = default / = delete
            continue
        if language == "cpp":
            names = [_param_name(p) for p in _split_params(m.group("params")) if p.strip()]
        else:
            names = [m.group("operand")]
        if any(n is None or n == "_" or not _reads(body, n) for n in names) or _constant(
            body, language, m.group(0)
        ):
            found.append(f"{ALWAYS_EQUAL}: {' '.join(m.group(0).split())[:60]}")
    return found


# Statements that name a value without reading it: how compilers are told that a parameter is unused.
_NOT_A_READ = (
    r"\(\s*void\s*\)\s*\(?\s*{n}\s*\)?|static_cast\s*<\s*void\s*>\s*\(\s*{n}\s*\)|std::ignore\s*=\s*{n}\b"
    r"|\blet\s+_\s*(:[^=;]*)?=\s*&?\s*{n}\s*;|(?<![\w.])_\s*=\s*&?\s*{n}\s*;|\bdrop\s*\(\s*&?\s*{n}\s*\)"
    r"|(?:^|(?<=[;{{}}]))\s*[&*]?{n}\s*;|\bObjects\.requireNonNull\s*\(\s*{n}\s*\)\s*;"
)
_TRUE = {"true", "!false", "1", "(true)", "!!true", "!0"}


def _reads(body: str, name: str) -> bool:
    """Whether ``body`` reads ``name`` beyond the idioms that only silence an unused-parameter warning."""
    n = re.escape(name)
    return re.search(rf"\b{n}\b", re.sub(_NOT_A_READ.format(n=n), " ", body)) is not None


def _constant(body: str, language: str, head: str) -> bool:
    """Whether every value an equality definition returns is the literal "equal" (``true`` from ``==``,
    ``eq``, ``equals``; ``false`` from ``!=``, ``ne``), however much else its body reads."""
    returns = [r.strip() for r in re.findall(r"\breturn\b([^;]*);", body)]
    if language == "rust":  # the tail expression is a return value too
        tail = re.split(r"[;}]", body.rstrip())[-1].strip()
        returns += [tail] if tail else []
    if not returns:
        return False
    negated = re.search(r"!=|\bne\b", head) is not None
    equal = {"false", "!true", "0", "(false)", "!1"} if negated else _TRUE
    anyway = (
        r"\|\|\s*\(?\s*(true|1)\s*\)?\s*$|^\(?\s*(true|1)\s*\|\|"  # ... || true: true whatever came before
    )
    return all(" ".join(r.split()) in equal or (not negated and re.search(anyway, r)) for r in returns)


def _braced_body(code: str, at: int) -> str | None:
    """The text between the ``{`` that opens at ``at`` (after blanks) and its matching ``}``."""
    rest = code[at:]
    lead = len(rest) - len(rest.lstrip())
    if not rest[lead:].startswith("{"):
        return None
    depth, start = 0, at + lead
    for i in range(start, len(code)):
        depth += {"{": 1, "}": -1}.get(code[i], 0)
        if depth == 0:
            return code[start + 1 : i]
    return code[start + 1 :]


def _split_params(params: str) -> list[str]:
    """A C++ parameter list split at its top-level commas (template arguments hold commas too)."""
    parts, depth, current = [], 0, ""
    for char in params:
        depth += {"<": 1, ">": -1, "(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current]


def _param_name(param: str) -> str | None:
    """The name a C++ parameter declares, or None when it is unnamed (``const T&``)."""
    words = re.findall(r"[A-Za-z_]\w*|[&*>]", param.split("=", 1)[0])
    if len(words) < 2 or not re.fullmatch(r"[A-Za-z_]\w*", words[-1]):
        return None
    if words[-1] in {"const", "volatile", "int", "char", "bool", "long", "short", "double", "float", "auto"}:
        return None
    return words[-1]


def python_equality_findings(text: str) -> list[str]:
    """``__eq__``/``__ne__`` defined (or assigned a lambda) without reading the compared operand, and the
    names written as strings (a class made at run time: ``type("A", (), {"__eq__": ...})``)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):  # a fragment (patch lines): each definition up to the next one
        found = []
        for m in re.finditer(
            r"\bdef\s+(__(?:eq|ne)__)\s*\(\s*\w+\s*(?:,\s*(\w+))?|\b(__(?:eq|ne)__)\s*=", text
        ):
            rest = text[m.end() :]
            until = rest[: m2.start()] if (m2 := re.search(r"\bdef\s", rest)) else rest
            if m.group(3) or not m.group(2) or not re.search(rf"\b{m.group(2)}\b", until):
                found.append(f"{ALWAYS_EQUAL}: {m.group(1) or m.group(3)}")
        return found
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in ("__eq__", "__ne__"):
            found.append(f"{ALWAYS_EQUAL}: {node.value!r}")
        function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | None = None
        name = ""
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in ("__eq__", "__ne__"):
            function, name = node, node.name
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
            targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
            if any(t in ("__eq__", "__ne__") for t in targets):
                function, name = node.value, targets[0]
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in ("__eq__", "__ne__") for t in node.targets
        ):
            found.append(
                f"{ALWAYS_EQUAL}: {'/'.join(t.id for t in node.targets if isinstance(t, ast.Name))} assigned"
            )
            continue
        if function is None:
            continue
        params = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
        statements: list[ast.AST] = [*function.body] if isinstance(function.body, list) else [function.body]
        used = {n.id for stmt in statements for n in ast.walk(stmt) if isinstance(n, ast.Name)}
        if len(params) < 2 or params[1] not in used:
            found.append(f"{ALWAYS_EQUAL}: {name}")
    return found
