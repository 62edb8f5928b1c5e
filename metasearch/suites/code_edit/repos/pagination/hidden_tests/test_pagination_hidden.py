from __future__ import annotations

import pytest
from pagination import page_count, paginate


def test_exact_multiple() -> None:
    assert page_count(10, 5) == 2
    assert paginate(list(range(10)), 2, 5) == [5, 6, 7, 8, 9]


def test_partial_last_page_counts() -> None:
    assert page_count(11, 5) == 3
    assert page_count(1, 50) == 1


def test_partial_last_page_is_reachable() -> None:
    assert paginate(list(range(11)), 3, 5) == [10]


def test_no_items_no_pages() -> None:
    assert page_count(0, 5) == 0
    with pytest.raises(IndexError):
        paginate([], 1, 5)


def test_out_of_range_and_bad_arguments() -> None:
    with pytest.raises(IndexError):
        paginate(list(range(11)), 4, 5)
    with pytest.raises(ValueError):
        page_count(3, 0)
