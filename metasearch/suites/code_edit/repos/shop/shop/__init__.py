"""A shopping cart with prices in integer cents."""

from shop.cart import Cart
from shop.pricing import apply_discount

__all__ = ["Cart", "apply_discount"]
