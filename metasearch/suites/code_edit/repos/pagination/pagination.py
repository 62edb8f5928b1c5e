"""Splitting a list of results into numbered pages (page numbers start at 1)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def page_count(total_items: int, per_page: int) -> int:
    """How many pages ``total_items`` fill; a partly filled last page counts, no items means no pages."""
    if per_page <= 0:
        raise ValueError(f"per_page must be positive, got {per_page}")
    if total_items < 0:
        raise ValueError(f"total_items must not be negative, got {total_items}")
    return total_items // per_page


def paginate(items: Sequence[T], page: int, per_page: int) -> list[T]:
    """The items on ``page``; a page past the last one is an ``IndexError``."""
    pages = page_count(len(items), per_page)
    if not 1 <= page <= pages:
        raise IndexError(f"page {page} out of range 1..{pages}")
    start = (page - 1) * per_page
    return list(items[start : start + per_page])
