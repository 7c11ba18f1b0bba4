"""The search itself, apart from how a level is measured: bracket by doubling (or
halving), then bisect geometrically between the last passing and the first failing
rate until they are within ``precision`` of each other (``hi / lo - 1 <= precision``).

Each step measures one level; nothing is interpolated, so the capacity reported is a
measured rate that met the SLO and the bracket's top a measured rate that did not.
This assumes that meeting the SLO is monotone in the rate (more load never helps).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

Verdict = Literal["found", "above_max_rate", "below_min_rate"]


@dataclass(frozen=True)
class LevelOutcome:
    rate_rps: float
    met: bool


@dataclass
class SearchResult:
    verdict: Verdict
    #: the highest rate measured to meet the SLO (``None``: none did)
    lo: float | None
    #: the lowest rate measured to miss it (``None``: none did, up to the maximum)
    hi: float | None
    tried: list[LevelOutcome] = field(default_factory=list)

    @property
    def rel_width(self) -> float | None:
        if self.lo is None or self.hi is None:
            return None
        return self.hi / self.lo - 1.0


async def search_capacity(
    measure: Callable[[float], Awaitable[bool]],
    *,
    start_rps: float,
    precision: float,
    max_rps: float | None = None,
    min_rps: float | None = None,
) -> SearchResult:
    """The highest rate ``measure`` says meets the SLO, within ``precision``.

    ``min_rps`` (default ``start_rps / 64``) is where halving gives up: even that rate
    misses; ``max_rps`` is where doubling stops: that rate still meets."""
    if not (start_rps > 0 and precision > 0):
        raise ValueError("start rate and precision must be positive")
    floor = min_rps if min_rps is not None else start_rps / 64
    rate = min(start_rps, max_rps) if max_rps is not None else start_rps
    tried: list[LevelOutcome] = []

    async def probe(r: float) -> bool:
        met = await measure(r)
        tried.append(LevelOutcome(r, met))
        return met

    lo: float | None = None
    hi: float | None = None
    if await probe(rate):
        lo = rate
        while hi is None:
            if max_rps is not None and lo >= max_rps:
                return SearchResult("above_max_rate", lo, None, tried)
            nxt = lo * 2 if max_rps is None else min(lo * 2, max_rps)
            if await probe(nxt):
                lo = nxt
            else:
                hi = nxt
    else:
        hi = rate
        while lo is None:
            nxt = hi / 2
            if nxt < floor:
                return SearchResult("below_min_rate", None, hi, tried)
            if await probe(nxt):
                lo = nxt
            else:
                hi = nxt
    while hi / lo - 1.0 > precision:
        mid = math.sqrt(lo * hi)
        if await probe(mid):
            lo = mid
        else:
            hi = mid
    return SearchResult("found", lo, hi, tried)


def grid_levels(lo: float, hi: float, precision: float) -> list[float]:
    """A fixed geometric grid from ``lo`` to at least ``hi`` whose neighbours are within
    ``precision`` of each other: what a sweep needs to locate the capacity as closely."""
    step = 1.0 + precision
    n = math.ceil(math.log(hi / lo) / math.log(step) - 1e-9)
    return [lo * step**k for k in range(n + 1)]
