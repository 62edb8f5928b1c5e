PHRASES = {
    "one fish two fish red fish blue fish": {"one": 1, "fish": 4, "two": 1, "red": 1, "blue": 1},
    "Joe can't tell between 'large' and large.": {
        "joe": 1,
        "can't": 1,
        "tell": 1,
        "between": 1,
        "large": 2,
        "and": 1,
    },
}
