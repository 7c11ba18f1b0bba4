"""A decision's GPU time before it runs (``decide --check``), so a session can be planned.

Two figures, each measuring seconds plus engine starts x a start's cost: the grid (every
target's every level, every repeat, as the sweep of the same YAML measures them) and the
decision's first pass (its first-pass levels once each, the reference's repeats too where
they are taken while its engine is up). What the decision measures after its first pass
depends on what the first pass finds, so it is not estimated.

A level's measuring seconds come from the advisor's forecast (``crossover.advise.forecast
--json``): its measured requests (the sweep config's own ``requests_for``) and its
warm-up requests, each times its output tokens, over the output tokens/s the forecast
predicts for the target at that level; a level held for ``duration_s_per_level`` is that
long plus its warm-up. A level the forecast does not predict leaves the estimate out
(``None``) and is named, never guessed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from crossover.decide.coarse import REPEAT_BELOW_START
from crossover.decide.model import Question
from crossover.decide.state import PolicyConfig
from crossover.sweep.config import SweepConfig
from crossover.words import plural

#: predicted output tokens/s per target and concurrency level
OutputRates = Mapping[str, Mapping[int, float]]


@dataclass(frozen=True)
class PassEstimate:
    """One plan's predicted cost: ``runs`` level runs, ``measuring_s`` of them."""

    measuring_s: float
    runs: int
    starts: int
    start_s: float

    @property
    def gpu_s(self) -> float:
        return self.measuring_s + self.starts * self.start_s


@dataclass(frozen=True)
class SessionEstimate:
    """The grid's and the first pass's predicted cost; ``None`` where a level they
    measure is not predicted (``missing``: each such target and level)."""

    grid: PassEstimate | None
    first_pass: PassEstimate | None
    start_s: float
    missing: tuple[tuple[str, int], ...]


def run_seconds(
    cfg: SweepConfig, rates: OutputRates, target: str, c: int, *, warm_up: bool
) -> float | None:
    """One run of ``target`` at concurrency ``c``: its measuring seconds (its warm-up
    first, when ``warm_up``), or ``None`` where the forecast predicts no rate there."""
    rate = (rates.get(target) or {}).get(c)
    if rate is None or not rate > 0:
        return None
    requests = cfg.requests_for(c)
    if requests is not None:
        seconds = requests * cfg.output_tokens / rate
    else:  # the level is held for a duration
        seconds = cfg.duration_s_per_level or 0.0
    if warm_up:
        tokens = cfg.warmup_output_tokens or cfg.output_tokens
        seconds += cfg.warmup_for(c, "level") * tokens / rate
    return seconds


def _plan(
    cfg: SweepConfig,
    rates: OutputRates,
    runs: Mapping[str, Sequence[tuple[int, int]]],
    start_s: float,
    missing: list[tuple[str, int]],
) -> PassEstimate | None:
    """``runs``: per target, its (level, repeats) in the order measured, one engine start
    each target that launches one; without ``warmup_every_level`` only a start's first run
    is warmed."""
    launched = {t.name for t in cfg.targets if t.launch is not None}
    total, count, starts = 0.0, 0, 0
    lost = False
    for t, levels in runs.items():
        if not levels:
            continue
        starts += t in launched
        first = True
        for c, n in levels:
            for _ in range(n):
                s = run_seconds(cfg, rates, t, c, warm_up=first or cfg.warmup_every_level)
                first = False
                count += 1
                if s is None:
                    lost = True
                    if (t, c) not in missing:
                        missing.append((t, c))
                    continue
                total += s
    return None if lost else PassEstimate(total, count, starts, start_s)


def estimate_session(
    cfg: SweepConfig,
    grid: Mapping[str, Sequence[int]],
    first_pass: Mapping[str, Sequence[int]],
    rates: OutputRates,
    *,
    start_s: float,
    reference_repeats: int = 1,
    repeat_below_s: float | None = None,
) -> SessionEstimate:
    """The grid's cost (``grid``: each target's levels, each measured ``cfg.repeats``
    times) and the first pass's (``first_pass``: each target's first-pass levels in
    order, the first target the reference, measured ``reference_repeats`` times at each
    of its levels; with ``repeat_below_s``, a time budget's rule, only at the levels whose
    run costs less than that)."""
    missing: list[tuple[str, int]] = []
    grid_runs = {t: [(c, cfg.repeats) for c in levels] for t, levels in grid.items()}
    first_runs: dict[str, list[tuple[int, int]]] = {}
    for i, (t, levels) in enumerate(first_pass.items()):
        first_runs[t] = []
        for c in levels:
            n = reference_repeats if i == 0 else 1
            if n > 1 and repeat_below_s is not None:
                one = run_seconds(cfg, rates, t, c, warm_up=cfg.warmup_every_level)
                n = n if one is not None and one < repeat_below_s else 1
            first_runs[t].append((c, n))
    return SessionEstimate(
        grid=_plan(cfg, rates, grid_runs, start_s, missing),
        first_pass=_plan(cfg, rates, first_runs, start_s, missing),
        start_s=start_s,
        missing=tuple(missing),
    )


def decision_estimate(
    cfg: SweepConfig,
    q: Question,
    first_pass: Mapping[str, Sequence[int]],
    rates: OutputRates,
    policy: PolicyConfig,
    start_s: float,
) -> SessionEstimate:
    """:func:`estimate_session` for the decision of question ``q`` over ``cfg`` under
    ``policy``: the grid every target's levels as the sweep measures them, the reference's
    repeats where the first pass takes them while its engine is up."""
    up_front = q.group_targets and policy.reference_repeats
    return estimate_session(
        cfg,
        {t: [c for c in q.levels if q.covers(t, c)] for t in q.targets},
        first_pass,
        rates,
        start_s=start_s,
        reference_repeats=q.repeats if up_front else 1,
        # under a time budget the reference repeats a level up front only where it costs
        # less than half a start (``coarse._repeat_up_front``)
        repeat_below_s=REPEAT_BELOW_START * start_s if policy.budget is not None else None,
    )


def estimate_line(est: SessionEstimate | None, start_source: str = "") -> str:
    """The estimate in one line (``None``: no prior to estimate from); ``start_source``
    says where a start's cost comes from when it is not the default."""
    if est is None:
        return "estimate: no estimate without --prior (the forecast's output tokens/s per level)"
    if est.missing:
        where = ", ".join(f"{t} at {c}" for t, c in est.missing)
        return f"estimate: none; the prior predicts no output tokens/s for {where}"
    assert est.grid is not None
    assert est.first_pass is not None
    by = f", {start_source}" if start_source else ""
    g, f = est.grid, est.first_pass
    return (
        f"estimate (from the prior's throughput, starts {est.start_s:,.0f} s each{by}): "
        f"grid {g.measuring_s:,.0f} s measuring + {plural(g.starts, 'start')} = "
        f"{g.gpu_s / 60:.1f} GPU-min; first pass {f.measuring_s:,.0f} s + "
        f"{plural(f.starts, 'start')} = {f.gpu_s / 60:.1f} GPU-min "
        "(the rest depends on what it measures)"
    )
