from __future__ import annotations

from textstats import average_word_length, word_count


def test_counts_single_spaced_words() -> None:
    assert word_count("the quick brown fox") == 4


def test_average_word_length() -> None:
    assert average_word_length("ab abcd") == 3.0
    assert average_word_length("") == 0.0
