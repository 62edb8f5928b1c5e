from __future__ import annotations

import pytest
from intervals import merge, total_length


def test_sorted_input() -> None:
    assert merge([(1, 3), (2, 6), (8, 10)]) == [(1, 6), (8, 10)]


def test_unsorted_input() -> None:
    assert merge([(5, 8), (1, 6)]) == [(1, 8)]


def test_unsorted_disjoint_input_comes_back_sorted() -> None:
    assert merge([(20, 25), (1, 2), (10, 12)]) == [(1, 2), (10, 12), (20, 25)]


def test_touching_intervals_merge() -> None:
    assert merge([(4, 6), (1, 4)]) == [(1, 6)]


def test_total_length_counts_overlap_once() -> None:
    assert total_length([(5, 8), (1, 6)]) == 7
    assert total_length([]) == 0


def test_reversed_interval_is_an_error() -> None:
    with pytest.raises(ValueError):
        merge([(3, 1)])
