"""The decide policy's skips: a target's remaining levels not measured because its
throughput saturated behind every other target's (the monotone assumption, said with the
answer and checked against the curves measured), or because no other target is measured
there."""

from __future__ import annotations

import itertools
import math

from crossover.analysis.crossovers import metric_spec
from crossover.decide.model import SATURATION_METRIC, LevelNum, Skip, fmt_level
from crossover.decide.state import State

#: the assumption behind skipping a saturated target's remaining levels
MONOTONE = (
    "throughput does not fall as concurrency grows, and past saturation a target's "
    "latencies grow at least as fast as the leader's: the gap does not close"
)
#: the same along rates: past the rate a server sustains its queue grows through the level
MONOTONE_RATE = (
    "throughput does not fall as the arrival rate grows, and past the rate a target "
    "sustains its queue (and so its latencies) grows at least as fast as the leader's: "
    "the gap does not close"
)


def _overloaded_at(s: State, t: str, c: LevelNum) -> bool:
    """Whether every valid run of ``t`` at ``c`` is one the analysis calls overloaded
    (an open loop that served under 80% of what arrived)."""
    runs = [o for o in s.repeats(t, c) if o.valid]
    return bool(runs) and all(o.overloaded for o in runs)


def stop_reason(s: State, t: str, before: LevelNum) -> Skip | None:
    """Why ``t`` need not be measured at ``before`` and above, if it need not: its
    throughput has saturated (grown under ``saturation_gain`` per doubling of concurrency
    over its last step), and every target measured there leads it in throughput
    significantly by ``stop_margin`` or more, is ahead on every other metric of the question
    (point estimate), no gap narrowing from the step before, and its own throughput is not
    falling. Along rates (per doubling of the arrival rate) its last level must also be
    one the analysis calls overloaded in every run (``Observation.overloaded``): a
    throughput that stops following the arrivals is a server falling behind only where
    its queue grew, and a short level's window can read flat without it."""
    cfg, q = s.cfg, s.q
    mine = [c for c in s.levels(t) if c < before]
    if len(mine) < 2:
        return None
    l1, l2 = mine[-2], mine[-1]
    x1, x2 = s.mean(t, l1, SATURATION_METRIC), s.mean(t, l2, SATURATION_METRIC)
    if x1 is None or x2 is None or x1 <= 0 or x2 <= 0:
        return None
    per_doubling = (x2 / x1) ** (1.0 / math.log2(l2 / l1)) - 1.0
    if per_doubling >= cfg.saturation_gain:
        return None
    rates = q.axis == "rate"
    if rates and not _overloaded_at(s, t, l2):
        return None
    leaders = [u for u in q.targets if u != t and s.mean(u, l2, SATURATION_METRIC) is not None]
    if not leaders:
        return None
    for u in leaders:
        # the leader's own curve, where measured, does not fall (the monotone assumption)
        u1, u2 = s.mean(u, l1, SATURATION_METRIC), s.mean(u, l2, SATURATION_METRIC)
        if u1 is not None and u2 is not None and u2 < u1 * (1.0 - cfg.noise_floor_rel):
            return None
        tput = s.advantage(u, t, l2, SATURATION_METRIC)
        if tput is None or tput < math.log1p(cfg.stop_margin):
            return None
        if not s.significant_lead(u, t, l2, SATURATION_METRIC):
            return None
        for m in {SATURATION_METRIC, *q.metrics}:
            adv = s.advantage(u, t, l2, m)
            if adv is None or adv <= 0:
                return None
            before_adv = s.advantage(u, t, l1, m)
            if before_adv is not None and adv < before_adv - math.log1p(cfg.noise_floor_rel):
                return None  # the gap is narrowing: a crossover may lie ahead
    skipped = tuple(c for c in q.grid if c >= before and q.covers(t, c))
    metrics = ", ".join(metric_spec(m).label for m in q.metrics)
    one = len(leaders) == 1
    whose = "the leader's" if one else "the leaders'"
    a, b = fmt_level(l1), fmt_level(l2)
    at = f"{b} requests/s" if rates else b
    behind = ", overloaded there (it served under 80% of what arrived)" if rates else ""
    doubling = "doubling of the rate" if rates else "doubling"
    return Skip(
        t,
        skipped,
        f"{t}'s throughput saturated by {at} ({per_doubling:+.0%} per {doubling} from "
        f"{a}){behind}; {', '.join(leaders)} {'leads' if one else 'lead'} it there by "
        f"{cfg.stop_margin:.0%} or more in throughput and {'is' if one else 'are'} ahead "
        f"on {metrics}, no gap narrowing",
        MONOTONE_RATE if rates else MONOTONE,
        f"measured at {a} and {b}: {t}'s throughput flat{', overloaded' if rates else ''}, "
        f"{whose} not falling, "
        "the throughput lead significant, every gap as wide or wider",
    )


def alone_above(s: State, t: str, c: LevelNum) -> Skip | None:
    """``t``'s levels from ``c`` on when every other target stopped below ``c``: a level
    only one target is measured at enters no comparison."""
    others = [u for u in s.q.targets if u != t]
    if not any(s.q.covers(u, c) for u in others):
        rest = tuple(lv for lv in s.q.grid if lv >= c and s.q.covers(t, lv))
        return Skip(t, rest, "no other target is measured there (the others' levels end below)")
    stops = [stop_reason(s, u, c) for u in others]
    if not stops or any(x is None for x in stops):
        return None
    for u in s.q.targets:
        if u != t and any(lv >= c for lv in s.levels(u)):
            return None
    rest = tuple(lv for lv in s.q.grid if lv >= c and s.q.covers(t, lv))
    names = ", ".join(others)
    return Skip(t, rest, f"{names} not measured there (skipped above): nothing to compare with")


def find_skips(s: State, order: list[str], coarse: list[LevelNum]) -> list[Skip]:
    out: list[Skip] = []
    for t in order:
        for c in coarse:
            if s.run(t, c) is None:
                why = stop_reason(s, t, c) or alone_above(s, t, c)
                if why is not None:
                    out.append(why)
                break
    return out


def check_skips(s: State, skips: list[Skip]) -> list[str]:
    """Where a measured curve contradicts the monotone assumption a skip relies on."""
    notes: list[str] = []
    for sk in skips:
        if not sk.assumption:
            continue
        for t in s.q.targets:
            levels = sorted(s.values(t, SATURATION_METRIC))
            means = [s.mean(t, c, SATURATION_METRIC) or 0.0 for c in levels]
            for (c0, m0), (c1, m1) in itertools.pairwise(zip(levels, means, strict=True)):
                if m1 < m0 * (1.0 - 2 * s.cfg.noise_floor_rel):
                    notes.append(
                        f"{t}'s throughput falls from {c0:g} to {c1:g} ({m1 / m0 - 1:+.0%}): "
                        f"the assumption behind skipping {sk.target} does not hold there"
                    )
    return sorted(set(notes))
