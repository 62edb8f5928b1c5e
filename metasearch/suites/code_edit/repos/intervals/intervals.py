"""Closed integer intervals ``(start, end)``, as used for booked time slots."""

from __future__ import annotations

Interval = tuple[int, int]


def merge(intervals: list[Interval]) -> list[Interval]:
    """Merge overlapping or touching intervals; the result is sorted by start and disjoint.

    The input may come in any order. ``end < start`` is an error.
    """
    for start, end in intervals:
        if end < start:
            raise ValueError(f"interval ({start}, {end}) ends before it starts")
    merged: list[Interval] = []
    for start, end in intervals:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def total_length(intervals: list[Interval]) -> int:
    """Length covered by the union of ``intervals``: overlaps count once."""
    return sum(end - start for start, end in merge(intervals))
