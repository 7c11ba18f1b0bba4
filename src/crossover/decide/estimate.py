"""A decision's GPU time before it runs (``decide --check``), so a session can be planned.

Two figures, each measuring seconds plus engine starts x a start's cost: the grid (every
target's every level, every repeat, as the sweep of the same YAML measures them) and the
decision's first pass (its first-pass levels once each, the reference's repeats too where
they are taken while its engine is up). The first pass is a range where some of its levels
are sequential (a later target's level that stops sending once it settles, where a stop
leaves requests unsent, :func:`crossover.decide.coarse.sequential_first_pass`): its low
end each such level stopped at its earliest (:func:`crossover.decide.coarse.
earliest_stop`), its high end each measured whole; how far a level gets depends on what
it finds, so neither end is the estimate alone. What the decision measures after its
first pass depends on what the first pass finds, so it is not estimated.

A level's measuring seconds come from the advisor's forecast (``crossover.advise.forecast
--json``): its measured requests (the sweep config's own ``requests_for``) and its
warm-up requests, each times its output tokens, over the output tokens/s the forecast
predicts for the target at that level; a level held for ``duration_s_per_level`` is that
long plus its warm-up. A level the forecast does not predict leaves the estimate out
(``None``) and is named, never guessed.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from crossover.decide.coarse import REPEAT_BELOW_START, earliest_stop, first_pass_steps
from crossover.decide.model import Question
from crossover.decide.state import PolicyConfig
from crossover.sweep.config import Level, SweepConfig
from crossover.words import plural

#: predicted output tokens/s per target and concurrency level
OutputRates = Mapping[str, Mapping[int, float]]


@dataclass(frozen=True)
class PassEstimate:
    """One plan's predicted cost: ``runs`` level runs, ``measuring_s`` of them;
    ``starts`` engine starts of ``start_s`` each on average (the targets' own costs);
    ``stopped`` of the runs counted up to their earliest stop, not whole."""

    measuring_s: float
    runs: int
    starts: int
    start_s: float
    stopped: int = 0

    @property
    def gpu_s(self) -> float:
        return self.measuring_s + self.starts * self.start_s


@dataclass(frozen=True)
class SessionEstimate:
    """The grid's and the first pass's predicted cost; ``None`` where a level they
    measure is not predicted (``missing``: each such target and level). ``first_pass``
    counts every level whole (the high end); ``first_pass_low`` each sequential level
    stopped at its earliest (the same where none is sequential)."""

    grid: PassEstimate | None
    first_pass: PassEstimate | None
    start_s: float
    missing: tuple[tuple[str, int], ...]
    first_pass_low: PassEstimate | None
    #: each launched target's start where they differ (``estimated_start`` per engine);
    #: empty where every start costs ``start_s``
    start_of: Mapping[str, float] = field(default_factory=dict)
    #: an open loop's estimate (:func:`rate_estimate`): each level its arrivals alone, so
    #: every figure is a floor (its warm-up and drain are not known without a forecast)
    arrivals_only: bool = False


def run_seconds(
    cfg: SweepConfig,
    rates: OutputRates,
    target: str,
    c: int,
    *,
    warm_up: bool,
    sent: int | None = None,
) -> float | None:
    """One run of ``target`` at concurrency ``c``: its measuring seconds (its warm-up
    first, when ``warm_up``), or ``None`` where the forecast predicts no rate there.
    ``sent``: the run stops sending once that many requests are sent (a sequential
    level's earliest stop), and the requests in flight finish: the closed loop's waves
    they take, ``ceil(sent / c)``, each as long as ``c`` requests at the predicted rate
    (at most the whole level's time)."""
    rate = (rates.get(target) or {}).get(c)
    if rate is None or not rate > 0:
        return None
    requests = cfg.requests_for(c)
    if requests is not None:
        seconds = requests * cfg.output_tokens / rate
    else:  # the level is held for a duration
        seconds = cfg.duration_s_per_level or 0.0
    if sent is not None:
        waves = math.ceil(sent / c) * c * cfg.output_tokens / rate
        seconds = min(seconds, waves)
    if warm_up:
        tokens = cfg.warmup_output_tokens or cfg.output_tokens
        seconds += cfg.warmup_for(c, "level") * tokens / rate
    return seconds


#: one target's runs in the order measured: (level, repeats, requests sent where the level
#: stops at its earliest, ``None``: whole)
Runs = Sequence[tuple[int, int, int | None]]


def _plan(
    cfg: SweepConfig,
    rates: OutputRates,
    runs: Mapping[str, Runs],
    start_s: Mapping[str, float],
    missing: list[tuple[str, int]],
) -> PassEstimate | None:
    """``runs``: per target, its (level, repeats, sent) in the order measured, one engine
    start each target that launches one (``start_s``: each one's cost); without
    ``warmup_every_level`` only a start's first run is warmed."""
    launched = {t.name: start_s[t.name] for t in cfg.targets if t.launch is not None}
    starts, started = _starts(runs, launched)
    total, count, stopped = 0.0, 0, 0
    lost = False
    for t, levels in runs.items():
        if not levels:
            continue
        first = True
        for c, n, sent in levels:
            for _ in range(n):
                warm = first or cfg.warmup_every_level
                s = run_seconds(cfg, rates, t, c, warm_up=warm, sent=sent)
                first = False
                count += 1
                stopped += sent is not None
                if s is None:
                    lost = True
                    if (t, c) not in missing:
                        missing.append((t, c))
                    continue
                total += s
    each = started / starts if starts else _uniform(start_s)
    return None if lost else PassEstimate(total, count, starts, each, stopped)


def _starts(
    runs: Mapping[str, Sequence[object]], launched: Mapping[str, float]
) -> tuple[int, float]:
    """One engine start per target with runs that launches one: their count and seconds."""
    costs = [launched[t] for t, levels in runs.items() if levels and t in launched]
    return len(costs), sum(costs)


def _uniform(start_s: Mapping[str, float]) -> float:
    """The one cost every start in ``start_s`` has, else their largest (a pass with no
    start says it; ``estimate_line`` names each where they differ)."""
    return max(start_s.values(), default=0.0)


def _per_target(cfg: SweepConfig, start_s: float | Mapping[str, float]) -> dict[str, float]:
    """Each target's start cost: one figure for all, or each one's own."""
    if isinstance(start_s, Mapping):
        return {t.name: float(start_s[t.name]) for t in cfg.targets}
    return {t.name: float(start_s) for t in cfg.targets}


def estimate_session(
    cfg: SweepConfig,
    grid: Mapping[str, Sequence[int]],
    first_pass: Mapping[str, Sequence[int]],
    rates: OutputRates,
    *,
    start_s: float | Mapping[str, float],
    reference_repeats: int = 1,
    repeat_below_s: float | None = None,
    sequential: Mapping[str, Collection[int]] | None = None,
) -> SessionEstimate:
    """The grid's cost (``grid``: each target's levels, each measured ``cfg.repeats``
    times) and the first pass's (``first_pass``: each target's first-pass levels in
    order, the first target the reference, measured ``reference_repeats`` times at each
    of its levels; with ``repeat_below_s``, a time budget's rule, only at the levels whose
    run costs less than that). ``sequential``: per later target, its first-pass levels
    measured sequentially, counted whole in ``first_pass`` and up to their earliest stop
    (:func:`crossover.decide.coarse.earliest_stop`) in ``first_pass_low``. ``start_s``: an
    engine start's cost, one for all or per target."""
    each = _per_target(cfg, start_s)
    launched = {t.name: each[t.name] for t in cfg.targets if t.launch is not None}
    missing: list[tuple[str, int]] = []
    grid_runs = {t: [(c, cfg.repeats, None) for c in levels] for t, levels in grid.items()}
    high: dict[str, list[tuple[int, int, int | None]]] = {}
    low: dict[str, list[tuple[int, int, int | None]]] = {}
    for i, (t, levels) in enumerate(first_pass.items()):
        high[t], low[t] = [], []
        mine = (sequential or {}).get(t, ())
        for c in levels:
            n = reference_repeats if i == 0 else 1
            if n > 1 and repeat_below_s is not None:
                one = run_seconds(cfg, rates, t, c, warm_up=cfg.warmup_every_level)
                n = n if one is not None and one < repeat_below_s else 1
            high[t].append((c, n, None))
            low[t].append((c, n, earliest_stop(c, cfg.requests_for(c)) if c in mine else None))
    differ = len(set(launched.values())) > 1
    return SessionEstimate(
        grid=_plan(cfg, rates, grid_runs, each, missing),
        first_pass=_plan(cfg, rates, high, each, missing),
        start_s=_uniform(launched) if launched else _uniform(each),
        missing=tuple(missing),
        first_pass_low=_plan(cfg, rates, low, each, []),
        start_of=launched if differ else {},
    )


def decision_estimate(
    cfg: SweepConfig,
    q: Question,
    first_pass: Mapping[str, Sequence[float]],
    rates: OutputRates,
    policy: PolicyConfig,
    start_s: float | Mapping[str, float],
) -> SessionEstimate:
    """:func:`estimate_session` for the decision of question ``q`` over ``cfg`` under
    ``policy``: the grid every target's levels as the sweep measures them, the reference's
    repeats where the first pass takes them while its engine is up, a later target's
    levels sequential where the live decision measures them so
    (:func:`crossover.decide.coarse.first_pass_steps`). Along concurrency only: the
    forecast is per concurrency level (a rate question takes no prior)."""
    if q.axis != "concurrency":
        raise ValueError("the forecast's estimate is along concurrency levels")
    up_front = q.group_targets and policy.reference_repeats
    steps = first_pass_steps(q, first_pass)
    reference = next(iter(first_pass), None)
    ref_start = _per_target(cfg, start_s).get(reference or "", 0.0)
    return estimate_session(
        cfg,
        {t: [int(c) for c in q.levels if q.covers(t, c)] for t in q.targets},
        {t: [int(c) for c in levels] for t, levels in first_pass.items()},
        rates,
        start_s=start_s,
        reference_repeats=q.repeats if up_front else 1,
        # under a time budget the reference repeats a level up front only where it costs
        # less than half a start (``coarse._repeat_up_front``)
        repeat_below_s=REPEAT_BELOW_START * ref_start if policy.budget is not None else None,
        sequential={t: {int(m.level) for m in mine if m.sequential} for t, mine in steps.items()},
    )


def arrival_seconds(cfg: SweepConfig, rate: float) -> float:
    """How long arrivals last at ``rate`` requests/s: the level's duration where it is held
    for one, else its measured requests over the rate (the schedule's mean length)."""
    n = cfg.requests_for_level(Level("rate", rate))
    return (cfg.duration_s_per_level or 0.0) if n is None else n / rate


def rate_estimate(
    cfg: SweepConfig,
    q: Question,
    first_pass: Mapping[str, Sequence[float]],
    policy: PolicyConfig,
    start_s: float | Mapping[str, float],
) -> SessionEstimate:
    """An open-loop decision's floor, with no forecast: each run as long as its arrivals
    (:func:`arrival_seconds`), the grid every target's rate every repeat, the first pass
    its levels once each with the reference's repeats where it takes them while its
    engine is up. A run also takes its warm-up and its drain (the requests in flight when
    arrivals stop finish: about one request's time, seconds at a high rate), which depend
    on the engine's speed: ``arrivals_only`` says the figures leave them out (measured on
    an H100, MoE shape, 40 s levels: 42-46 s a run, docs/results/h100/moe-open-decide-freeze)."""
    if q.axis != "rate":
        raise ValueError("an arrivals-only estimate is along arrival rates")
    each = _per_target(cfg, start_s)
    launched = {t.name: each[t.name] for t in cfg.targets if t.launch is not None}
    up_front = q.group_targets and policy.reference_repeats
    ref_start = each.get(next(iter(first_pass), ""), 0.0)

    def plan(runs: Mapping[str, Sequence[tuple[float, int]]]) -> PassEstimate:
        starts, started = _starts(runs, launched)
        total = sum(n * arrival_seconds(cfg, r) for levels in runs.values() for r, n in levels)
        count = sum(n for levels in runs.values() for _, n in levels)
        return PassEstimate(total, count, starts, started / starts if starts else 0.0)

    grid = {t: [(r, q.repeats) for r in q.levels if q.covers(t, r)] for t in q.targets}
    first: dict[str, list[tuple[float, int]]] = {}
    for i, (t, levels) in enumerate(first_pass.items()):
        first[t] = []
        for r in levels:
            n = q.repeats if i == 0 and up_front else 1
            # under a time budget the reference repeats a level up front only where it
            # costs less than half a start (``coarse._repeat_up_front``)
            if n > 1 and policy.budget is not None:
                n = n if arrival_seconds(cfg, r) < REPEAT_BELOW_START * ref_start else 1
            first[t].append((r, n))
    first_est = plan(first)
    return SessionEstimate(
        grid=plan(grid),
        first_pass=first_est,
        start_s=_uniform(launched) if launched else _uniform(each),
        missing=(),
        first_pass_low=first_est,
        start_of=launched if len(set(launched.values())) > 1 else {},
        arrivals_only=True,
    )


def _span(low: float, high: float, fmt: str) -> str:
    """``low-high`` as printed, or one figure where both print the same."""
    a, b = format(low, fmt), format(high, fmt)
    return a if a == b else f"{a}-{b}"


def estimate_line(est: SessionEstimate | None, start_source: str = "") -> str:
    """The estimate in one line (``None``: no prior to estimate from); ``start_source``
    says where a start's cost comes from when it is not the default. The first pass is a
    range (its sequential levels each stopped at its earliest, then each whole) where the
    two print differently, else one figure."""
    if est is None:
        return "estimate: no estimate without --prior (the forecast's output tokens/s per level)"
    if est.missing:
        shown = ", ".join(f"{t} at {c}" for t, c in est.missing[:4])
        more = len(est.missing) - 4
        where = shown + (f" and {more} more (the plan JSON lists them)" if more > 0 else "")
        return f"estimate: none; the prior predicts no output tokens/s for {where}"
    assert est.grid is not None
    assert est.first_pass is not None
    by = f", {start_source}" if start_source else ""
    g, f = est.grid, est.first_pass
    if est.start_of:  # the targets' starts differ: each said
        each = ", ".join(f"{t} {s:,.0f} s" for t, s in est.start_of.items())
        starts = f"starts {each}{by}"
    elif not g.starts:  # every target a server already running
        starts = "no engine starts: its targets are servers already up"
    else:
        starts = f"starts {est.start_s:,.0f} s each{by}"

    def plus(n: int) -> str:
        return f" + {plural(n, 'start')}" if g.starts else ""

    lo = est.first_pass_low or f
    measuring = _span(lo.measuring_s, f.measuring_s, ",.0f")
    minutes = _span(lo.gpu_s / 60, f.gpu_s / 60, ".1f")
    rest = "the rest depends on what it measures"
    if est.arrivals_only:
        return (
            f"estimate (arrivals alone, each run's warm-up and drain left out: at least; "
            f"{starts}): grid {g.measuring_s:,.0f} s measuring{plus(g.starts)} "
            f"= {g.gpu_s / 60:.1f} GPU-min; first pass {f.measuring_s:,.0f} s"
            f"{plus(f.starts)} = {f.gpu_s / 60:.1f} GPU-min ({rest})"
        )
    if measuring != format(f.measuring_s, ",.0f") or minutes != format(f.gpu_s / 60, ".1f"):
        rest = (
            f"low with {plural(lo.stopped, 'sequential level')} stopped at the first chance, "
            f"high with every level whole; {rest}"
        )
    return (
        f"estimate (from the prior's throughput, {starts}): "
        f"grid {g.measuring_s:,.0f} s measuring{plus(g.starts)} = "
        f"{g.gpu_s / 60:.1f} GPU-min; first pass {measuring} s"
        f"{plus(f.starts)} = {minutes} GPU-min ({rest})"
    )
