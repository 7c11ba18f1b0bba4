"""Capacity under an SLO: the highest arrival rate whose measured percentiles meet every
term, found by bracketing and bisection on measured open-loop levels."""

from __future__ import annotations

from crossover.capacity.overload import OverloadDetector
from crossover.capacity.schema import CapacityFile, CapacityLevel, SloCheck
from crossover.capacity.search import LevelOutcome, SearchResult, search_capacity

__all__ = [
    "CapacityFile",
    "CapacityLevel",
    "LevelOutcome",
    "OverloadDetector",
    "SearchResult",
    "SloCheck",
    "search_capacity",
]
