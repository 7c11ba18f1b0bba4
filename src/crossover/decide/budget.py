"""The decide policy's time budget: what a measurement is expected to cost, what was spent,
the grid's measuring time, and the rules that spend the budget (a target's share of what
is left where engines start, a first-pass level measured whole where a part would cost
twice). The policy module's docstring says how the rules fit together."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from crossover.decide.model import LevelNum, Measure, Observation
from crossover.decide.state import PolicyConfig, State, gap_open


def share_left(
    s: State, order: list[str], observations: Sequence[Observation], step: Measure, total: float
) -> float:
    """Under a time budget, where engines start and targets wait to be started after
    ``step``'s: the spending up to which ``step`` may go, its target's equal part of what
    was left when it started (the budget less what the targets before it spent), shared
    with every target still waiting. So each target's first pass measures its cheap levels
    before one target's dear levels take what the others need to be compared at all; what
    a target leaves of its part goes to those after it, and once every target has started
    the whole budget (``total``) is open to what was deferred."""
    if not s.q.group_targets:
        return total  # level by level: every target is measured at a level before the next
    started = {o.target for o in observations}
    waiting = [t for t in order if t not in started and t != step.target]
    if not waiting:
        return total
    # what was spent before ``step``'s target started (all of it, where it starts now)
    first = next(
        (i for i, o in enumerate(observations) if o.target == step.target), len(observations)
    )
    before = spent_seconds(observations[:first], s.cfg)
    return before + (total - before) / (1 + len(waiting))


def rest_expected(s: State, m: Measure) -> bool:
    """Whether ``m`` (a first-pass level cut at a time) is expected to want its rest: its
    target's level below was a part that left a gap open (its rest was measured, or is
    still wanted). Under a time budget it is measured whole: the part and then the whole
    level would both be paid, and a part whose rest the budget defers settles nothing."""
    below = [c for c in s.levels(m.target) if c < m.level]
    if not below:
        return False
    c = below[-1]
    if (m.target, c, 0) in s.rest_measured:
        return True
    last = s.run(m.target, c)
    return last is not None and not last.complete and gap_open(s, m.target, c, s.cfg.partial_margin)


def level_seconds(s: State, t: str, c: LevelNum) -> float:
    """The measuring time of ``t``'s level ``c``, whole: as measured (a part's extrapolated
    to its planned requests), else from ``t``'s nearest level measured (no faster per
    request above it: its time times ``c`` over that level's, the saturated case; the same
    time below), else the other targets' at ``c``, else 0. Along rates a level takes its
    sending time and about one request time after (:func:`rate_level_seconds`)."""

    def own(u: str, lv: LevelNum) -> float | None:
        whole = [o.seconds for o in s.repeats(u, lv) if o.valid and o.complete and o.planned]
        return float(np.mean(whole)) if whole else None

    # a part of the level: at least what it took
    part = max((o.seconds for o in s.repeats(t, c) if not o.complete), default=0.0)
    mine = own(t, c)
    if mine is not None:
        return mine
    measured = [(lv, v) for lv in s.levels(t) if (v := own(t, lv)) is not None]
    if measured and s.q.axis == "rate":
        return max(part, rate_level_seconds(s, c, measured))
    if measured:
        # the nearest in log, the higher of two as near (a first level holds the warm-up)
        lv, v = min(measured, key=lambda x: (abs(math.log2(x[0]) - math.log2(c)), -x[0]))
        return max(part, v * math.sqrt(max(1.0, c / lv)))
    others = [v for u in s.q.targets if u != t and (v := own(u, c)) is not None]
    return max(part, float(np.mean(others)) if others else 0.0)


def rate_level_seconds(s: State, c: LevelNum, measured: Sequence[tuple[LevelNum, float]]) -> float:
    """An open-loop level of ``c`` requests/s not yet measured: its arrivals take their
    sending time whatever the server does (``requests / c``, the same time where levels
    are held for a duration, ``planned`` unknown), and the last ones finish about one
    request time after; that request time is the nearest measured level's time less its
    own sending time (the nearest in log, the higher of two as near)."""
    lv, v = min(measured, key=lambda x: (abs(math.log2(x[0]) - math.log2(c)), -x[0]))
    n_lv, n_c = s.q.requests.get(lv), s.q.requests.get(c)
    if n_lv is None or n_c is None:
        return v  # held for a duration: as long as the level measured
    tail = max(0.0, v - n_lv / lv)
    return n_c / c + tail


def grid_estimate(s: State) -> float:
    """The grid's measuring time, estimated from the levels measured: every target's
    every level and repeat (:func:`level_seconds`), and one engine start per target."""
    q = s.q
    total = sum(
        q.repeats * level_seconds(s, t, c) for t in q.targets for c in q.levels if q.covers(t, c)
    )
    return total + sum(s.cfg.start_cost(t) for t in q.targets)


def spent_seconds(observations: Sequence[Observation], cfg: PolicyConfig) -> float:
    """The measuring time of every observation made (a part and the level measured
    again both count), and an engine start (its target's cost) at each switch of target."""
    starting = sum(
        cfg.start_cost(o.target)
        for i, o in enumerate(observations)
        if i == 0 or o.target != observations[i - 1].target
    )
    return sum(o.seconds for o in observations) + starting


def measure_cost(s: State, m: Measure) -> float:
    """What ``m`` is expected to cost: its level's time (at most its budget), and an
    engine start where its target is not the one measured last."""
    est = level_seconds(s, m.target, m.level)
    if m.budget_s is not None:
        # a part stops sending at its budget, but what is in flight then still finishes:
        # up to a wave more (a level is two waves), which the budget must allow for
        est = min(est, m.budget_s + est / 2)
    start = s.cfg.start_cost(m.target) if m.target != s.last_target else 0.0
    return est + start
