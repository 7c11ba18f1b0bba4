"""Refinement: which concurrency levels to measure next to narrow a crossover.

A crossover located between two measured levels is refined by bisection in
log2(concurrency) on integers: measure the level halfway (geometrically)
between the measured levels around it, recompute the findings, repeat, until
the interval is narrower than ``target_rel_width`` times the crossover's
concurrency, the levels are adjacent integers, or the budget is spent.

The sweep runner drives the loop (see :func:`refine_until`):

    levels = [1, 2, 4, 8, 16, 32, 64]
    findings = measure(levels)                      # run, analyze_sweep
    while new := propose_refinement(findings, levels, budget=left):
        findings = measure(new); levels += new; left -= len(new)
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Iterable, Sequence

from crossover.analysis.crossovers import Finding


def bisect_level(lo: int, hi: int) -> int | None:
    """The integer nearest the geometric midpoint of ``lo`` and ``hi``, strictly
    between them, or ``None`` when they are adjacent integers."""
    if hi - lo < 2:
        return None
    mid = round(math.sqrt(lo * hi))
    return min(max(mid, lo + 1), hi - 1)


def _segments(levels: Sequence[int]) -> list[tuple[int, int]]:
    return list(itertools.pairwise(levels))


def _pick_segment(
    segments: Iterable[tuple[int, int]], lo: float, hi: float, point: float | None
) -> tuple[int, int] | None:
    """The segment to bisect among those overlapping ``[lo, hi]``: the one that
    holds ``point`` when it can be split, else the widest (in log) that can."""
    overlapping = [
        (a, b) for a, b in segments if a < hi and b > lo and bisect_level(a, b) is not None
    ]
    if point is not None:
        for a, b in overlapping:
            if a <= point <= b:
                return (a, b)
    if not overlapping:
        return None
    return max(overlapping, key=lambda s: math.log2(s[1] / s[0]))


def propose_refinement(
    findings: Sequence[Finding],
    measured_levels: Collection[int],
    *,
    target_rel_width: float = 0.25,
    budget: int | None = None,
    include_inconclusive: bool = True,
    metrics: Collection[str] | None = None,
) -> list[int]:
    """Concurrency levels to measure next (sorted, none already measured).

    * a crossover whose interval is wider than ``target_rel_width`` x its
      concurrency gets the bisection of the measured segment holding it;
    * an inconclusive finding (``include_inconclusive``) gets the bisection of
      the widest segment of its bracket (more repeats may be what it needs:
      the runner can add them instead);
    * ``budget`` caps how many levels are returned (widest intervals first);
    * ``metrics`` restricts which findings count (default: all).

    An empty list means done: every interval is narrow enough or cannot be
    narrowed further on integer levels.
    """
    levels = sorted(set(measured_levels))
    segments = _segments(levels)
    wanted: list[tuple[float, int]] = []
    for f in findings:
        if metrics is not None and f.metric not in metrics:
            continue
        if f.kind == "crossover" and f.interval is not None:
            width = f.rel_width
            if width is None or width <= target_rel_width:
                continue
            seg = _pick_segment(segments, f.interval[0], f.interval[1], f.concurrency)
            priority = width
        elif f.kind == "inconclusive" and include_inconclusive and f.bracket is not None:
            seg = _pick_segment(segments, f.bracket[0], f.bracket[1], None)
            priority = 0.0  # after every crossover that is still too wide
        else:
            continue
        if seg is not None:
            mid = bisect_level(*seg)
            if mid is not None and mid not in levels:
                wanted.append((priority, mid))
    out: list[int] = []
    for _, level in sorted(wanted, key=lambda w: -w[0]):
        if level not in out:
            out.append(level)
    if budget is not None:
        out = out[: max(0, budget)]
    return sorted(out)


def refine_until(
    measure: Callable[[list[int]], Sequence[Finding]],
    initial_levels: Sequence[int],
    *,
    target_rel_width: float = 0.25,
    budget: int = 16,
    include_inconclusive: bool = True,
    metrics: Collection[str] | None = None,
) -> tuple[list[Finding], list[int]]:
    """Measure ``initial_levels``, then refine until done or ``budget`` extra levels
    are spent. ``measure(new_levels)`` runs the new levels (every target, every
    repeat) and returns the findings over everything measured so far. Returns
    the last findings and all levels measured, sorted."""
    levels = sorted(set(initial_levels))
    findings = list(measure(list(levels)))
    left = budget
    while left > 0:
        new = propose_refinement(
            findings,
            levels,
            target_rel_width=target_rel_width,
            budget=left,
            include_inconclusive=include_inconclusive,
            metrics=metrics,
        )
        if not new:
            break
        findings = list(measure(new))
        levels = sorted(set(levels) | set(new))
        left -= len(new)
    return findings, levels
