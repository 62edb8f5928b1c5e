"""Benchmark results as a terminal table: one row per result, numbers to three decimals."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.table import Table


def print_table(rows: list[dict[str, Any]], columns: list[str], title: str | None = None) -> None:
    table = Table(*columns, title=title)
    for r in rows:
        table.add_row(*[_fmt(r.get(c)) for c in columns])
    Console(width=220).print(table)


def _fmt(x: Any) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if isinstance(x, list):
        return "[" + ", ".join(f"{v:+.3f}" for v in x) + "]"
    return f"{x:.3f}" if isinstance(x, float) else str(x)
