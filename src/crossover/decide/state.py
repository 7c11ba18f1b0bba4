"""The decide policy's view of what was measured: its settings (:class:`PolicyConfig`),
the observations indexed (:class:`State`), and what every step reads of them: each pair's
findings, the run-to-run spread, whether a sign is still uncertain, whether a part of a
level leaves a gap open, and the wanted measurement whose engine is up."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from crossover.analysis.crossovers import (
    Finding,
    MetricSpec,
    compare_pair,
    levels_all_kept_up,
    metric_spec,
)
from crossover.analysis.overload import SERVED_SHARE
from crossover.analysis.stats import difference_interval
from crossover.decide.model import (
    SATURATION_METRIC,
    LevelNum,
    Measure,
    Observation,
    Question,
    fmt_levels,
)
from crossover.metrics.window import SHORT_LEVEL_REQUEST_TIMES

if TYPE_CHECKING:  # the policy reads no log: a caller with the sweep folder passes its pauses
    from crossover.analysis.gc import GcRun


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
    #: a side of the answer one level alone shows, on one run of a target, is confirmed by
    #: that run's repeat where the metric's repeats have moved by more than
    #: ``repeat_margin`` (:func:`crossover.decide.refine.sole_support_repeats`)
    confirm_single_runs: bool = True
    refine_inconclusive: bool = False
    #: means within this share of each other are level, not a lead or a sign (the
    #: analysis's ``tie_rel``; 0: none, the sweep's own reading)
    tie_rel: float = 0.0
    #: with ``budget_factor`` 0: a later target's first-pass level stops once what
    #: finished settles it (:func:`crossover.decide.coarse.part_settled`), as a live level does
    sequential: bool = False
    #: a time budget: at most this share of the grid's measuring time (estimated from the
    #: levels measured, :func:`crossover.decide.budget.grid_estimate`); a measurement that
    #: would pass it is deferred, and the answer says what it would have settled (``None``:
    #: no budget)
    budget: float | None = None
    #: an engine start's cost in the budget's seconds (a measurement of a target whose
    #: engine is not up costs this too; 0: starts are free, as a replay's measuring time)
    start_s: float = 0.0
    #: measured starts, per target (a replay: its database's or engine logs'; live: each
    #: engine's once started), over ``start_s`` for those targets
    start_s_of: Mapping[str, float] = field(default_factory=dict)
    #: the grid's measuring time where it is known (a replay: the records'), else it is
    #: estimated from the levels measured (:func:`crossover.decide.budget.grid_estimate`)
    grid_s: float | None = None

    def start_cost(self, target: str) -> float:
        """What starting ``target``'s engine costs the budget: measured, else ``start_s``."""
        return self.start_s_of.get(target, self.start_s)

    def __post_init__(self) -> None:
        if self.budget_factor < 0.0:
            raise ValueError("budget_factor must be 0 (whole levels, first pass) or more")
        if self.coarse_step <= 1.0:
            raise ValueError("coarse_step must be above 1")


Prior = Mapping[str, Mapping[int, float]]

#: (target, level, repeat)
RunKey = tuple[str, LevelNum, int]


class State:
    """The observations, indexed: the latest per (target, level, repeat)."""

    def __init__(self, q: Question, obs: Sequence[Observation], cfg: PolicyConfig) -> None:
        self.q, self.cfg = q, cfg
        self.runs: dict[RunKey, Observation] = {}
        #: levels first measured in part whose rest was measured after (whole)
        self.rest_measured: set[RunKey] = set()
        for o in obs:
            if o.target in q.targets:
                key = (o.target, o.level, o.repeat)
                before = self.runs.get(key)
                if before is not None and not before.complete and o.complete:
                    self.rest_measured.add(key)
                self.runs[key] = o
        self.last_target = obs[-1].target if obs else None
        #: measurements deferred by the time budget (``next_step`` fills it)
        self.deferred: set[RunKey] = set()
        #: parts of levels whose rest was deferred by the budget while they leave a gap
        #: open: no level of a curve (``next_step`` fills it)
        self.unsettled: set[RunKey] = set()
        #: ``kept_up_levels`` per target: the observations are fixed once indexed
        self._kept_up: dict[str, frozenset[float]] = {}

    def run(self, t: str, c: LevelNum, r: int = 0) -> Observation | None:
        return self.runs.get((t, c, r))

    def repeats(self, t: str, c: LevelNum) -> list[Observation]:
        return [o for (tt, cc, _), o in sorted(self.runs.items()) if tt == t and cc == c]

    def level_of(self, x: float) -> LevelNum:
        """A finding's level (the analysis holds levels as floats) as the question holds
        it: ``4`` for a concurrency, so a measurement's level and its words stay the
        sweep's; a rate as it is."""
        return int(x) if self.q.axis == "concurrency" else x

    def levels(self, t: str) -> list[LevelNum]:
        """Levels of ``t`` with a valid observation (one the replay could not make holds
        no values and is no level of its curve)."""
        return sorted({c for (tt, c, _), o in self.runs.items() if tt == t and o.valid})

    def values(self, t: str, metric: str) -> dict[float, list[float]]:
        """Per level, the metric of each valid repeat (as the analysis takes them: a
        throughput leaves out the levels where a valid repeat was an open-loop level too
        short for a steady state, ``MetricSpec.steady_only``, the whole level as
        :func:`crossover.analysis.crossovers.level_values` does)."""
        spec = metric_spec(metric)
        path = spec.key
        mine = [(key, o) for key, o in sorted(self.runs.items()) if key[0] == t and o.valid]
        skip = {float(key[1]) for key, o in mine if o.short} if spec.steady_only else set()
        out: dict[float, list[float]] = {}
        for key, o in mine:
            v = o.value(path)
            if v is not None and key not in self.unsettled and float(key[1]) not in skip:
                out.setdefault(float(key[1]), []).append(v)
        return out

    def kept_up_levels(self, t: str) -> frozenset[float]:
        """Rate levels where every valid observation of ``t`` kept up with its arrivals
        (``Observation.kept_up``; :func:`crossover.analysis.crossovers.kept_up_levels`
        over a sweep's runs), worked out once per target."""
        if t not in self._kept_up:
            self._kept_up[t] = frozenset(
                levels_all_kept_up(
                    (float(c), o.kept_up)
                    for (tt, c, _), o in self.runs.items()
                    if tt == t and o.valid
                )
            )
        return self._kept_up[t]

    def mean(self, t: str, c: LevelNum, metric: str) -> float | None:
        vals = self.values(t, metric).get(float(c))
        return float(np.mean(vals)) if vals else None

    def advantage(self, lead: str, other: str, c: LevelNum, metric: str) -> float | None:
        """log(lead / other) oriented so positive means ``lead`` is better."""
        a, b = self.mean(lead, c, metric), self.mean(other, c, metric)
        if a is None or b is None or a < 0 or b < 0 or a == b == 0:
            return None
        adv = math.inf if b == 0 else -math.inf if a == 0 else math.log(a / b)
        return adv if metric_spec(metric).higher_is_better else -adv

    def significant_lead(self, lead: str, other: str, c: LevelNum, metric: str) -> bool:
        a = self.values(lead, metric).get(float(c))
        b = self.values(other, metric).get(float(c))
        if not a or not b:
            return False
        d = difference_interval(
            a, b, confidence=self.cfg.confidence, noise_floor_rel=self.cfg.noise_floor_rel
        )
        better = d.lo > 0 if metric_spec(metric).higher_is_better else d.hi < 0
        return d.significant and better


def gap_open(s: State, t: str, c: LevelNum, margin: float) -> bool:
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


def pairs(q: Question) -> list[tuple[str, str]]:
    return [(a, b) for i, a in enumerate(q.targets) for b in q.targets[i + 1 :]]


def spread(s: State, t: str, metric: str) -> float | None:
    """The run-to-run difference of ``t`` on ``metric`` measured so far: the median over
    its repeated levels of the log ratio between their repeats (one outlying level does
    not make every other level look uncertain), ``None`` before any level was repeated."""
    diffs = list(_repeat_spreads(s, t, metric).values())
    return float(np.median(diffs)) if diffs else None


def _repeat_spreads(s: State, t: str, metric: str) -> dict[float, float]:
    """Per repeated level of ``t``, the log ratio between its largest and smallest repeat
    on ``metric``."""
    return {
        c: math.log(max(vals) / min(vals))
        for c, vals in s.values(t, metric).items()
        if len(vals) >= 2 and min(vals) > 0
    }


def largest_spread(s: State, t: str, metric: str) -> float | None:
    """The largest log ratio between the repeats of one of ``t``'s levels on ``metric``
    (``None`` before any level was repeated)."""
    at = _largest_spread_at(s, t, metric)
    return at[0] if at else None


def _largest_spread_at(s: State, t: str, metric: str) -> tuple[float, float] | None:
    """:func:`largest_spread` and the level it was measured at."""
    diffs = [(x, c) for c, x in _repeat_spreads(s, t, metric).items()]
    return max(diffs) if diffs else None


#: what a note on a moved TTFT adds where a logged pause met the level: the remedy, as
#: measured (no long collection with it against 8 without, and SGLang's TTFT p50 at
#: c = 256 547-634 ms in three repeats against 440-1,485: docs/results/h100/sglang-freeze;
#: open-loop TTFT p99 at 12 requests/s 84-92 ms against 100-304: .../sglang-freeze-open)
FREEZE_REMEDY = (
    "freeze_gc: true under {target}'s launch (the engine's own GC freeze before each "
    "level) removed such pauses where measured"
)
#: what it adds instead where the target's collector was frozen already (``GcRun.frozen``):
#: the freeze leaves out only the objects alive at it (with it, two collections of
#: 0.05-0.06 s met SGLang at 20 requests/s: docs/results/h100/moe-open-decide-freeze)
FROZEN_ALREADY = (
    "{target}'s collector was frozen then (freeze_gc: true): such pauses collect the "
    "objects made since the last freeze"
)


def moving_metric_notes(s: State, gc: Sequence[GcRun] = ()) -> list[str]:
    """A note per asked metric whose repeats of one level moved by more than
    ``repeat_margin``: the answer's intervals come from repeats back to back, and a gap
    within that movement may read otherwise in another measurement (on the H100 MoE
    decision asked twice, TTFT p50 moved up to 27-31% between repeats, and two of its
    conclusions differed: docs/results/h100/moe-warm-decide-b).

    ``gc``: the runs a logged long garbage collection met (``crossover.analysis.gc``,
    read by a caller that has the sweep folder); on a TTFT metric, a pause that met a run
    of the level named is said beside it (SGLang's front end stopping 0.5-0.74 s moved a
    closed-loop level's whole first wave: docs/results/h100/sglang-gc), with the freeze
    that removed such pauses, or, where the target's collector was frozen already
    (``GcRun.frozen``: its log shows the freeze, or its launch asked for it), that it was."""
    notes: list[str] = []
    for m in s.q.metrics:
        found = [(at, t) for t in s.q.targets if (at := _largest_spread_at(s, t, m))]
        if not found:
            continue
        (x, c), t = max(found)
        if x <= math.log1p(s.cfg.repeat_margin):
            continue
        pause = _gc_pauses_met(gc, t, c) if "ttft_ms" in m else ""
        frozen = all(g.frozen for g in gc if g.target == t and g.level == c)
        after = FROZEN_ALREADY if frozen else FREEZE_REMEDY
        notes.append(
            f"{metric_spec(m).label}: the repeats of one level moved by up to "
            f"{math.expm1(x):.0%} ({t} at {c:g}{pause}): a gap within that may read "
            "otherwise in another measurement of the same question"
            + (f"; {after.format(target=t)}" if pause else "")
        )
    return notes


def short_level_notes(s: State) -> list[str]:
    """One note where a throughput asked (``MetricSpec.steady_only``) left out open-loop
    levels too short for a steady state (``Observation.short``, the sweep's own rule): the
    answer on it rests on fewer levels than were measured, and the note says which went,
    why (arrivals under ``SHORT_LEVEL_REQUEST_TIMES`` request times, a window that served
    more than arrived, or both), and how long a level should send to keep them (the
    largest ``short_needed_s``). On the committed H100 open-loop grid (16 s of arrivals a
    level) throughput was compared at 1-4 requests/s of 1-20, and its finding read
    "(level 1)" with no word why; on docs/results/h100/moe-open-decide-freeze SGLang's 40 s
    at 20 requests/s (3.6 request times) went for a window that served 111% of arrivals,
    and the note said "arrivals under 3 request times" and 34 s."""
    asked = [metric_spec(m).label for m in s.q.metrics if metric_spec(m).steady_only]
    if not asked:
        return []
    where: dict[str, set[LevelNum]] = {}
    needed: list[float] = []
    timed = False
    shares: list[float] = []
    for (t, c, _), o in sorted(s.runs.items()):
        if o.valid and o.short:
            where.setdefault(t, set()).add(c)
            if o.short_needed_s is not None:
                needed.append(o.short_needed_s)
            timed = timed or bool(o.short_by_request_times)
            if o.short_served_share is not None:
                shares.append(o.short_served_share)
    if not where:
        return []
    at = "; ".join(f"{t} at {fmt_levels(sorted(cs))}" for t, cs in where.items())
    fix = (
        f"duration_s_per_level >= {math.ceil(max(needed)):d} s measures them"
        if needed
        else "longer levels measure them"
    )
    times = f"arrivals under {SHORT_LEVEL_REQUEST_TIMES:g} request times"
    if shares:
        low, high = f"{min(shares):.0%}", f"{max(shares):.0%}"
        served = f"served {low if low == high else f'{low[:-1]}-{high}'} of arrivals"
        why = (
            f"{times} or a window that {served}, so their window is ramp-up and drain"
            if timed
            else f"their window {served}, so it is ramp-up and drain"
        )
    elif timed:
        why = f"{times}, so their window is ramp-up and drain"
    else:  # observations that do not say why (made before they could)
        why = "their window is ramp-up and drain"
    return [
        f"{', '.join(asked)}: levels too short for a steady state left out of the "
        f"comparison ({at} requests/s: {why}; latencies there stay compared); {fix}"
    ]


def overload_notes(s: State) -> list[str]:
    """One note per target with an open-loop level it fell behind at (``Observation.
    overloaded``: served under 80% of what arrived), as the sweep's output says it
    (``crossover.analysis.crossovers.format_overloads``): its latencies there grow with the
    level's length, and its throughput is its capacity, not the rate asked."""
    where: dict[str, set[LevelNum]] = {}
    for (t, c, _), o in sorted(s.runs.items()):
        if o.valid and o.overloaded:
            where.setdefault(t, set()).add(c)
    return [
        f"{t} is overloaded at {fmt_levels(sorted(cs))} requests/s (it served under "
        f"{SERVED_SHARE:.0%} of what arrived): its queue grew through the level, so its "
        "latencies there measure how long the level lasted, and its throughput there is its "
        "capacity"
        for t, cs in where.items()
    ]


def _gc_pauses_met(gc: Sequence[GcRun], t: str, c: float) -> str:
    """``; a 0.53 s GC pause in SGLang's front end met repeat 0`` for the pauses among
    ``gc`` that met a run of ``t`` at ``c``, each once; ``""`` where none did."""
    met: dict[int, dict[tuple[str, int], float]] = {}
    engine = ""
    for x in gc:
        if x.target == t and x.level == c:
            engine = x.engine
            for p in x.pauses:
                met.setdefault(x.repeat, {})[(p.log, p.line)] = p.seconds
    if not met:
        return ""
    where = f"in {engine}'s front end met"
    if sum(len(ps) for ps in met.values()) == 1:
        ((r, ps),) = met.items()
        (sec,) = ps.values()
        return f"; a {sec:.2f} s GC pause {where} repeat {r}"
    said = [
        f"repeat {r} ({', '.join(f'{sec:.2f} s' for sec in ps.values())})"
        for r, ps in sorted(met.items())
    ]
    joined = said[0] if len(said) == 1 else f"{', '.join(said[:-1])} and {said[-1]}"
    return f"; GC pauses {where} {joined}"


def pair_noise(s: State, a: str, b: str, metric: str) -> float:
    """The relative half-width a single repeat's difference of ``a`` and ``b`` is judged
    with: the analysis's noise floor, or the run-to-run spread measured on either target
    where that is larger."""
    spreads = [x for x in (spread(s, a, metric), spread(s, b, metric)) if x is not None]
    return max([s.cfg.noise_floor_rel, *(math.expm1(x) for x in spreads)])


def uncertain(s: State, a: str, b: str, c: LevelNum, metric: str) -> bool:
    """Whether one repeat each leaves the sign of ``a`` vs ``b`` at ``c`` uncertain: the
    difference is under ``repeat_margin``, or within twice the run-to-run spread measured
    on either target (:func:`pair_noise`), or, before either target's spread on the metric
    was measured (no level of it repeated), under ``unknown_margin``. Never where both
    kept up with their arrivals on a metric that counts only what was served
    (``MetricSpec.arrival_bound``): a tie there has no sign to settle."""
    if (
        s.q.axis == "rate"
        and metric_spec(metric).arrival_bound
        and float(c) in s.kept_up_levels(a) & s.kept_up_levels(b)
    ):
        return False
    adv = s.advantage(a, b, c, metric)
    if adv is None or math.isinf(adv):
        return False
    return abs(adv) < math.log1p(sign_margin(s, a, b, metric))


def sign_margin(s: State, a: str, b: str, metric: str) -> float:
    """The relative difference under which one repeat each leaves the sign of ``a`` vs
    ``b`` uncertain (:func:`uncertain`): ``repeat_margin``, and ``unknown_margin`` before
    either target's spread on the metric was measured, else twice :func:`pair_noise`."""
    if spread(s, a, metric) is None or spread(s, b, metric) is None:
        return max(s.cfg.repeat_margin, s.cfg.unknown_margin)
    return max(s.cfg.repeat_margin, 2.0 * pair_noise(s, a, b, metric))


def pair_findings(s: State, *, learned_noise: bool = False) -> list[Finding]:
    """The analysis's findings for the question's metrics and pairs over what is measured;
    a level measured once per target is judged with :func:`pair_noise` (``learned_noise``)
    or the analysis's own noise floor."""
    out: list[Finding] = []
    for a, b in pairs(s.q):
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
                    tie_rel=s.cfg.tie_rel,
                    axis=s.q.axis,
                    kept_up=s.kept_up_levels(a) & s.kept_up_levels(b),
                )
            )
    return out


def prefer_running(s: State, wanted: list[Measure]) -> Measure | None:
    """The wanted measurement of the target measured last (its engine is up), else the
    first wanted."""
    if not wanted:
        return None
    for m in wanted:
        if m.target == s.last_target:
            return m
    return wanted[0]
