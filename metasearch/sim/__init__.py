"""Synthetic self-improvement landscapes and an event-driven simulation to benchmark schedulers."""

from metasearch.sim.engine import SimResult, simulate
from metasearch.sim.landscape import Landscape, LineageLandscape, default_family

__all__ = ["Landscape", "LineageLandscape", "SimResult", "default_family", "simulate"]
