from __future__ import annotations

import pytest
from shop import Cart, apply_discount


def test_distinct_products() -> None:
    cart = Cart()
    cart.add("apple", 30, 2)
    cart.add("pear", 45)
    assert cart.total() == 105


def test_adding_twice_accumulates() -> None:
    cart = Cart()
    cart.add("apple", 30, 2)
    cart.add("apple", 30, 3)
    assert cart.quantity("apple") == 5
    assert cart.total() == 150


def test_repeated_single_adds_with_discount() -> None:
    cart = Cart()
    for _ in range(4):
        cart.add("pen", 125)
    assert cart.total(discount_percent=20) == 400


def test_remove_and_unknown() -> None:
    cart = Cart()
    cart.add("pen", 125)
    cart.remove("pen")
    assert cart.total() == 0
    with pytest.raises(KeyError):
        cart.remove("pen")


def test_invalid_quantity_and_discount() -> None:
    with pytest.raises(ValueError):
        Cart().add("pen", 125, 0)
    with pytest.raises(ValueError):
        apply_discount(100, 101)
