"""``kernelbench``: the kernels suite with its problems from a KernelBench checkout.

The same suite as ``kernels`` with ``source: kernelbench`` (``metasearch/suites/kernels/kernelbench.py``
loads, scales and sizes the problems; ``metasearch/suites/kernels/__init__.py`` lists, prepares and grades
them): ``suite: {name: kernelbench, path: ...}`` takes KernelBench's options without naming the source.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from metasearch.suites.kernels import KernelsSuite
from metasearch.suites.kernels.kernelbench import KernelBenchProblems, scale_sizes

__all__ = ["KernelBenchSuite", "hash_files", "scale_sizes"]


class KernelBenchSuite(KernelsSuite):
    """``KernelsSuite`` fixed to the KernelBench source; nothing else differs."""

    name = "kernelbench"
    description = KernelBenchProblems.description
    Config = KernelBenchProblems.Config  # type: ignore[assignment]  # the source is fixed: its options alone


def hash_files(root: Path, files: Iterable[Path], extra: str = "") -> str:
    """sha256 over (relative path, content digest) of ``files``, sorted: order and location independent;
    ``extra`` (how the files are used, e.g. a scale) is hashed too when given."""
    digest = hashlib.sha256()
    if extra:
        digest.update(b"extra\0" + extra.encode() + b"\n")
    for path in sorted(files):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).hexdigest().encode() + b"\n")
    return digest.hexdigest()
