"""The archive: agent code in git, facts in an append-only journal."""

from metasearch.archive.git import GitArchive, read_index
from metasearch.archive.index import ArchiveIndex
from metasearch.archive.journal import Journal

__all__ = ["ArchiveIndex", "GitArchive", "Journal", "read_index"]
