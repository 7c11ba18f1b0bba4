"""The decide policy's first pass: its coarse levels and target order (the prior's
predicted leader and crossings first), the next first-pass measurement (a later target's
level in part, the reference's repeats while its engine is up), and when a sequential
level may stop (:func:`part_settled`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from crossover.analysis.crossovers import metric_spec
from crossover.decide.budget import level_seconds
from crossover.decide.model import SATURATION_METRIC, LevelNum, Measure, Observation, Question
from crossover.decide.skip import alone_above, stop_reason
from crossover.decide.state import PolicyConfig, Prior, State, gap_open, sign_margin, uncertain
from crossover.words import plural

#: a sequential level's fewest finished requests before it may stop (and one wave of
#: its closed loop: as many as it has streams)
MIN_PART = 4


def coarse_levels(
    grid: Sequence[LevelNum], step: float, extra: Sequence[LevelNum] = (), keep_last: bool = True
) -> list[LevelNum]:
    """The first pass's levels: the grid's first, every ``step``-fold step, its last
    (``keep_last``), and ``extra`` (each snapped to the nearest grid level in log)."""
    levels = sorted(set(grid))
    out = [levels[0]]
    for c in levels[1:]:
        if c >= out[-1] * step:
            out.append(c)
    if keep_last and out[-1] != levels[-1]:
        out.append(levels[-1])
    for e in extra:
        out.append(min(levels, key=lambda c: abs(math.log2(c) - math.log2(max(e, 1e-9)))))
    return sorted(set(out))


def target_order(q: Question, prior: Prior | None) -> list[str]:
    """The question's targets, the prior's predicted leader first (on the first metric,
    averaged in log over the levels it predicts), the rest as the prior ranks them."""
    names = list(q.targets)
    if not prior:
        return names
    spec = metric_spec(q.metrics[0]) if q.kind != "capacity" else metric_spec(SATURATION_METRIC)

    def score(t: str) -> float:
        vals = [v for v in (prior.get(t) or {}).values() if v and v > 0]
        if not vals:
            return -math.inf
        s = float(np.mean(np.log(vals)))
        return s if spec.higher_is_better else -s

    return sorted(names, key=lambda t: (-score(t), names.index(t)))


def pass_levels(
    q: Question, prior: Prior | None, step: float, keep_last: bool = True
) -> list[LevelNum]:
    """The first pass's levels over the grid: every level of a ``lead`` question, else the
    coarse levels with the prior's predicted crossings (``keep_last``: the grid's top
    level too; the policy leaves it out under a time budget)."""
    if q.kind == "lead":
        return list(q.grid)
    out = coarse_levels(q.grid, step, prior_crossings(q, prior), keep_last=keep_last)
    if q.axis == "rate":
        out = linear_fill(q.grid, out, max(q.grid) / RATE_SPAN_PARTS)
    return out


#: along rates the first pass's levels are at most this share of the top rate apart
#: (docs/decide.md "Along rates")
RATE_SPAN_PARTS = 4


def linear_fill(grid: Sequence[LevelNum], levels: Sequence[LevelNum], gap: float) -> list[LevelNum]:
    """``levels`` with grid levels added wherever two of them are more than ``gap`` apart
    (from the lower, the highest grid level within ``gap`` of it, again from there). An
    open loop's latencies grow as the arrivals near the server's capacity (a queue's wait
    goes as 1 / (1 - load)): most of what changes lies in the top of the range, which
    4-fold steps in log cross in one step (rates 4 to 16 of a grid up to 20)."""
    out = sorted(set(levels))
    full = sorted(set(grid))
    i = 0
    while i + 1 < len(out):
        a, b = out[i], out[i + 1]
        if b - a > gap:
            near = [c for c in full if a < c < b and c - a <= gap]
            # none within the gap: the grid's next level (the gap is the grid's own)
            nxt = max(near) if near else min((c for c in full if a < c < b), default=None)
            if nxt is not None:
                out.insert(i + 1, nxt)
        i += 1
    return out


def first_pass_levels(
    q: Question, prior: Prior | None, step: float, keep_last: bool = True
) -> dict[str, list[LevelNum]]:
    """Each target's first-pass levels, in the first pass's order (the reference first),
    as ``decide --check`` prints them: :func:`pass_levels`, a target's own where another
    target is measured there too."""
    order = target_order(q, prior)
    coarse = pass_levels(q, prior, step, keep_last)
    if q.kind == "capacity":  # each target's own capacity: its levels alone
        return {t: capacity_levels(q, t, coarse) for t in order}
    # a level no other target is measured at enters no comparison
    return {
        t: [c for c in coarse if q.covers(t, c) and any(q.covers(u, c) for u in order if u != t)]
        for t in order
    }


def capacity_levels(q: Question, t: str, coarse: Sequence[LevelNum]) -> list[LevelNum]:
    """A capacity question's first-pass levels of ``t``: the coarse levels it covers and
    its own top level (a target whose levels end between coarse levels, the MoE grid's
    llama.cpp at 128 between 64 and 256, was said never to fail the SLO with its top level
    unmeasured)."""
    mine = [c for c in q.grid if q.covers(t, c)]
    return sorted({*[c for c in coarse if q.covers(t, c)], *mine[-1:]})


def prior_crossings(q: Question, prior: Prior | None) -> list[LevelNum]:
    """Levels where the prior predicts two targets cross on the first metric (the upper
    level of each predicted sign change): where to look first."""
    if not prior:
        return []
    out: set[LevelNum] = set()
    names = [t for t in q.targets if prior.get(t)]
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            common = sorted(set(prior[a]) & set(prior[b]))
            signs = [
                np.sign(prior[a][c] - prior[b][c]) for c in common if prior[a][c] != prior[b][c]
            ]
            cs = [c for c in common if prior[a][c] != prior[b][c]]
            for k in range(1, len(signs)):
                if signs[k] != signs[k - 1]:
                    out.add(cs[k - 1])
                    out.add(cs[k])
    return sorted(out)


def stop_saves(finished: int, streams: int, planned: int | None) -> bool:
    """Whether a sequential level that stops sending once ``finished`` of its ``planned``
    requests have finished leaves any request unsent. A closed loop keeps one request in
    flight on each of its ``streams``, and those finish whatever the stop (the drain): with
    no more than that left to send, the stop saves nothing, and it makes the level a part,
    which the policy measures again whole where the drained part leaves a gap open (a
    level of two waves, from its first wave on). ``planned`` unknown: it may save."""
    return planned is None or finished + streams < planned


def first_stop(streams: int) -> int:
    """The finished requests at a sequential level's first chance to stop: its first
    wave's end at the earliest (as many as its streams, at least ``MIN_PART``), at a
    wave's end (a multiple of its streams: 6 at 3 streams)."""
    n = max(streams, 1)
    return n * -(-max(streams, MIN_PART) // n)


def may_stop_at(finished: int, streams: int, planned: int | None) -> bool:
    """Whether a sequential level is asked whether it may stop once ``finished`` of its
    requests have: from its first wave on (as many as its streams, at least ``MIN_PART``),
    at a wave's end (a multiple of its streams), while a stop still saves a request
    (:func:`stop_saves`). Between waves the finished requests' tokens over the time since
    the first send read low (a wave and one request is the tokens of 1.25 waves over two
    waves' time at 4 streams): on the calibration servers a part stopped 134% from the
    other server with 5 of 16 requests finished, drained to 49%, and was measured again."""
    if finished < first_stop(streams) or finished % max(streams, 1):
        return False
    return stop_saves(finished, streams, planned)


#: why a level on the rate axis runs whole (docs/decide.md "Along rates")
WHOLE_ON_RATES = (
    "first pass, whole: an open loop's level runs whole (its arrivals do not wait on "
    "what finished, so a stop within it is no wave of a closed loop)"
)


def sequential_first_pass(q: Question, t: str, c: LevelNum) -> Measure:
    """A later target's first-pass level ``c``, sequential: it stops once what finished
    settles it, where a stop may leave requests unsent (:func:`stop_saves` at its first
    wave, the earliest it may stop); else it is measured whole, and its reason says so.
    On the rate axis every level runs whole (:data:`WHOLE_ON_RATES`)."""
    if q.axis == "rate":
        return Measure(t, c, 0, None, WHOLE_ON_RATES)
    c = int(c)
    planned, first = q.requests.get(c), first_stop(c)
    if planned is None or stop_saves(first, c, planned):
        why = "first pass, stopped once it settles against those measured there"
        return Measure(t, c, 0, None, why, sequential=True)
    why = (
        f"first pass, whole: a stop would save nothing ({plural(planned, 'request')} on "
        f"{plural(c, 'stream')}, all sent by the time {first} have finished)"
    )
    return Measure(t, c, 0, None, why)


def earliest_stop(c: int, planned: int | None) -> int | None:
    """The requests a sequential level of ``c`` streams (``planned`` of them, ``None``:
    held for a duration) has sent when it stops at its earliest, or ``None`` where it
    never stops (:func:`stop_saves`: no stop there leaves a request unsent). Its first
    chance is one wave finished (:func:`first_stop` requests, as
    :class:`crossover.decide.live.SequentialWatch` and a replay's live levels count it);
    by then every stream but the one whose request ended last has sent its next, which
    the drain lets finish: ``first_stop(c) + c - 1`` sent."""
    first = first_stop(c)
    if not stop_saves(first, c, planned):
        return None
    sent = first + c - 1
    return sent if planned is None else min(sent, planned)


def first_pass_steps(
    q: Question, first: Mapping[str, Sequence[LevelNum]]
) -> dict[str, list[Measure]]:
    """Each first-pass level as a live decision asks for it once the levels before it are
    measured (its levels are live: ``budget_factor`` 0, sequential; :func:`first_pass`):
    the reference's whole; a later target's whole where the reference is not measured
    there (nothing to settle against), else as :func:`sequential_first_pass` says:
    sequential where a stop after its first wave may leave requests unsent, whole where
    it would save none (two waves). ``first``: :func:`first_pass_levels`."""
    order = list(first)
    ref = first[order[0]] if order else []
    return {
        t: [
            sequential_first_pass(q, t, c)
            if i and c in ref
            else Measure(t, c, 0, None, "first pass")
            for c in levels
        ]
        for i, (t, levels) in enumerate(first.items())
    }


def part_settled(
    q: Question,
    observations: Sequence[Observation],
    cfg: PolicyConfig,
    target: str,
    level: LevelNum,
    values: Mapping[str, float | None],
) -> str | None:
    """Why a sequential level of ``target`` may stop with ``values`` (what finished of it
    so far), if it may: every other target measured at ``level`` is at least
    ``partial_margin`` away from it on every metric asked (the same test that asks for the
    rest of a level measured in part, :func:`crossover.decide.state.gap_open`), so the rest
    of the level cannot turn a sign the analysis reads with its 3% noise floor. ``None``: go
    on (also where no other target is measured there: nothing to settle against)."""
    s = State(q, observations, cfg)
    others = [u for u in q.targets if u != target and s.mean(u, level, SATURATION_METRIC)]
    if not others:
        return None
    gaps: list[float] = []
    margins: list[float] = []
    # a first run whose sign the repeat rule would call uncertain (refine.repeats_wanted)
    # is measured again whole: a part stopped short of that margin was paid for twice
    # (calibration servers: a part at 47% against the 50% asked before any spread is
    # known, then the level whole, "a close difference")
    again = q.repeats > 1 and not [o for o in s.repeats(target, level) if o.complete]
    for u in others:
        for m in q.metrics:
            spec = metric_spec(m)
            a, b = values.get(spec.key), s.mean(u, level, m)
            if a is None or b is None or a <= 0 or b <= 0:
                return None
            adv = math.log(a / b)
            need = max(cfg.partial_margin, sign_margin(s, target, u, m) if again else 0.0)
            if abs(adv) < math.log1p(need):
                return None
            gaps.append(abs(adv))
            margins.append(need)
    return (
        f"at least {math.expm1(min(gaps)):.0%} from {', '.join(others)} on every metric "
        f"asked (a {max(margins):.0%} margin settles it)"
    )


def first_pass(s: State, order: list[str], coarse: list[LevelNum]) -> Measure | None:
    """The first pass's next measurement, or ``None`` when it is done: target by target
    where engines start (``q.group_targets``), else level by level (every target at a
    level before the next level, so the stop rule can cut any target, the first too)."""
    cfg, q = s.cfg, s.q
    grouped = q.group_targets
    if grouped:
        cells = [(i, t, c) for i, t in enumerate(order) for c in coarse]
    else:
        cells = [(i, t, c) for c in coarse for i, t in enumerate(order)]
    stopped: set[str] = set()
    for i, t, c in cells:
        if t in stopped or not q.covers(t, c):
            continue
        o = s.run(t, c)
        if o is None and (t, c, 0) in s.deferred:
            continue
        if o is None:
            if stop_reason(s, t, c) is not None:
                stopped.add(t)
                continue
            if alone_above(s, t, c) is not None:
                continue
            ref = s.run(order[0], c) if i > 0 else None
            if ref is None or not ref.complete or ref.seconds <= 0:
                return Measure(t, c, 0, None, "first pass")
            if q.axis == "rate":
                # an open loop's level is not cut at a time (docs/decide.md "Along rates")
                return Measure(t, c, 0, None, WHOLE_ON_RATES)
            if cfg.budget_factor <= 0:
                if cfg.sequential:
                    return sequential_first_pass(q, t, c)
                return Measure(t, c, 0, None, "first pass")
            budget = cfg.budget_factor * ref.seconds  # warm-up included: generous
            why = f"first pass, up to {cfg.budget_factor:g}x {order[0]}'s time there"
            return Measure(t, c, 0, budget, why)
        if not o.complete and gap_open(s, t, c, cfg.partial_margin):
            if (t, c, 0) in s.deferred:
                continue
            return Measure(t, c, 0, None, "the level's first part left a lead open")
        if grouped:
            # while its engine is up: the reference's repeats (every later target is judged
            # against them), a later target's where a sign against those before is uncertain
            reps = s.repeats(t, c)
            if (t, c, len(reps)) in s.deferred:
                continue
            if len(reps) < q.repeats and reps[-1].complete:
                if (i == 0 and _repeat_up_front(s, t, c)) or any(
                    uncertain(s, t, u, c, m)
                    for u in order[:i]
                    if s.run(u, c) is not None
                    for m in q.metrics
                ):
                    return Measure(t, c, len(reps), None, "a repeat while its engine is up")
    return None


#: under a time budget the reference repeats a level up front only where a run costs less
#: than this share of an engine start (``decide --check``'s estimate applies it too)
REPEAT_BELOW_START = 0.5


def _repeat_up_front(s: State, t: str, c: LevelNum) -> bool:
    """Whether the reference's repeat at ``c`` is taken while its engine is up, before
    any later target shows the sign there uncertain: always (``reference_repeats``), but
    under a time budget only where the level costs less than half an engine start (a
    repeat wanted later costs a start more; one never wanted costs the level)."""
    if not s.cfg.reference_repeats:
        return False
    if s.cfg.budget is None:
        return True
    return level_seconds(s, t, c) < REPEAT_BELOW_START * s.cfg.start_cost(t)


def first_pass_all(s: State, order: list[str], coarse: list[LevelNum]) -> list[Measure]:
    """Every measurement the first pass still wants, in its order (each one taken as
    deferred to find the next)."""
    out: list[Measure] = []
    saved = set(s.deferred)
    try:
        while (m := first_pass(s, order, coarse)) is not None:
            out.append(m)
            s.deferred.add((m.target, m.level, m.repeat))
    finally:
        s.deferred = saved
    return out
