from __future__ import annotations

from textstats import average_word_length, word_count, words


def test_single_spaced() -> None:
    assert word_count("the quick brown fox") == 4


def test_double_spaces() -> None:
    assert word_count("hello  world") == 2


def test_line_breaks_and_tabs() -> None:
    assert word_count("one\ntwo\tthree") == 3


def test_leading_and_trailing_whitespace() -> None:
    assert word_count("  padded text \n") == 2


def test_only_whitespace_is_zero() -> None:
    assert word_count("   \n\t ") == 0
    assert word_count("") == 0


def test_average_is_unchanged() -> None:
    assert average_word_length("ab  abcd") == 3.0
    assert words("a  b") == ["a", "b"]
