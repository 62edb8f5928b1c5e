"""The archive: agent code in git, facts in an append-only journal."""

from metasearch.archive.git import GitArchive, read_index
from metasearch.archive.journal import ArchiveIndex, Journal

__all__ = ["ArchiveIndex", "GitArchive", "Journal", "read_index"]
