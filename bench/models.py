"""Model-choice benchmark on simulated landscapes: `python bench/models.py --seeds 200` (see --help)."""

from __future__ import annotations

import sys

from metasearch.sim.model_bench import run

if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
