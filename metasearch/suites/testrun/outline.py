"""What a test file's source binds, read from its pristine text: its module body and its class bodies.

``shape.Shape`` holds the test modules and classes to it at the first check. Stdlib only, loaded by
``harness.py`` as ``_ms_outline``.
"""

from __future__ import annotations

import ast

DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


class Body:
    """What one class statement's body binds (or a module's top level)."""

    def __init__(self, decorated: bool = False) -> None:
        self.defs: set[str] = set()
        self.classes: set[str] = set()
        self.names: set[str] = set()  # every name the body binds, by any statement
        self.imports: dict[str, tuple[str, str | None]] = {}  # name -> (module, attribute or None)
        self.decorated = decorated  # a class decorator may give the class names its body does not
        self.wrapped: set[str] = set()  # defs with decorators (their value may be a wrapper)
        self.twice: set[str] = set()
        self.star = False  # ``from m import *`` binds names the source does not show


class Outline:
    """A test file's module body and its class bodies, by qualified name."""

    def __init__(self, source: str) -> None:
        self.top = Body()
        self.classes: dict[str, Body] = {}
        self._walk(ast.parse(source), self.top, "")

    def _walk(self, node: ast.AST, body: Body, prefix: str) -> None:
        for stmt in getattr(node, "body", []):
            self._statement(stmt, body, prefix, unconditional=True)

    def _statement(self, stmt: ast.stmt, body: Body, prefix: str, *, unconditional: bool) -> None:
        bound: list[str] = []
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            bound.append(stmt.name)
            if unconditional:
                body.defs.add(stmt.name)
            if stmt.decorator_list:
                body.wrapped.add(stmt.name)
            self._nested(stmt, f"{prefix}{stmt.name}.<locals>.")
        elif isinstance(stmt, ast.ClassDef):
            bound.append(stmt.name)
            if unconditional:
                body.classes.add(stmt.name)
            inner = Body(decorated=bool(stmt.decorator_list))
            self.classes[f"{prefix}{stmt.name}"] = inner
            self._walk(stmt, inner, f"{prefix}{stmt.name}.")
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                target: tuple[str, str | None]
                if isinstance(stmt, ast.Import):
                    name = alias.asname or alias.name.split(".")[0]
                    target = (alias.name if alias.asname else alias.name.split(".")[0], None)
                else:
                    name = alias.asname or alias.name
                    target = (stmt.module or "", alias.name)
                bound.append(name)
                body.star = body.star or alias.name == "*"
                if unconditional and not getattr(stmt, "level", 0) and alias.name != "*":
                    body.imports[name] = target
        else:
            for child in ast.walk(stmt):
                if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                    bound.append(child.id)
                elif isinstance(child, (*DEFINITIONS, ast.Import, ast.ImportFrom)):
                    self._statement(child, body, prefix, unconditional=False)
        for name in bound:
            (body.twice if name in body.names else body.names).add(name)

    def _nested(self, func: ast.AST, prefix: str) -> None:
        """Classes a function body makes (a test that defines a class inside itself)."""
        for child in ast.walk(func):
            if isinstance(child, ast.ClassDef) and child is not func:
                qualname = f"{prefix}{child.name}"
                if qualname not in self.classes:
                    inner = Body(decorated=bool(child.decorator_list))
                    self.classes[qualname] = inner
                    self._walk(child, inner, f"{qualname}.")
