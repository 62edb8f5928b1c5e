"""``kernelbench``: the kernels suite with its problems from a KernelBench checkout.

The same suite as ``kernels`` with ``source: kernelbench`` (``metasearch/suites/kernels/kernelbench.py``
loads, scales and sizes the problems; ``metasearch/suites/kernels/__init__.py`` lists, prepares and grades
them): ``suite: {name: kernelbench, path: ...}`` takes KernelBench's options without naming the source.
"""

from __future__ import annotations

from metasearch.suites.kernels import KernelsSuite
from metasearch.suites.kernels.kernelbench import KernelBenchProblems, scale_sizes

__all__ = ["KernelBenchSuite", "scale_sizes"]


class KernelBenchSuite(KernelsSuite):
    """``KernelsSuite`` fixed to the KernelBench source; nothing else differs."""

    name = "kernelbench"
    description = KernelBenchProblems.description
    Config = KernelBenchProblems.Config  # type: ignore[assignment]  # the source is fixed: its options alone
