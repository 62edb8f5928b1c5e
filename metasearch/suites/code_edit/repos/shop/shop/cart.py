"""The cart: one line per product (SKU) with a unit price and a quantity."""

from __future__ import annotations

from dataclasses import dataclass

from shop.pricing import apply_discount


@dataclass
class Line:
    sku: str
    unit_cents: int
    quantity: int


class Cart:
    def __init__(self) -> None:
        self._lines: dict[str, Line] = {}

    def add(self, sku: str, unit_cents: int, quantity: int = 1) -> None:
        """Put ``quantity`` more of ``sku`` into the cart."""
        if quantity <= 0:
            raise ValueError(f"quantity must be positive, got {quantity}")
        line = self._lines.get(sku)
        if line is None:
            self._lines[sku] = Line(sku, unit_cents, quantity)
        else:
            line.quantity = quantity

    def remove(self, sku: str) -> None:
        """Drop every unit of ``sku``; unknown SKUs are an error."""
        if sku not in self._lines:
            raise KeyError(sku)
        del self._lines[sku]

    def quantity(self, sku: str) -> int:
        line = self._lines.get(sku)
        return 0 if line is None else line.quantity

    def total(self, discount_percent: int = 0) -> int:
        """Sum of all lines in cents, after the discount."""
        subtotal = sum(line.unit_cents * line.quantity for line in self._lines.values())
        return apply_discount(subtotal, discount_percent)
