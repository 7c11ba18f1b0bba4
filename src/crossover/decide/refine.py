"""The decide policy after the first pass: the repeats of levels where a sign is still
uncertain, the repeats that confirm a side of an answer resting on one run, the bisection
of crossovers still wider than asked, and (under a time budget) the repeats that would
confirm a lead resting on one run of a side."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from crossover.analysis.crossovers import Finding, metric_spec
from crossover.analysis.refine import propose_refinement
from crossover.decide.model import LevelNum, Measure, Question, fmt_level
from crossover.decide.state import State, largest_spread, pair_findings, pairs, uncertain


def repeats_wanted(s: State) -> list[Measure]:
    """The next repeats of levels where a sign is still uncertain."""
    q = s.q
    out: list[Measure] = []
    for a, b in pairs(q):
        for c in sorted(set(s.levels(a)) & set(s.levels(b))):
            ra, rb = s.repeats(a, c), s.repeats(b, c)
            if len(ra) >= q.repeats and len(rb) >= q.repeats:
                continue
            if len(ra) >= 2 and len(rb) >= 2:
                continue  # Welch's interval speaks for itself
            if not any(uncertain(s, a, b, c, m) for m in q.metrics):
                continue
            for t, reps in ((a, ra), (b, rb)):
                u = b if t == a else a
                if reps and not reps[-1].complete:
                    out.append(
                        Measure(t, c, reps[-1].repeat, None, "a close difference", concerns=(u,))
                    )
                elif len(reps) < q.repeats and len(reps) <= min(len(ra), len(rb)):
                    out.append(
                        Measure(t, c, len(reps), None, "a sign still uncertain", concerns=(u,))
                    )
    return [m for m in out if (m.target, m.level, m.repeat) not in s.deferred]


def sole_support_repeats(s: State) -> list[Measure]:
    """The repeats that confirm a side of the answer resting on one run: a stretch of a
    pair's significant leads (a lead over the range, or one side of a crossover) that one
    level alone shows, where one target has a single run, on a metric whose repeats have
    moved by more than ``repeat_margin`` at some level of either target. The median spread
    (:func:`crossover.decide.state.uncertain`) judged the sign certain from one run; on such
    a metric one run can land far from its repeat (TTFT p50 of a burst of prompts: 17-36%
    on the H100 MoE decisions), and the side would rest on it alone."""
    q = s.q
    if q.repeats < 2 or not s.cfg.confirm_single_runs:
        return []
    out: list[Measure] = []
    seen: set[tuple[str, str, str]] = set()
    for f in pair_findings(s):
        key = (f.a, f.b, f.metric)
        if key in seen:
            continue
        seen.add(key)
        moved = (largest_spread(s, f.a, f.metric), largest_spread(s, f.b, f.metric))
        if not any(x is not None and x > math.log1p(s.cfg.repeat_margin) for x in moved):
            continue
        sig = [lv for lv in f.per_level if lv.lead is not None]
        for i, lv in enumerate(sig):
            before = sig[i - 1].lead if i > 0 else None
            after = sig[i + 1].lead if i + 1 < len(sig) else None
            if lv.lead in (before, after):
                continue  # another level shows the same side
            c = s.level_of(lv.concurrency)
            for t, u in ((f.a, f.b), (f.b, f.a)):
                runs = [o for o in s.repeats(t, c) if o.valid]
                r = _next_repeat(s, t, c)
                if len(runs) != 1 or not runs[0].complete or r is None:
                    continue
                label = metric_spec(f.metric).label
                why = f"{lv.lead}'s lead on {label} at {fmt_level(c)} alone, on one run of {t}"
                out.append(Measure(t, c, r, None, why, concerns=(u,)))
    return out


def _next_repeat(s: State, t: str, c: LevelNum) -> int | None:
    """The repeat of ``t`` at ``c`` to measure next, ``None`` when the question's repeats
    are all taken or the budget deferred it."""
    r = len(s.repeats(t, c))
    return None if r >= s.q.repeats or (t, c, r) in s.deferred else r


def snap(q: Question, lo: LevelNum, hi: LevelNum, mid: LevelNum) -> LevelNum | None:
    """``mid`` where any level may be measured, else the grid level strictly between ``lo``
    and ``hi`` nearest it in log (``None`` when there is none)."""
    if q.any_level:
        return mid
    inside = [c for c in q.grid if lo < c < hi]
    if not inside:
        return None
    return min(inside, key=lambda c: abs(math.log2(c) - math.log2(mid)))


def rate_bisections(
    q: Question,
    findings: list[Finding],
    measured: list[LevelNum],
    width: float,
    inconclusive: bool,
) -> list[LevelNum]:
    """:func:`crossover.analysis.refine.propose_refinement` along rates: the same choice
    (a crossover wider than ``width`` of its point gets the segment of ``measured``
    levels holding it, else the widest in log overlapping its interval; an inconclusive
    bracket, with ``inconclusive``, its widest segment), each segment's geometric
    midpoint. The analysis's bisection is of integers (a segment closer than 2 has no
    midpoint there: rates 0.5 and 1.5 would never be split); a segment here can be split
    where the question's grid holds a rate strictly inside it (a replay's and a live
    rate decision's levels are the grid's: ``refine`` does not take rates)."""
    levels = sorted(set(measured))
    segments = [(a, b) for a, b in itertools.pairwise(levels) if any(a < c < b for c in q.grid)]
    wanted: list[tuple[float, LevelNum]] = []
    for f in findings:
        if f.kind == "crossover" and f.interval is not None:
            rel = f.rel_width
            if rel is None or rel <= width:
                continue
            lo, hi, point, priority = f.interval[0], f.interval[1], f.concurrency, rel
        elif f.kind == "inconclusive" and inconclusive and f.bracket is not None:
            lo, hi, point, priority = f.bracket[0], f.bracket[1], None, 0.0
        else:
            continue
        over = [(a, b) for a, b in segments if a < hi and b > lo]
        if not over:
            continue
        held = [(a, b) for a, b in over if point is not None and a <= point <= b]
        a, b = held[0] if held else max(over, key=lambda x: math.log2(x[1] / x[0]))
        wanted.append((priority, math.sqrt(a * b)))
    out: list[LevelNum] = []
    for _, mid in sorted(wanted, key=lambda w: -w[0]):
        if mid not in out:
            out.append(mid)
    return sorted(out)


def refinement_wanted(s: State, coarse: list[LevelNum]) -> list[Measure]:
    """Levels between measured ones where a crossover is still wider than asked."""
    cfg, q = s.cfg, s.q
    if q.kind == "lead":
        return []
    spent = len({c for (_, c, _) in s.runs} - set(coarse))
    if spent >= cfg.refine_budget:
        return []
    out: list[Measure] = []
    every = pair_findings(s)
    for a, b in pairs(q):
        common = sorted(set(s.levels(a)) & set(s.levels(b)))
        findings = [f for f in every if (f.a, f.b) == (a, b)]
        new: Sequence[LevelNum]
        if q.axis == "rate":
            new = rate_bisections(q, findings, common, cfg.refine_width, cfg.refine_inconclusive)
        else:
            new = propose_refinement(
                findings,
                [int(c) for c in common],
                target_rel_width=cfg.refine_width,
                include_inconclusive=cfg.refine_inconclusive,
            )
        for mid in new:
            lo = max((c for c in common if c < mid), default=None)
            hi = min((c for c in common if c > mid), default=None)
            if lo is None or hi is None:
                continue
            level = snap(q, lo, hi, mid)
            if level is None or level in common:
                # the grid holds no level between: as narrow as it can be
                continue
            if not (q.covers(a, level) and q.covers(b, level)):
                continue
            for t in (a, b):
                if s.run(t, level) is None and (t, level, 0) not in s.deferred:
                    u = b if t == a else a
                    out.append(Measure(t, level, 0, None, f"refining {a} vs {b}", concerns=(u,)))
        out += _bracket_while_up(s, a, b, common, findings)
    return out


#: a target's engine is dear where one start costs this many times a level of it: while
#: it is up, the bracket a bisection is narrowing is measured whole (each later step
#: would start it again)
DEAR_START = 5.0


def _bracket_while_up(
    s: State, a: str, b: str, common: list[LevelNum], findings: list[Finding]
) -> list[Measure]:
    """The running target's every grid level (with its repeats) inside the measured
    levels enclosing a wide crossover's interval, where its engine is dear: the steps a
    bisection would take one at a time, each after the other side has measured, taken now
    while its engine is up."""
    from crossover.decide.budget import level_seconds

    t = s.last_target
    if t not in (a, b):
        return []
    u = b if t == a else a
    out: list[Measure] = []
    for f in findings:
        if f.kind != "crossover" or f.interval is None:
            continue
        width = f.rel_width
        if width is None or width <= s.cfg.refine_width:
            continue
        lo = max((c for c in common if c <= f.interval[0]), default=None)
        hi = min((c for c in common if c >= f.interval[1]), default=None)
        if lo is None or hi is None:
            continue
        for c in s.q.grid:
            if not (lo < c < hi) or c in common or not (s.q.covers(t, c) and s.q.covers(u, c)):
                continue
            if s.cfg.start_cost(t) < DEAR_START * level_seconds(s, t, c):
                continue
            reps = s.repeats(t, c)
            r = _next_repeat(s, t, c)
            if r is None or (reps and not reps[-1].complete):
                continue
            why = f"the bracket of {a} vs {b} while {t}'s engine is up (a restart costs more)"
            out.append(Measure(t, c, r, None, why, concerns=(u,)))
    return out


def single_run_leads(s: State) -> list[Measure]:
    """The repeats that would confirm each level lead found on one run of a side (where
    the question has repeats): under a time budget, said with the answer."""
    q = s.q
    if q.repeats < 2:
        return []
    out: list[Measure] = []
    for f in pair_findings(s):
        for lv in f.per_level:
            c = s.level_of(lv.concurrency)
            if lv.lead is None:
                continue
            for t, u in ((f.a, f.b), (f.b, f.a)):
                runs = [o for o in s.repeats(t, c) if o.valid]
                if len(runs) == 1 and runs[0].complete:
                    why = f"a lead at {fmt_level(c)} that rests on one run of {t}"
                    out.append(Measure(t, c, 1, None, why, concerns=(u,)))
    return out
