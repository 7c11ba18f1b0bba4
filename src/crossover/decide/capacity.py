"""The decide policy for a capacity question: each target's bracket (last level meeting
the SLO, first failing it), the bisection of the brackets that decide the leader, and the
leader."""

from __future__ import annotations

from collections.abc import Mapping

from crossover.analysis.refine import bisect_level
from crossover.decide.coarse import capacity_levels
from crossover.decide.model import Decision, LevelNum, Measure, Skip, Step
from crossover.decide.refine import snap
from crossover.decide.state import State, prefer_running

#: the assumption behind a capacity question's brackets
LATENCY_GROWS = "the SLO's latency does not fall as concurrency grows"


def capacity_bracket(s: State, t: str) -> tuple[LevelNum | None, LevelNum | None]:
    """(last level meeting the SLO, first level failing it above it) over what is measured."""
    slo = s.q.slo
    assert slo is not None
    passing: LevelNum | None = None
    for c in s.levels(t):
        v = s.mean(t, c, slo.path)
        if v is None:
            continue
        if slo.holds(v):
            passing = c
        else:
            return passing, c
    return passing, None


def capacity_step(s: State, order: list[str], coarse: list[LevelNum]) -> Step:
    q, cfg = s.q, s.cfg
    skips: list[Skip] = []
    for t in order:
        lo, hi = capacity_bracket(s, t)
        best_other = max(
            (b[0] for u in order if u != t for b in [capacity_bracket(s, u)] if b[0] is not None),
            default=None,
        )
        if hi is not None and best_other is not None and hi <= best_other:
            rest = tuple(c for c in q.grid if c > hi and q.covers(t, c))
            if rest:
                skips.append(Skip(t, rest, f"{t} fails the SLO at {hi}, where another meets it",
                                  LATENCY_GROWS))  # fmt: skip
            continue
        if hi is None:
            for c in capacity_levels(q, t, coarse):  # its own top level too
                if s.run(t, c) is None and c > (lo or 0):
                    return Measure(t, c, 0, None, "capacity: first pass")
            continue
    # bisect the brackets that decide the leader: the best lower bound's and any that overlap it
    brackets = {t: capacity_bracket(s, t) for t in order}
    best = max((b[0] or 0 for b in brackets.values()), default=0)
    wanted: list[Measure] = []
    for t, (lo, hi) in brackets.items():
        if lo is None or hi is None or (hi <= best and lo < best):
            continue
        if (hi - lo) <= cfg.refine_width * lo:
            continue
        mid = bisect_level(int(lo), int(hi))  # capacity: along concurrency only
        if mid is None:
            continue
        level = snap(q, lo, hi, mid)
        if level is not None and s.run(t, level) is None and q.covers(t, level):
            wanted.append(Measure(t, level, 0, None, "capacity: narrowing the bracket"))
    step = prefer_running(s, wanted)
    if step is not None:
        return step
    leader, confident = capacity_leader(brackets)
    # the answer is the brackets: no crossover findings on metrics it was not asked about
    # (the JSON held six the text never printed); where none meets the SLO, the answer
    # says so, and no overlap is noted
    meets = any(lo is not None for lo, _ in brackets.values())
    overlap = not confident and meets
    return Decision(
        q,
        (),
        cfg.confidence if confident else 0.0,
        tuple(skips),
        brackets,
        leader,
        ("the capacity brackets overlap: no target is known to lead",) if overlap else (),
    )


def capacity_leader(
    brackets: Mapping[str, tuple[LevelNum | None, LevelNum | None]],
) -> tuple[str | None, bool]:
    """The target with the highest level meeting the SLO, and whether it surely leads
    (its level meets the SLO where every other target has failed it). None where no target
    meets it, or where another meets it up to the same level: a tie has no leader."""
    ranked = sorted(brackets.items(), key=lambda kv: -(kv[1][0] or 0))
    if not ranked or ranked[0][1][0] is None:
        return None, False
    leader, (lo, _) = ranked[0]
    assert lo is not None
    if any(other_lo == lo for _, (other_lo, _) in ranked[1:]):
        return None, False
    for _, (_, hi) in ranked[1:]:
        if hi is None or hi > lo:
            return leader, False
    return leader, True
