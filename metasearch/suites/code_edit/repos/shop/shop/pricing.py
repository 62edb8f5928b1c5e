"""Price arithmetic in integer cents, so that totals never drift by a fraction of a cent."""

from __future__ import annotations


def apply_discount(cents: int, percent: int) -> int:
    """``cents`` reduced by ``percent`` per cent, rounded half up to a whole cent."""
    if not 0 <= percent <= 100:
        raise ValueError(f"discount must be between 0 and 100 per cent, got {percent}")
    return (cents * (100 - percent) + 50) // 100
