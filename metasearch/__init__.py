"""metasearch: search over code-level agent designs."""

__version__ = "0.1.0"
