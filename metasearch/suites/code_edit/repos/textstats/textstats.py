"""Word statistics for short texts (titles, abstracts, chat messages)."""

from __future__ import annotations


def words(text: str) -> list[str]:
    """The words of ``text``, in order."""
    return text.split()


def word_count(text: str) -> int:
    """How many words ``text`` holds; any run of whitespace separates two words."""
    if not text:
        return 0
    return len(text.split(" "))


def average_word_length(text: str) -> float:
    """Mean length of the words of ``text``; 0.0 for a text without words."""
    found = words(text)
    if not found:
        return 0.0
    return sum(len(w) for w in found) / len(found)
