"""The decide policy: from what was measured so far, the next measurement or the answer.

A pure function of its inputs (:func:`next_step`): the question, the observations in the
order they were made, the policy's settings and optionally the advisor's prediction. Each
call works out everything again from the observations, so a resumed decision (or a replay)
reaches the same step from the same evidence. The order of work (docs/decide.md):

1. **First pass**, target by target (one engine start each): the coarse levels (every
   ``coarse_step``-fold step of the grid, its last level, and the levels where the prior
   predicts a crossover), increasing. The first target (the prior's predicted leader, else
   the question's first) is the reference and is measured whole; a later target's level is
   measured first for at most ``budget_factor`` times what the reference's same level took
   (a target far behind shows it long before its level ends), and the rest only when that
   part leaves a lead open (a gap under ``partial_margin``). A target stops early when its
   throughput has saturated (grown under ``saturation_gain`` per doubling of concurrency over
   its last step; a linear curve grows 100%) and every target measured there leads it in
   throughput by ``stop_margin`` or more (significantly) and is ahead on every metric asked,
   no gap narrowing: assuming monotone curves (throughput does not fall with concurrency,
   past saturation a target's latencies grow at least as fast as the leader's), no crossover
   lies ahead. What of the assumption can be measured is checked where measured (and a
   replay checks it against the levels the grid measured).
2. **Repeats where a sign is still uncertain**: a level where one repeat each leaves a
   metric's difference under ``repeat_margin``, within twice the run-to-run spread measured
   on either target, or (before any spread is known) under ``unknown_margin``, gets the next
   repeat of both (up to the grid's repeats), so it is judged as the grid judges it.
3. **Levels where the answer can still change**: a crossover whose interval is wider than
   ``refine_width`` of its level gets the bisection of its segment
   (:func:`crossover.analysis.refine.propose_refinement`), up to ``refine_budget`` levels.

Under a time budget (``budget``) each measurement is weighed by its expected cost against
what is left, and three rules spend it: where engines start, a target's first pass keeps
to its equal part of what was left when it started, shared with the targets still waiting
(:func:`_share_left`); once every target has started, what the first pass deferred is
taken where the engine is up first; a first-pass level whose part below left a gap open
is measured whole (:func:`_rest_expected`). Where the budget ends the decision, the answer
says each deferred measurement, each inconclusive bracket's bisection and the repeat behind
each level lead found on one run of a side.

Where engines start (``group_targets``), repeats are taken while a target's engine is up:
the reference's at each of its levels (``reference_repeats``: every later target is judged
against them, and a repeat wanted later would cost a restart), a later target's where its
sign against those before it is uncertain. Steps 2 and 3 prefer the target measured last,
so its engine keeps running. A capacity
question ("which target serves the most concurrency under an SLO") instead brackets each
target's last level meeting the SLO and first level failing it, stops a target once another
meets the SLO where it fails, and bisects the brackets that decide the leader.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from crossover.analysis.crossovers import Finding, MetricSpec, compare_pair, metric_spec
from crossover.analysis.refine import bisect_level, propose_refinement
from crossover.analysis.stats import difference_interval
from crossover.decide.model import (
    SATURATION_METRIC,
    Decision,
    Deferred,
    Measure,
    Observation,
    Question,
    Skip,
    Step,
)

#: the assumption behind skipping a saturated target's remaining levels
MONOTONE = (
    "throughput does not fall as concurrency grows, and past saturation a target's "
    "latencies grow at least as fast as the leader's: the gap does not close"
)
#: a sequential level's fewest finished requests before it may stop (and one wave of
#: its closed loop: as many as it has streams)
MIN_PART = 4
#: the assumption behind a capacity question's brackets
LATENCY_GROWS = "the SLO's latency does not fall as concurrency grows"


@dataclass(frozen=True)
class PolicyConfig:
    """The policy's settings (docs/decide.md explains each)."""

    confidence: float = 0.95
    noise_floor_rel: float = 0.03
    coarse_step: float = 4.0
    budget_factor: float = 2.0
    partial_margin: float = 0.25
    repeat_margin: float = 0.10
    unknown_margin: float = 0.5
    stop_margin: float = 0.20
    saturation_gain: float = 0.35
    refine_width: float = 0.25
    refine_budget: int = 8
    reference_repeats: bool = True
    refine_inconclusive: bool = False
    #: with ``budget_factor`` 0: a later target's first-pass level stops once what
    #: finished settles it (:func:`part_settled`), as a live level does
    sequential: bool = False
    #: a time budget: at most this share of the grid's measuring time (estimated from the
    #: levels measured, :func:`grid_estimate`); a measurement that would pass it is
    #: deferred, and the answer says what it would have settled (``None``: no budget)
    budget: float | None = None
    #: an engine start's cost in the budget's seconds (a measurement of a target whose
    #: engine is not up costs this too; 0: starts are free, as a replay's measuring time)
    start_s: float = 0.0
    #: the grid's measuring time where it is known (a replay: the records'), else it is
    #: estimated from the levels measured (:func:`grid_estimate`)
    grid_s: float | None = None

    def __post_init__(self) -> None:
        if self.budget_factor < 0.0:
            raise ValueError("budget_factor must be 0 (whole levels, first pass) or more")
        if self.coarse_step <= 1.0:
            raise ValueError("coarse_step must be above 1")


Prior = Mapping[str, Mapping[int, float]]


class State:
    """The observations, indexed: the latest per (target, level, repeat)."""

    def __init__(self, q: Question, obs: Sequence[Observation], cfg: PolicyConfig) -> None:
        self.q, self.cfg = q, cfg
        self.runs: dict[tuple[str, int, int], Observation] = {}
        #: levels first measured in part whose rest was measured after (whole)
        self.rest_measured: set[tuple[str, int, int]] = set()
        for o in obs:
            if o.target in q.targets:
                key = (o.target, o.level, o.repeat)
                before = self.runs.get(key)
                if before is not None and not before.complete and o.complete:
                    self.rest_measured.add(key)
                self.runs[key] = o
        self.last_target = obs[-1].target if obs else None
        #: measurements deferred by the time budget (``next_step`` fills it)
        self.deferred: set[tuple[str, int, int]] = set()
        #: parts of levels whose rest was deferred by the budget while they leave a gap
        #: open: no level of a curve (``next_step`` fills it)
        self.unsettled: set[tuple[str, int, int]] = set()

    def run(self, t: str, c: int, r: int = 0) -> Observation | None:
        return self.runs.get((t, c, r))

    def repeats(self, t: str, c: int) -> list[Observation]:
        return [o for (tt, cc, _), o in sorted(self.runs.items()) if tt == t and cc == c]

    def levels(self, t: str) -> list[int]:
        """Levels of ``t`` with a valid observation (one the replay could not make holds
        no values and is no level of its curve)."""
        return sorted({c for (tt, c, _), o in self.runs.items() if tt == t and o.valid})

    def values(self, t: str, metric: str) -> dict[float, list[float]]:
        """Per level, the metric of each valid repeat (as the analysis takes them)."""
        path = metric_spec(metric).key
        out: dict[float, list[float]] = {}
        for key, o in sorted(self.runs.items()):
            tt, c, _ = key
            v = o.value(path)
            if tt == t and o.valid and v is not None and key not in self.unsettled:
                out.setdefault(float(c), []).append(v)
        return out

    def mean(self, t: str, c: int, metric: str) -> float | None:
        vals = self.values(t, metric).get(float(c))
        return float(np.mean(vals)) if vals else None

    def advantage(self, lead: str, other: str, c: int, metric: str) -> float | None:
        """log(lead / other) oriented so positive means ``lead`` is better."""
        a, b = self.mean(lead, c, metric), self.mean(other, c, metric)
        if a is None or b is None or a < 0 or b < 0 or a == b == 0:
            return None
        adv = math.inf if b == 0 else -math.inf if a == 0 else math.log(a / b)
        return adv if metric_spec(metric).higher_is_better else -adv

    def significant_lead(self, lead: str, other: str, c: int, metric: str) -> bool:
        a = self.values(lead, metric).get(float(c))
        b = self.values(other, metric).get(float(c))
        if not a or not b:
            return False
        d = difference_interval(
            a, b, confidence=self.cfg.confidence, noise_floor_rel=self.cfg.noise_floor_rel
        )
        better = d.lo > 0 if metric_spec(metric).higher_is_better else d.hi < 0
        return d.significant and better


def coarse_levels(
    grid: Sequence[int], step: float, extra: Sequence[int] = (), keep_last: bool = True
) -> list[int]:
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


def prior_crossings(q: Question, prior: Prior | None) -> list[int]:
    """Levels where the prior predicts two targets cross on the first metric (the upper
    level of each predicted sign change): where to look first."""
    if not prior:
        return []
    out: set[int] = set()
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
                    out.add(int(cs[k - 1]))
                    out.add(int(cs[k]))
    return sorted(out)


def _gap_open(s: State, t: str, c: int, margin: float) -> bool:
    """Whether some other target measured at ``c`` is within ``margin`` of ``t`` on some
    metric (or none is measured there): a part of the level does not settle it."""
    others = [u for u in s.q.targets if u != t and s.mean(u, c, SATURATION_METRIC) is not None]
    if not others:
        return True
    part = s.run(t, c)
    cut = part is not None and not part.complete and part.budget_cut
    for u in others:
        for m in s.q.metrics:
            adv = s.advantage(t, u, c, m)
            if adv is None or abs(adv) < math.log1p(margin):
                return True
            if cut and adv > 0 and not metric_spec(m).higher_is_better:
                # a part cut by time bounds a latency from below: it can show the target
                # behind, never ahead
                return True
    return False


def part_settled(
    q: Question,
    observations: Sequence[Observation],
    cfg: PolicyConfig,
    target: str,
    level: int,
    values: Mapping[str, float | None],
) -> str | None:
    """Why a sequential level of ``target`` may stop with ``values`` (what finished of it
    so far), if it may: every other target measured at ``level`` is at least
    ``partial_margin`` away from it on every metric asked (the same test that asks for the
    rest of a level measured in part, :func:`_gap_open`), so the rest of the level cannot
    turn a sign the analysis reads with its 3% noise floor. ``None``: go on (also where no
    other target is measured there: nothing to settle against)."""
    s = State(q, observations, cfg)
    others = [u for u in q.targets if u != target and s.mean(u, level, SATURATION_METRIC)]
    if not others:
        return None
    gaps: list[float] = []
    for u in others:
        for m in q.metrics:
            spec = metric_spec(m)
            a, b = values.get(spec.key), s.mean(u, level, m)
            if a is None or b is None or a <= 0 or b <= 0:
                return None
            adv = math.log(a / b)
            if abs(adv) < math.log1p(cfg.partial_margin):
                return None
            gaps.append(abs(adv))
    return (
        f"at least {math.expm1(min(gaps)):.0%} from {', '.join(others)} on every metric "
        f"asked (a {cfg.partial_margin:.0%} margin settles it)"
    )


def stop_reason(s: State, t: str, before: int) -> Skip | None:
    """Why ``t`` need not be measured at ``before`` and above, if it need not: its
    throughput has saturated (grown under ``saturation_gain`` per doubling of concurrency
    over its last step), and every target measured there leads it in throughput
    significantly by ``stop_margin`` or more, is ahead on every other metric of the question
    (point estimate), no gap narrowing from the step before, and its own throughput is not
    falling."""
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
    return Skip(
        t,
        skipped,
        f"{t}'s throughput saturated by {l2} ({per_doubling:+.0%} per doubling from {l1}); "
        f"{', '.join(leaders)} lead it there by {cfg.stop_margin:.0%} or more in throughput "
        f"and are ahead on {metrics}, no gap narrowing",
        MONOTONE,
        f"measured at {l1} and {l2}: {t}'s throughput flat, the leaders' not falling, "
        "the throughput lead significant, every gap as wide or wider",
    )


def alone_above(s: State, t: str, c: int) -> Skip | None:
    """``t``'s levels from ``c`` on when every other target stopped below ``c``: a level
    only one target is measured at enters no comparison."""
    others = [u for u in s.q.targets if u != t]
    if not any(s.q.covers(u, c) for u in others):
        rest = tuple(lv for lv in s.q.grid if lv >= c and s.q.covers(t, lv))
        return Skip(t, rest, "no other target is measured there (its own levels end below)")
    stops = [stop_reason(s, u, c) for u in others]
    if not stops or any(x is None for x in stops):
        return None
    for u in s.q.targets:
        if u != t and any(lv >= c for lv in s.levels(u)):
            return None
    rest = tuple(lv for lv in s.q.grid if lv >= c and s.q.covers(t, lv))
    names = ", ".join(others)
    return Skip(t, rest, f"{names} not measured there (skipped above): nothing to compare with")


def _first_pass(s: State, order: list[str], coarse: list[int]) -> Measure | None:
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
            if cfg.budget_factor <= 0:
                if cfg.sequential:
                    why = "first pass, stopped once it settles against those measured there"
                    return Measure(t, c, 0, None, why, sequential=True)
                return Measure(t, c, 0, None, "first pass")
            budget = cfg.budget_factor * ref.seconds  # warm-up included: generous
            why = f"first pass, up to {cfg.budget_factor:g}x {order[0]}'s time there"
            return Measure(t, c, 0, budget, why)
        if not o.complete and _gap_open(s, t, c, cfg.partial_margin):
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
                    _uncertain(s, t, u, c, m)
                    for u in order[:i]
                    if s.run(u, c) is not None
                    for m in q.metrics
                ):
                    return Measure(t, c, len(reps), None, "a repeat while its engine is up")
    return None


def _repeat_up_front(s: State, t: str, c: int) -> bool:
    """Whether the reference's repeat at ``c`` is taken while its engine is up, before
    any later target shows the sign there uncertain: always (``reference_repeats``), but
    under a time budget only where the level costs less than half an engine start (a
    repeat wanted later costs a start more; one never wanted costs the level)."""
    if not s.cfg.reference_repeats:
        return False
    if s.cfg.budget is None:
        return True
    return level_seconds(s, t, c) < 0.5 * s.cfg.start_s


def _pairs(q: Question) -> list[tuple[str, str]]:
    return [(a, b) for i, a in enumerate(q.targets) for b in q.targets[i + 1 :]]


def spread(s: State, t: str, metric: str) -> float | None:
    """The run-to-run difference of ``t`` on ``metric`` measured so far: the median over
    its repeated levels of the log ratio between their repeats (one outlying level does
    not make every other level look uncertain), ``None`` before any level was repeated."""
    diffs = [
        math.log(max(vals) / min(vals))
        for vals in s.values(t, metric).values()
        if len(vals) >= 2 and min(vals) > 0
    ]
    return float(np.median(diffs)) if diffs else None


def pair_noise(s: State, a: str, b: str, metric: str) -> float:
    """The relative half-width a single repeat's difference of ``a`` and ``b`` is judged
    with: the analysis's noise floor, or the run-to-run spread measured on either target
    where that is larger."""
    spreads = [x for x in (spread(s, a, metric), spread(s, b, metric)) if x is not None]
    return max([s.cfg.noise_floor_rel, *(math.expm1(x) for x in spreads)])


def _uncertain(s: State, a: str, b: str, c: int, metric: str) -> bool:
    """Whether one repeat each leaves the sign of ``a`` vs ``b`` at ``c`` uncertain: the
    difference is under ``repeat_margin``, or within twice the run-to-run spread measured
    on either target (:func:`pair_noise`), or, before either target's spread on the metric
    was measured (no level of it repeated), under ``unknown_margin``."""
    adv = s.advantage(a, b, c, metric)
    if adv is None or math.isinf(adv):
        return False
    if abs(adv) < math.log1p(s.cfg.repeat_margin):
        return True
    if spread(s, a, metric) is None or spread(s, b, metric) is None:
        return abs(adv) < math.log1p(s.cfg.unknown_margin)
    return abs(adv) < math.log1p(2.0 * pair_noise(s, a, b, metric))


def _repeats_wanted(s: State) -> list[Measure]:
    """The next repeats of levels where a sign is still uncertain."""
    q = s.q
    out: list[Measure] = []
    for a, b in _pairs(q):
        for c in sorted(set(s.levels(a)) & set(s.levels(b))):
            ra, rb = s.repeats(a, c), s.repeats(b, c)
            if len(ra) >= q.repeats and len(rb) >= q.repeats:
                continue
            if len(ra) >= 2 and len(rb) >= 2:
                continue  # Welch's interval speaks for itself
            if not any(_uncertain(s, a, b, c, m) for m in q.metrics):
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


def pair_findings(s: State, *, learned_noise: bool = False) -> list[Finding]:
    """The analysis's findings for the question's metrics and pairs over what is measured;
    a level measured once per target is judged with :func:`pair_noise` (``learned_noise``)
    or the analysis's own noise floor."""
    out: list[Finding] = []
    for a, b in _pairs(s.q):
        for m in s.q.metrics:
            spec: MetricSpec = metric_spec(m)
            noise = pair_noise(s, a, b, m) if learned_noise else s.cfg.noise_floor_rel
            out.extend(
                compare_pair(
                    a,
                    b,
                    s.values(a, m),
                    s.values(b, m),
                    spec,
                    confidence=s.cfg.confidence,
                    noise_floor_rel=noise,
                )
            )
    return out


def _snap(q: Question, lo: int, hi: int, mid: int) -> int | None:
    """``mid`` where any level may be measured, else the grid level strictly between ``lo``
    and ``hi`` nearest it in log (``None`` when there is none)."""
    if q.any_level:
        return mid
    inside = [c for c in q.grid if lo < c < hi]
    if not inside:
        return None
    return min(inside, key=lambda c: abs(math.log2(c) - math.log2(mid)))


def _refinement_wanted(s: State, coarse: list[int]) -> list[Measure]:
    """Levels between measured ones where a crossover is still wider than asked."""
    cfg, q = s.cfg, s.q
    if q.kind == "lead":
        return []
    spent = len({c for (_, c, _) in s.runs} - set(coarse))
    if spent >= cfg.refine_budget:
        return []
    out: list[Measure] = []
    every = pair_findings(s)
    for a, b in _pairs(q):
        common = sorted(set(s.levels(a)) & set(s.levels(b)))
        findings = [f for f in every if (f.a, f.b) == (a, b)]
        new = propose_refinement(
            findings,
            common,
            target_rel_width=cfg.refine_width,
            include_inconclusive=cfg.refine_inconclusive,
        )
        for mid in new:
            lo = max((c for c in common if c < mid), default=None)
            hi = min((c for c in common if c > mid), default=None)
            if lo is None or hi is None:
                continue
            level = _snap(q, lo, hi, mid)
            if level is None or level in common:
                # the grid holds no level between: as narrow as it can be
                continue
            if not (q.covers(a, level) and q.covers(b, level)):
                continue
            for t in (a, b):
                if s.run(t, level) is None and (t, level, 0) not in s.deferred:
                    u = b if t == a else a
                    out.append(Measure(t, level, 0, None, f"refining {a} vs {b}", concerns=(u,)))
    return out


def _prefer_running(s: State, wanted: list[Measure]) -> Measure | None:
    """The wanted measurement of the target measured last (its engine is up), else the
    first wanted."""
    if not wanted:
        return None
    for m in wanted:
        if m.target == s.last_target:
            return m
    return wanted[0]


def _skips(s: State, order: list[str], coarse: list[int]) -> list[Skip]:
    out: list[Skip] = []
    for t in order:
        for c in coarse:
            if s.run(t, c) is None:
                why = stop_reason(s, t, c) or alone_above(s, t, c)
                if why is not None:
                    out.append(why)
                break
    return out


def _check_skips(s: State, skips: list[Skip]) -> list[str]:
    """Where a measured curve contradicts the monotone assumption a skip relies on."""
    notes: list[str] = []
    for sk in skips:
        if not sk.assumption:
            continue
        for t in s.q.targets:
            levels = sorted(s.values(t, SATURATION_METRIC))
            means = [s.mean(t, int(c), SATURATION_METRIC) or 0.0 for c in levels]
            for (c0, m0), (c1, m1) in itertools.pairwise(zip(levels, means, strict=True)):
                if m1 < m0 * (1.0 - 2 * s.cfg.noise_floor_rel):
                    notes.append(
                        f"{t}'s throughput falls from {c0:g} to {c1:g} ({m1 / m0 - 1:+.0%}): "
                        f"the assumption behind skipping {sk.target} does not hold there"
                    )
    return sorted(set(notes))


def capacity_bracket(s: State, t: str) -> tuple[int | None, int | None]:
    """(last level meeting the SLO, first level failing it above it) over what is measured."""
    slo = s.q.slo
    assert slo is not None
    passing: int | None = None
    for c in s.levels(t):
        v = s.mean(t, c, slo.path)
        if v is None:
            continue
        if slo.holds(v):
            passing = c
        else:
            return passing, c
    return passing, None


def _capacity_step(s: State, order: list[str], coarse: list[int]) -> Step:
    q, cfg = s.q, s.cfg
    skips: list[Skip] = []
    for t in order:
        lo, hi = capacity_bracket(s, t)
        best_other = max(
            (b[0] for u in order if u != t for b in [capacity_bracket(s, u)] if b[0] is not None),
            default=None,
        )
        if hi is not None and best_other is not None and hi <= best_other:
            rest = tuple(c for c in q.grid if c > hi)
            if rest:
                skips.append(Skip(t, rest, f"{t} fails the SLO at {hi}, where another meets it",
                                  LATENCY_GROWS))  # fmt: skip
            continue
        if hi is None:
            for c in coarse:
                if s.run(t, c) is None and c > (lo or 0) and q.covers(t, c):
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
        mid = bisect_level(lo, hi)
        if mid is None:
            continue
        level = _snap(q, lo, hi, mid)
        if level is not None and s.run(t, level) is None and q.covers(t, level):
            wanted.append(Measure(t, level, 0, None, "capacity: narrowing the bracket"))
    step = _prefer_running(s, wanted)
    if step is not None:
        return step
    leader, confident = capacity_leader(brackets)
    return Decision(
        q,
        tuple(pair_findings(s)),
        cfg.confidence if confident else 0.0,
        tuple(skips),
        brackets,
        leader,
        () if confident else ("the capacity brackets overlap: no target is known to lead",),
    )


def capacity_leader(
    brackets: Mapping[str, tuple[int | None, int | None]],
) -> tuple[str | None, bool]:
    """The target with the highest level meeting the SLO, and whether it surely leads
    (its level meets the SLO where every other target has failed it)."""
    ranked = sorted(brackets.items(), key=lambda kv: -(kv[1][0] or 0))
    if not ranked or ranked[0][1][0] is None:
        return None, False
    leader, (lo, _) = ranked[0]
    assert lo is not None
    for _, (_, hi) in ranked[1:]:
        if hi is None or hi > lo:
            return leader, False
    return leader, True


def next_step(
    q: Question,
    observations: Sequence[Observation],
    cfg: PolicyConfig | None = None,
    prior: Prior | None = None,
) -> Step:
    """The next measurement to make, or the settled :class:`Decision`."""
    cfg = cfg or PolicyConfig()
    s = State(q, observations, cfg)
    order = target_order(q, prior)
    # under a time budget the grid's last level is not added to the 4-fold steps: the top
    # level is the dearest, and what it would settle is said when it is not measured
    coarse = coarse_levels(
        q.grid, cfg.coarse_step, prior_crossings(q, prior), keep_last=cfg.budget is None
    )
    if q.kind == "lead":
        coarse = list(q.grid)
    if q.kind == "capacity":
        return _capacity_step(s, order, coarse)
    deferred: list[Deferred] = []
    budget: tuple[float, float] | None = None
    if cfg.budget is not None:
        grid = cfg.grid_s if cfg.grid_s is not None else grid_estimate(s)
        budget = (cfg.budget * grid, grid)
        spent = spent_seconds(observations, cfg.start_s)
    while True:
        step = _wanted(s, order, coarse)
        if step is None or budget is None:
            break
        if step.budget_s is not None and _rest_expected(s, step):
            why = "first pass, whole: its part below left a gap open (a part would cost twice)"
            step = replace(step, budget_s=None, why=why)
        cost = measure_cost(s, step)
        if spent + cost <= min(budget[0], _share_left(s, order, observations, step, budget[0])):
            return step
        # over the budget: deferred, and the next wanted measurement is weighed instead
        key = (step.target, step.level, step.repeat)
        s.deferred.add(key)
        part = s.runs.get(key)
        if part is not None and not part.complete:
            s.unsettled.add(key)  # its part leaves a gap open: no level of the curve
        concerns = step.concerns or tuple(u for u in q.targets if u != step.target)
        deferred.append(Deferred(step.target, step.level, step.repeat, cost, step.why, concerns))
    if step is not None:
        return step
    if deferred:
        # the budget ended the decision: an inconclusive bracket's bisection is what more
        # time would measure next; said, not measured
        wide = State(q, observations, replace(cfg, refine_inconclusive=True, refine_budget=10**6))
        wide.deferred, wide.unsettled = s.deferred, s.unsettled
        for m in _refinement_wanted(wide, coarse):
            key = (m.target, m.level, m.repeat)
            if key in s.deferred:
                continue
            s.deferred.add(key)
            why = f"{m.why} (an inconclusive bracket)"
            cost = measure_cost(s, m)
            deferred.append(Deferred(m.target, m.level, m.repeat, cost, why, m.concerns))
        # a level lead resting on one run of a side, where the grid repeats: its repeat is
        # what would confirm it (the policy judged the sign certain from the spread it
        # learned elsewhere; the budget, not the evidence, stopped the repeat)
        for m in _single_run_leads(s):
            key = (m.target, m.level, m.repeat)
            same = [i for i, x in enumerate(deferred) if (x.target, x.level, x.repeat) == key]
            if same:  # deferred already for another pair: it concerns this one too
                x = deferred[same[0]]
                more = tuple(u for u in m.concerns if u not in x.concerns)
                deferred[same[0]] = replace(x, concerns=x.concerns + more)
            else:
                s.deferred.add(key)
                cost = measure_cost(s, m)
                deferred.append(Deferred(m.target, m.level, m.repeat, cost, m.why, m.concerns))
    skips = _skips(s, order, coarse)
    findings = pair_findings(s)
    notes = _check_skips(s, skips)
    if budget is not None:
        for t in order:
            skipped = {c for sk in skips if sk.target == t for c in sk.levels}
            left = [
                c for c in q.grid if q.covers(t, c) and not s.repeats(t, c) and c not in skipped
            ]
            if left:
                notes.append(
                    f"{t} not measured at {','.join(map(str, left))}: the time budget "
                    "measured the first pass's levels and those the answer needed"
                )
    return Decision(
        q,
        tuple(findings),
        cfg.confidence,
        tuple(skips),
        notes=tuple(notes),
        deferred=tuple(deferred),
        budget=budget,
    )


def _single_run_leads(s: State) -> list[Measure]:
    """The repeats that would confirm each level lead found on one run of a side (where
    the question has repeats): under a time budget, said with the answer."""
    q = s.q
    if q.repeats < 2:
        return []
    out: list[Measure] = []
    for f in pair_findings(s):
        for lv in f.per_level:
            c = int(lv.concurrency)
            if lv.lead is None:
                continue
            for t, u in ((f.a, f.b), (f.b, f.a)):
                runs = [o for o in s.repeats(t, c) if o.valid]
                if len(runs) == 1 and runs[0].complete:
                    why = f"a lead at {c} that rests on one run of {t}"
                    out.append(Measure(t, c, 1, None, why, concerns=(u,)))
    return out


def _first_pass_all(s: State, order: list[str], coarse: list[int]) -> list[Measure]:
    """Every measurement the first pass still wants, in its order (each one taken as
    deferred to find the next)."""
    out: list[Measure] = []
    saved = set(s.deferred)
    try:
        while (m := _first_pass(s, order, coarse)) is not None:
            out.append(m)
            s.deferred.add((m.target, m.level, m.repeat))
    finally:
        s.deferred = saved
    return out


def _share_left(
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
    before = spent_seconds(observations[:first], s.cfg.start_s)
    return before + (total - before) / (1 + len(waiting))


def _rest_expected(s: State, m: Measure) -> bool:
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
    return (
        last is not None and not last.complete and _gap_open(s, m.target, c, s.cfg.partial_margin)
    )


def _wanted(s: State, order: list[str], coarse: list[int]) -> Measure | None:
    """The next measurement the policy wants (first pass, repeats, refinement), the
    deferred ones aside."""
    if s.cfg.budget is not None and s.q.group_targets and set(order) <= {t for t, _, _ in s.runs}:
        # every target started: what the first pass left (the budget deferred it) is taken
        # where the engine is up first, as repeats and refinement are
        first = _prefer_running(s, _first_pass_all(s, order, coarse))
    else:
        first = _first_pass(s, order, coarse)
    if first is not None:
        return first
    return _prefer_running(s, _repeats_wanted(s)) or _prefer_running(
        s, _refinement_wanted(s, coarse)
    )


def level_seconds(s: State, t: str, c: int) -> float:
    """The measuring time of ``t``'s level ``c``, whole: as measured (a part's extrapolated
    to its planned requests), else from ``t``'s nearest level measured (no faster per
    request above it: its time times ``c`` over that level's, the saturated case; the same
    time below), else the other targets' at ``c``, else 0."""

    def own(u: str, lv: int) -> float | None:
        whole = [o.seconds for o in s.repeats(u, lv) if o.valid and o.complete and o.planned]
        return float(np.mean(whole)) if whole else None

    # a part of the level: at least what it took
    part = max((o.seconds for o in s.repeats(t, c) if not o.complete), default=0.0)
    mine = own(t, c)
    if mine is not None:
        return mine
    measured = [(lv, v) for lv in s.levels(t) if (v := own(t, lv)) is not None]
    if measured:
        # the nearest in log, the higher of two as near (a first level holds the warm-up)
        lv, v = min(measured, key=lambda x: (abs(math.log2(x[0]) - math.log2(c)), -x[0]))
        return max(part, v * math.sqrt(max(1.0, c / lv)))
    others = [v for u in s.q.targets if u != t and (v := own(u, c)) is not None]
    return max(part, float(np.mean(others)) if others else 0.0)


def grid_estimate(s: State) -> float:
    """The grid's measuring time, estimated from the levels measured: every target's
    every level and repeat (:func:`level_seconds`), and one engine start per target."""
    q = s.q
    total = sum(
        q.repeats * level_seconds(s, t, c) for t in q.targets for c in q.levels if q.covers(t, c)
    )
    return total + len(q.targets) * s.cfg.start_s


def spent_seconds(observations: Sequence[Observation], start_s: float) -> float:
    """The measuring time of every observation made (a part and the level measured
    again both count), and an engine start at each switch of target."""
    starts = sum(
        1 for i, o in enumerate(observations) if i == 0 or o.target != observations[i - 1].target
    )
    return sum(o.seconds for o in observations) + starts * start_s


def measure_cost(s: State, m: Measure) -> float:
    """What ``m`` is expected to cost: its level's time (at most its budget), and an
    engine start where its target is not the one measured last."""
    est = level_seconds(s, m.target, m.level)
    if m.budget_s is not None:
        # a part stops sending at its budget, but what is in flight then still finishes:
        # up to a wave more (a level is two waves), which the budget must allow for
        est = min(est, m.budget_s + est / 2)
    start = s.cfg.start_s if m.target != s.last_target else 0.0
    return est + start
