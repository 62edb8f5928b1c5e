"""Scheduler benchmark on simulated landscapes: `python bench/schedulers.py --seeds 200` (see --help)."""

from __future__ import annotations

import sys

from metasearch.sim.bench import run

if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
