"""The search and the overload detector, without a server (the SLO terms: tests/spec)."""

from __future__ import annotations

import asyncio
import itertools
import math

import pytest

from crossover.capacity import OverloadDetector, search_capacity
from crossover.capacity.search import SearchResult, grid_levels


def _search(
    truth: float, max_rps: float | None = None, min_rps: float | None = None
) -> tuple[list[float], SearchResult]:
    """Search against a server that meets the SLO exactly up to ``truth``."""
    tried: list[float] = []

    async def measure(rate: float) -> bool:
        tried.append(rate)
        return rate <= truth

    result = asyncio.run(
        search_capacity(measure, start_rps=1.0, precision=0.1, max_rps=max_rps, min_rps=min_rps)
    )
    return tried, result


@pytest.mark.parametrize("truth", [0.3, 1.0, 2.7, 13.9, 100.0, 777.0])
def test_the_bracket_holds_the_truth_within_the_precision(truth: float) -> None:
    tried, r = _search(truth)
    assert r.verdict == "found"
    lo, hi = r.lo, r.hi
    assert lo <= truth < hi
    assert hi / lo - 1 <= 0.1
    assert lo in tried and hi in tried  # both ends measured, nothing interpolated
    # doubling/halving then bisection: logarithmic in range and precision
    assert len(tried) <= abs(math.log2(truth)) + 2 + math.ceil(math.log2(math.log(2) / 0.0953))


def test_max_and_min_rate_end_the_search() -> None:
    tried, r = _search(1000.0, max_rps=10.0)
    assert (r.verdict, r.lo, r.hi) == ("above_max_rate", 10.0, None)
    assert tried == [1, 2, 4, 8, 10]
    tried, r = _search(0.001, min_rps=0.2)
    assert (r.verdict, r.lo, r.hi) == ("below_min_rate", None, 0.25)
    assert tried == [1, 0.5, 0.25]


def test_grid_of_the_same_precision() -> None:
    g = grid_levels(1.0, 16.0, 0.1)
    assert g[0] == 1.0 and g[-1] >= 16.0 > g[-2]
    assert all(math.isclose(b / a, 1.1) for a, b in itertools.pairwise(g))


def test_overload_detector_stable_vs_growing() -> None:
    stable = OverloadDetector()
    # rises to ~6 in flight within the first request time, then hovers there
    for k in range(60):
        t = 0.2 * k
        flying = min(6, k) + (1 if k % 3 == 0 else -1 if k % 3 == 1 else 0)
        assert not stable.add(t, max(flying, 0), completed=k)
    growing = OverloadDetector()
    stopped_at = None
    for k in range(60):
        if growing.add(0.2 * k, 2 * k, completed=k):
            stopped_at = 0.2 * k
            break
    assert stopped_at is not None and stopped_at < 3.0
    # nothing is judged before the first completion
    early = OverloadDetector()
    assert not any(early.add(0.2 * k, 5 * k, completed=0) for k in range(50))
