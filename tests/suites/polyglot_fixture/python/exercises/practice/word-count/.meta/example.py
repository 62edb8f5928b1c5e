import re
from collections import Counter

WORD = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")


def count_words(sentence):
    return dict(Counter(WORD.findall(sentence.lower())))
