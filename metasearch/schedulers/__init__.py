"""Schedulers decide the next job: expand a design, or evaluate one (design, task) pair."""

from metasearch.schedulers.base import Scheduler, SearchState
from metasearch.schedulers.cmp import SearchTree

__all__ = ["Scheduler", "SearchState", "SearchTree"]
