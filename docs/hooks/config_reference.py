"""MkDocs hook: the configuration reference, rendered from the pydantic models when the site is built.

A page line ``<!-- config-reference -->`` is replaced by one table per section of ``metasearch.config.Config``
(nested sections included) and one per registered scheduler, proposer and suite ``Config``: each key with its
type as the source writes it, its constraints, its default and the docstring written under the field. The
models are the only place these facts are written; a new key appears on the next build.
"""

from __future__ import annotations

import ast
import html
import inspect
import json
import re
import sys
import textwrap
from pathlib import Path
from typing import Any, get_args

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # document this checkout's code, whichever environment builds the site

from pydantic import BaseModel  # noqa: E402
from pydantic_core import PydanticUndefined  # noqa: E402

MARKER = "<!-- config-reference -->"
_CONSTRAINTS = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<", "min_length": "min length", "pattern": "pattern"}


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return markdown.replace(MARKER, render()) if MARKER in markdown else markdown


def render() -> str:
    from metasearch.config import PLUGIN_SECTIONS, Config

    out = ["## Sections", ""]
    for path, model in sections(Config, ""):
        out += table(path or "top level", model)
    out += ["## Plugin options", ""]
    out.append(
        "A pluggable section's keys other than `name` are checked against the chosen implementation's "
        "`Config`; `-o scheduler.alpha=0.5` sets one."
    )
    out.append("")
    for section, registry in PLUGIN_SECTIONS.items():
        for name in registry.names():
            cls = registry.resolve(name)
            module = inspect.getmodule(cls)
            summary = _first_paragraph((module.__doc__ if module else None) or "")
            out += table(f"{section}: {name}", cls.Config, summary)
    return "\n".join(out)


def sections(model: type[BaseModel], path: str) -> list[tuple[str, type[BaseModel]]]:
    """``model`` and every model nested in its fields, depth first, with their dotted key paths."""
    found = [(path, model)]
    for key, field in model.model_fields.items():
        nested = _nested_model(field.annotation)
        if nested is not None:
            found += sections(nested, f"{path}.{key}" if path else key)
    return found


def table(title: str, model: type[BaseModel], summary: str = "") -> list[str]:
    from metasearch.config import PLUGIN_SECTIONS, PluginSection

    docs, annotations = _field_source(model)
    lines = [f"### {title}", ""]
    if summary:
        lines += [_markdown(summary), ""]
    if not model.model_fields:
        return [*lines, "No options.", ""]
    lines += ["| key | type | default | description |", "|---|---|---|---|"]
    for key, field in model.model_fields.items():
        kind = annotations.get(key) or repr(field.annotation)
        limits = [
            f"{label} {getattr(meta, name)}"
            for meta in field.metadata
            for name, label in _CONSTRAINTS.items()
            if getattr(meta, name, None) is not None
        ]
        if limits:
            kind += " (" + ", ".join(limits) + ")"
        text = field.description or docs.get(key, "")
        if _nested_model(field.annotation) is not None:
            text = (text + " " if text else "") + "A section of its own, below."
        elif field.annotation is PluginSection:
            names = ", ".join(f"`{n}`" for n in PLUGIN_SECTIONS[key].names())
            text = f"`name`: one of {names} (or `module:Class`); the other keys are its options, below."
        lines.append(f"| `{key}` | {_code(kind)} | {_code(_default(field))} | {_markdown(text)} |")
    return [*lines, ""]


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    candidates = [annotation, *get_args(annotation)]
    for candidate in candidates:
        if inspect.isclass(candidate) and issubclass(candidate, BaseModel):
            from metasearch.config import PluginSection

            return None if candidate is PluginSection else candidate
    return None


def _field_source(model: type[BaseModel]) -> tuple[dict[str, str], dict[str, str]]:
    """Per field, the docstring under it and its annotation as written, from the class and its bases."""
    docs: dict[str, str] = {}
    annotations: dict[str, str] = {}
    for klass in reversed([k for k in model.__mro__ if issubclass(k, BaseModel) and k is not BaseModel]):
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        node = ast.parse(source).body[0]
        if not isinstance(node, ast.ClassDef):
            continue
        body = node.body
        for i, statement in enumerate(body):
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                name = statement.target.id
                annotations[name] = ast.unparse(statement.annotation)
                following = body[i + 1] if i + 1 < len(body) else None
                if (
                    isinstance(following, ast.Expr)
                    and isinstance(following.value, ast.Constant)
                    and isinstance(following.value.value, str)
                ):
                    docs[name] = inspect.cleandoc(following.value.value)
    return docs, annotations


def _default(field: Any) -> str:
    if field.default_factory is not None:
        value = field.default_factory()
        if isinstance(value, BaseModel):
            return "(section)" if type(value).__name__ != "PluginSection" else json.dumps(value.model_dump())
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if isinstance(value, Path):
        value = str(value)
    try:
        return json.dumps(value, ensure_ascii=False)
    except TypeError:
        return repr(value)


def _first_paragraph(doc: str) -> str:
    return inspect.cleandoc(doc).split("\n\n")[0].replace("\n", " ")


def _code(text: str) -> str:
    return "<code>" + html.escape(text).replace("|", "&#124;") + "</code>"


def _markdown(text: str) -> str:
    """A docstring as one table cell: reST literals as Markdown code, no line breaks, pipes escaped."""
    text = re.sub(r"``(.+?)``", r"`\1`", " ".join(text.split()))
    # Python-Markdown's tables leave pipes inside code spans alone; others would split the cell.
    pieces = text.split("`")
    return "`".join(p if i % 2 else p.replace("|", "\\|") for i, p in enumerate(pieces))
