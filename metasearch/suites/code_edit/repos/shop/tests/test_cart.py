from __future__ import annotations

from shop import Cart, apply_discount


def test_total_of_distinct_products() -> None:
    cart = Cart()
    cart.add("apple", 30, 2)
    cart.add("pear", 45)
    assert cart.total() == 105


def test_discount_rounds_half_up() -> None:
    assert apply_discount(999, 10) == 899
    assert apply_discount(5, 50) == 3
