import unittest

from test_utils import PHRASES
from word_count import (
    count_words,
)


class WordCountTest(unittest.TestCase):
    def test_count_one_word(self):
        self.assertEqual(count_words("word"), {"word": 1})

    def test_multiple_occurrences_of_a_word(self):
        text = "one fish two fish red fish blue fish"
        self.assertEqual(count_words(text), PHRASES[text])

    def test_with_apostrophes_and_quotations(self):
        text = "Joe can't tell between 'large' and large."
        self.assertEqual(count_words(text), PHRASES[text])

    def test_ignores_case(self):
        with self.subTest("mixed case"):
            self.assertEqual(count_words("GO go Go"), {"go": 3})


if __name__ == "__main__":
    unittest.main()
