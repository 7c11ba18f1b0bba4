"""Open-loop levels too short for a steady state, told from their run summaries.

The rule is the one ``crossover.metrics.window.short_level`` applies to a level's records:
arrivals lasting under ``SHORT_LEVEL_REQUEST_TIMES`` request times (E2E p50), or a window
that served more than ``SERVED_OVER_ARRIVING`` times the arrival rate. A summary that
says so (``window.short``) is taken at its word; one stored before it could say is judged
again from what it holds: its sending span is ``(sent - 1) / arriving_rps`` (the arrival
rate counts n - 1 gaps over that span), its E2E p50 and its window's served rate are
stored. So ``crossover report`` flags such levels in sweeps measured before the rule.

Such a level's throughputs are ramp-up and drain: the overload reading takes its
non-steady path there (``crossover.analysis.overload``), and throughput crossovers leave
it out (``crossover.analysis.crossovers``, ``MetricSpec.steady_only``); latencies are per
request and stay compared. A level that path finds overloaded is told as overloaded, not
short (:func:`is_short`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from crossover.analysis.schema import SweepFile, SweepRun
from crossover.metrics.summary import RunSummary, ShortLevel
from crossover.metrics.window import (
    SHORT_LEVEL_REQUEST_TIMES,
    needed_sending_s,
    served_over,
    short_level,
    under_request_times,
)


def short_open_loop(summary: RunSummary) -> ShortLevel | None:
    """Why an open-loop run had no steady state; None for a closed loop, a level long
    enough, or one too broken to tell."""
    if summary.load.mode != "rate":
        return None
    if summary.window.short is not None:
        return summary.window.short
    arriving = summary.load.arriving_rps
    sent = summary.requests.sent
    if not arriving or sent < 2:
        return None
    e2e = summary.e2e_ms.p50
    served = None
    if summary.window.opened_by == "first_completion":
        served = summary.throughput.requests_per_s
    return short_level(
        (sent - 1) / arriving, e2e / 1000.0 if e2e is not None else None, served, arriving
    )


def is_short(run: SweepRun) -> bool:
    """A valid open-loop run too short for a steady state and not overloaded. An
    overloaded level's request time grows with the level's length, so it always reads
    short; its window's pace is the server's own (``crossover.analysis.overload``), and
    measuring longer only lengthens its queue: it is told as overloaded instead."""
    return (
        run.axis == "rate"
        and run.is_valid
        and not run.overloaded
        and short_open_loop(run.summary) is not None
    )


@dataclass(frozen=True)
class ShortRun:
    """One valid open-loop run too short for a steady state."""

    target: str
    rate: float
    repeat: int
    short: ShortLevel
    arriving_rps: float | None
    served_rps: float | None


def short_runs(sweep: SweepFile) -> list[ShortRun]:
    """The sweep's runs :func:`is_short`, by target (the sweep's order), rate and
    repeat."""
    out = []
    for r in sweep.runs:
        found = short_open_loop(r.summary)
        if found is None or not is_short(r):
            continue
        load, tp = r.summary.load, r.summary.throughput
        out.append(
            ShortRun(r.target, r.level, r.repeat, found, load.arriving_rps, tp.requests_per_s)
        )
    rank = sweep.target_rank()
    return sorted(out, key=lambda x: (rank(x.target), x.rate, x.repeat))


def _span(values: Sequence[float], fmt: str) -> str:
    lo, hi = format(min(values), fmt), format(max(values), fmt)
    return lo if lo == hi else f"{lo}-{hi}"


def format_short_levels(sweep: SweepFile) -> list[str]:
    """One line per target with short open-loop levels: which (a level where only some
    repeats were short names them), why, what its throughputs there are, and how long to
    measure instead (the longest :func:`crossover.metrics.window.needed_sending_s` among
    them: the request times', or the served share's where a window served more than
    arrived)."""
    runs = short_runs(sweep)
    valid: dict[tuple[str, float], int] = {}
    for r in sweep.runs:
        if r.axis == "rate" and r.is_valid:
            valid[(r.target, r.level)] = valid.get((r.target, r.level), 0) + 1
    lines = []
    for target in dict.fromkeys(x.target for x in runs):
        mine = [x for x in runs if x.target == target]
        levels: dict[float, list[int]] = {}
        for x in mine:
            levels.setdefault(x.rate, []).append(x.repeat)
        named = []
        for rate, reps in levels.items():
            some = len(reps) < valid.get((target, rate), 0)
            word = "repeat" if len(reps) == 1 else "repeats"
            part = f" ({word} {', '.join(str(k) for k in reps)})" if some else ""
            named.append(f"{rate:g}{part}")
        why = []
        timed = [x for x in mine if under_request_times(x.short)]
        if timed:
            sending = _span([x.short.sending_s for x in timed], ".0f")
            e2e = _span([x.short.e2e_p50_s or 0.0 for x in timed], ".1f")
            why.append(
                f"arrivals lasted {sending} s, under {SHORT_LEVEL_REQUEST_TIMES:g}x the "
                f"request time (E2E p50 {e2e} s)"
            )
        over = [x for x in mine if served_over(x.short)]
        served = ""
        if over:
            top = max(over, key=lambda x: x.short.served_share or 0.0)
            served = (
                f" (served {top.served_rps or 0.0:.3g} of {top.arriving_rps or 0.0:.3g} "
                f"req/s at {top.rate:g})"
            )
            if not timed:
                why.append("served more than arrived")
        needed = [n for x in mine if (n := needed_sending_s(x.short))]
        fix = (
            f"; measure longer (duration_s_per_level >= {math.ceil(max(needed)):d} s)"
            if needed
            else "; measure longer"
        )
        lines.append(
            f"{target} at {', '.join(named)} requests/s: {'; '.join(why)}: no steady "
            f"state, so served rate and tokens/s there are ramp-up and drain{served}, and "
            "whether it keeps up there is not measured; throughput comparisons leave these "
            f"levels out (per-request latencies stay compared){fix}"
        )
    return lines
