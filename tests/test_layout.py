"""The package's shape: no module grows past 500 lines (split one by concept before it does)."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "metasearch"
MAX_LINES = 500


def test_no_module_is_over_500_lines() -> None:
    sizes = {path: len(path.read_text().splitlines()) for path in PACKAGE.rglob("*.py")}
    assert sizes, f"no modules found under {PACKAGE}"
    over = sorted(f"{path.relative_to(PACKAGE.parent)}: {n}" for path, n in sizes.items() if n > MAX_LINES)
    assert not over, f"modules over {MAX_LINES} lines (split them by concept): {over}"
