"""Synthetic self-improvement landscapes and an event-driven simulation to benchmark schedulers."""

from metasearch.sim.engine import SimResult, simulate
from metasearch.sim.landscape import Landscape, LineageLandscape, default_family, disagreement_family
from metasearch.sim.realism import Realism

__all__ = [
    "Landscape",
    "LineageLandscape",
    "Realism",
    "SimResult",
    "default_family",
    "disagreement_family",
    "simulate",
]
