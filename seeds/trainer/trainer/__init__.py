"""A plain MLP trainer for tabular tasks: its knobs (knobs.json) decide the whole recipe."""
