"""``crossover compare A B``: before/after of the headline metrics, with ratios.

A and B are two run summaries (``crossover run --json``) or two sweeps
(directories or ``sweep.json`` files). Sweeps are compared per target and
level, over valid runs only (mean over repeats); targets are paired by name, or,
when each sweep has a single target, with each other. Two sweeps along different
axes (concurrency levels against arrival rates) are not comparable.

A change is called better or worse only when the 95% interval of the ratio excludes
1 (``crossover.analysis.stats.ratio_interval_pooled``): the interval is found in log
space, so it is never below zero and reads ``[0.608x, 2.792x]``; Welch's over the repeats
when both sides have two or more, else, for one run, the assumed 3% run-to-run noise
unless its side's noise pools (below; one run has no spread of its own, and the notes say
which). Otherwise the row says ``no significant change``. A sweep side with repeats at
two or more levels of a target has its repeat noise pooled over them, per metric (the
variance of the log of the values, its degrees of freedom summed over the levels), and a
level reads the larger of that and its own spread with the pooled degrees of freedom: two
repeats alone give Welch about one degree of freedom, too few to call even a sixfold
change (the stats module says why the larger). A level such a side measured once reads
the pooled spread in place of the 3%, or the other side's own spread at that level where
its repeats there spread more (one run cannot show that its level is the noisier); a run
whose side has nothing pooled (repeats at fewer than two levels of its target) keeps the
3%, and two single runs have nothing to pool. Each side's note says what its intervals
rest on: ``pooled over 3-8 levels (df 3-8, per target and metric; 2 levels measured once
read it, or the other side's spread at the level where larger)``, or, for a level
measured once with nothing pooled, the assumed noise.

With a tie margin M (``crossover compare --tie-margin M``, as ``crossover decide`` takes
it), a ratio within M of 1 (``|ratio - 1| < M``) is no significant change however tight
its interval: the repeats of a level share one engine start, so their interval misses the
variation from one start (one machine, one day) to the next. Such a row reads
``no significant change (within 3%)`` and a line under the table counts them.

Along arrival rates the throughputs (``MetricSpec.steady_only``, ``arrival_bound`` of
``crossover.analysis.crossovers``) are read as the sweep's own crossovers read them. A level
too short for a steady state on either side (``crossover.analysis.short``) is not compared
on them: its window caught ramp-up and drain, so the row reads ``not compared (short
level)``, and that side's values there stay out of its pooled noise. A level where both
targets kept up with their arrivals (``crossover.analysis.overload.kept_up``) is a tie on
them: both served the same seeded arrivals and their windows differ only by the window's
own noise, so the row reads ``no significant change (both kept up)`` whatever its interval.
Latencies are per request and stay compared at both; an overloaded level stays compared
(its throughput is the server's capacity). A note under the table names the levels.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Final, Literal

from crossover.analysis.crossovers import (
    METRICS,
    MetricSpec,
    fmt_margin,
    kept_up_levels,
    short_levels,
)
from crossover.analysis.schema import SweepFile, level_label, summary_value
from crossover.analysis.spread import own_starts
from crossover.analysis.stats import (
    DiffInterval,
    PooledNoise,
    RatioInterval,
    difference_interval,
    pooled_log_noise,
    ratio_interval_pooled,
)
from crossover.errors import UsageError
from crossover.metrics.host import HostFacts, kinds, machine_ids, same_machines
from crossover.metrics.summary import RunSummary
from crossover.report.load import is_sweep, load_run, load_sweep


@dataclass(frozen=True)
class Headline:
    key: str
    label: str
    path: str
    higher_is_better: bool
    digits: int = 1


HEADLINES: tuple[Headline, ...] = (
    Headline("total_tokens_per_s", "total tok/s", "throughput.total_tokens_per_s", True),
    Headline("output_tokens_per_s", "output tok/s", "throughput.output_tokens_per_s", True),
    Headline("requests_per_s", "requests/s", "throughput.requests_per_s", True, 3),
    Headline("ttft_p50", "TTFT p50 ms", "ttft_ms.p50", False),
    Headline("ttft_p99", "TTFT p99 ms", "ttft_ms.p99", False),
    Headline("tpot_p50", "TPOT p50 ms", "tpot_ms.p50", False, 2),
    Headline("itl_p50", "ITL p50 ms", "itl_ms.p50", False, 2),
    Headline("e2e_p50", "E2E p50 ms", "e2e_ms.p50", False, 0),
)
SWEEP_HEADLINES = tuple(
    h for h in HEADLINES if h.key in ("total_tokens_per_s", "ttft_p50", "itl_p50")
)
#: a rate sweep leads with the output the server kept up with (as ``crossover sweep`` does),
#: and its TTFT tail: with arrivals that do not wait, the tail is where a queue or a pause
#: shows (the H100 open-loop decisions crossed on TTFT p99: docs/results/h100/moe-open,
#: moe-open-decide-freeze)
RATE_HEADLINES = tuple(
    h
    for h in HEADLINES
    if h.key in ("output_tokens_per_s", "requests_per_s", "ttft_p50", "ttft_p99")
)
#: one run has no spread of its own: the run-to-run noise assumed for it where its side
#: has nothing pooled, as the crossover analysis assumes for a single repeat
#: (``difference_interval``)
NOISE_FLOOR = 0.03
NO_CHANGE: Final = "no significant change"
#: why a throughput row at an open-loop level is not judged on its interval (the module's
#: docstring says why): ``short``, a level too short for a steady state on a side, is not
#: compared; ``kept_up``, a level where both kept up with their arrivals, is a tie
OpenLoopHold = Literal["short", "kept_up"]
HELD_TEXT: Final[dict[OpenLoopHold, str]] = {
    "short": "not compared (short level)",
    "kept_up": f"{NO_CHANGE} (both kept up)",
}


def headline_spec(h: Headline) -> MetricSpec | None:
    """The crossover analysis's spec of a headline, found by its path in a run summary
    (the two name their metrics apart: ``ttft_p50`` here is ``ttft_ms.p50`` there), so that
    compare reads the open-loop rules the analysis reads for it; None for one it lacks."""
    return _SPEC_BY_PATH.get(h.path)


_SPEC_BY_PATH: dict[str, MetricSpec] = {s.path: s for s in METRICS}


def _pools(noise: PooledNoise | None, values: tuple[float, ...]) -> bool:
    """A side's pooled noise counts at a level (as ``ratio_interval_pooled`` reads it)."""
    return noise is not None and noise.pools and len(values) >= 1 and min(values) > 0.0


@dataclass(frozen=True)
class CompareRow:
    """One metric of one group (``run``, or ``TARGET c=N`` / ``TARGET rate=R`` for
    sweeps), with the values of every repeat behind each mean."""

    group: str
    metric: Headline
    before_values: tuple[float, ...]
    after_values: tuple[float, ...]
    #: the tie margin: a ratio within this share of 1 is no significant change
    tie_rel: float = 0.0
    #: each side's repeat noise pooled over its levels (this target and metric); None
    #: for a run, or a side without repeats
    before_noise: PooledNoise | None = None
    after_noise: PooledNoise | None = None
    #: a throughput at an open-loop level that is not judged on its interval
    #: (:data:`OpenLoopHold`); None: judged as measured
    held: OpenLoopHold | None = None

    @property
    def before(self) -> float | None:
        return statistics.fmean(self.before_values) if self.before_values else None

    @property
    def after(self) -> float | None:
        return statistics.fmean(self.after_values) if self.after_values else None

    @property
    def ratio(self) -> float | None:
        """after / before."""
        if self.before is None or self.after is None or self.before == 0:
            return None
        return self.after / self.before

    @property
    def diff(self) -> DiffInterval | None:
        """after - before with its 95% interval (Welch over repeats, else the noise floor)."""
        if not self.before_values or not self.after_values:
            return None
        return difference_interval(
            self.after_values, self.before_values, noise_floor_rel=NOISE_FLOOR
        )

    @cached_property
    def _ratio_found(self) -> RatioInterval | None:
        """after / before in log space, each side's pooled noise read where it pools; None
        where a side has no value or a mean is not positive (found once per row: the
        row's fields are frozen)."""
        if not self.before_values or not self.after_values:
            return None
        return ratio_interval_pooled(
            self.after_values,
            self.before_values,
            noise_a=self.after_noise,
            noise_b=self.before_noise,
            noise_floor_rel=NOISE_FLOOR,
        )

    def pooled_sides(self) -> tuple[bool, bool]:
        """(before's, after's) noise pooled over its levels went into the interval (none
        into a short level's throughput, which is not compared)."""
        found = self._ratio_found
        if found is None or found.method != "pooled" or self.held == "short":
            return (False, False)
        return (
            _pools(self.before_noise, self.before_values),
            _pools(self.after_noise, self.after_values),
        )

    def lone_reads(self) -> tuple[str | None, str | None]:
        """(before's, after's) one run at this level, compared: ``"pooled"`` where its
        interval read the side's noise pooled over its other levels (or the other side's
        spread at this level, where larger), ``"floor"`` where it read the assumed
        run-to-run noise; None for a side with repeats here, or where nothing is
        compared (a short level's throughput is not)."""
        if not self.before_values or not self.after_values or self.held == "short":
            return (None, None)
        found = self._ratio_found
        read = "pooled" if found is not None and found.method == "pooled" else "floor"
        return (
            read if len(self.before_values) == 1 else None,
            read if len(self.after_values) == 1 else None,
        )

    @property
    def ratio_interval(self) -> tuple[float, float] | None:
        """after / before with its 95% interval, found in log space (never below zero);
        from the difference's interval where a mean is not positive."""
        if not self.before_values or not self.after_values:
            return None
        found = self._ratio_found
        if found is not None:
            return (found.lo, found.hi)
        d, b = self.diff, self.before
        if d is None or b is None or b == 0:
            return None
        return ((b + d.lo) / b, (b + d.hi) / b)

    def _significant(self) -> tuple[bool, bool] | None:
        """(the interval excludes 1, the change is up), or None where nothing is compared."""
        if self.ratio is None or not self.before_values or not self.after_values:
            return None
        found = self._ratio_found
        if found is not None:
            return found.significant, found.ratio > 1.0
        d = self.diff
        if d is None:
            return None
        return d.significant, d.mean > 0

    def _within_margin(self) -> bool:
        r = self.ratio
        return r is not None and abs(r - 1.0) < self.tie_rel

    @property
    def tied(self) -> bool:
        """The interval excludes 1 but the ratio is within the tie margin of 1: the margin
        turned a better or worse into no significant change (not a row :attr:`held`
        already, so the margin's count is its own)."""
        sig = self._significant()
        return sig is not None and sig[0] and self._within_margin() and self.held is None

    @property
    def change(self) -> Literal["better", "worse", "no significant change", ""]:
        """The verdict: ``""`` where nothing is compared (a side without a value, or a
        short level's throughput); a tie where both kept up with their arrivals."""
        sig = self._significant()
        if sig is None or self.held == "short":
            return ""
        significant, up = sig
        if not significant or self._within_margin() or self.held == "kept_up":
            return NO_CHANGE
        return "better" if up == self.metric.higher_is_better else "worse"

    @property
    def change_text(self) -> str:
        """The verdict as the table shows it: :attr:`change`, and why where it is not the
        interval's: ``not compared (short level)``, ``no significant change (both kept
        up)``, and for a row the tie margin made level, ``no significant change (within
        3%)``."""
        if self.held is not None and self._significant() is not None:
            return HELD_TEXT[self.held]
        if self.tied:
            return f"{NO_CHANGE} (within {fmt_margin(self.tie_rel)})"
        return self.change

    def cells(self) -> tuple[str, str, str, str, str, str, str]:
        d = self.metric.digits

        def fmt(v: float | None) -> str:
            return "-" if v is None else f"{v:,.{d}f}"

        # a short level's throughputs are shown, not compared: no ratio to read
        short = self.held == "short"
        r = None if short else self.ratio
        iv = None if short else self.ratio_interval
        return (
            self.group,
            self.metric.label,
            fmt(self.before),
            fmt(self.after),
            "-" if r is None else f"{r:.3f}x",
            "-" if iv is None else f"[{iv[0]:.3f}x, {iv[1]:.3f}x]",
            self.change_text,
        )


@dataclass
class Comparison:
    before: str
    after: str
    rows: list[CompareRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: why the two are not comparable: a run that is not valid (``invalid_runs``), or
    #: work that is not matched; ``crossover compare`` refuses unless ``--force``
    invalid_runs: list[str] = field(default_factory=list)
    unmatched_work: list[str] = field(default_factory=list)
    #: the tie margin the rows were read with (0: none)
    tie_rel: float = 0.0

    def tied_rows(self) -> list[CompareRow]:
        """Rows whose interval excludes 1 that the tie margin read as level."""
        return [r for r in self.rows if r.tied]

    def margin_line(self) -> str | None:
        """The line under the table with a tie margin: how many rows it turned level;
        None without one."""
        if self.tie_rel <= 0.0:
            return None
        m = fmt_margin(self.tie_rel)
        n = len(self.tied_rows())
        rows = "1 row" if n == 1 else f"{n} rows"
        flagged = sum(1 for r in self.rows if r.change in ("better", "worse"))
        return (
            f"tie margin {m}: {rows} whose interval excludes 1 but whose ratio is within "
            f"{m} of 1 read as {NO_CHANGE}; {flagged} still better or worse"
        )

    def refusal(self) -> str | None:
        """One line saying why the comparison would mislead, or None when it is sound."""
        reasons = self.invalid_runs + self.unmatched_work
        return "not comparable: " + "; ".join(reasons) if reasons else None


def _text(v: Any) -> str:
    return "-" if v is None else str(v)


def _run_text(s: RunSummary) -> str:
    """What ran: the engine (its version where known), the model, the load (a closed
    loop's concurrency or an open loop's rate)."""
    engine = s.engine.name if s.engine.version is None else f"{s.engine.name} {s.engine.version}"
    if s.load.mode == "concurrency":
        load = f"closed loop, concurrency {_text(s.load.concurrency)}"
    elif s.load.rate_rps is None:
        load = "open loop"
    else:
        load = f"open loop, {s.load.rate_rps:g} requests/s"
    return f"{engine}, model {s.engine.model}, {load}"


def _one(v: float | None) -> tuple[float, ...]:
    return () if v is None else (v,)


#: what two machines of one kind moved one YAML's results by (docs/results/h100/
#: reproducibility.md), for the note on two sides measured on two such machines
MACHINE_VARIATION = (
    "on two H100 80GB HBM3 machines it reached 4.4% in throughput and ITL p50, "
    "docs/results/h100/reproducibility.md"
)


def _machines(cmp: Comparison, a: list[HostFacts], b: list[HostFacts]) -> None:
    """A note where the two were measured on different kinds of machine (each side's
    last; a side that does not say is not judged), or on two machines of one kind (the
    last hosts' ``machine_id`` both known and different)."""
    if not a or not b:
        return
    if not same_machines(a, b):
        cmp.notes.append(
            f"machines differ: {cmp.before} on {a[-1].describe()}, {cmp.after} on "
            f"{b[-1].describe()}: a change is the machines' as much as the engines'"
        )
    elif a[-1].same_machine(b[-1]) is False:
        margin = (
            f"the tie margin of {fmt_margin(cmp.tie_rel)} allows for it"
            if cmp.tie_rel > 0.0
            else "--tie-margin allows for it"
        )
        cmp.notes.append(
            f"two machines of one kind: {cmp.before} on machine {a[-1].machine_id}, "
            f"{cmp.after} on machine {b[-1].machine_id}: machine-to-machine variation is "
            f"in every ratio ({MACHINE_VARIATION}); {margin}"
        )


def compare_runs(
    a: RunSummary, b: RunSummary, before: str = "A", after: str = "B", *, tie_rel: float = 0.0
) -> Comparison:
    """Headline metrics of two run summaries (``tie_rel``: the tie margin)."""
    cmp = Comparison(before, after, tie_rel=tie_rel)
    for h in HEADLINES:
        va, vb = _one(summary_value(a, h.path)), _one(summary_value(b, h.path))
        cmp.rows.append(CompareRow("run", h, va, vb, tie_rel))
    cmp.notes.append(
        f"one run each: no spread of their own; a change within the assumed "
        f"{NOISE_FLOOR:.0%} run-to-run noise is no significant change (repeat sweeps "
        "and compare them to measure the noise)"
    )
    if a.load.mode != b.load.mode:
        cmp.unmatched_work.append(
            f"a {a.load.mode} run vs a {b.load.mode} run (closed loop vs open loop)"
        )
    for label, s in ((before, a), (after, b)):
        if s.verdict != "valid":
            cmp.notes.append(f"{label}: verdict {s.verdict}; not a valid result")
            cmp.invalid_runs.append(f"{label} is {s.verdict}, not valid")
        cmp.notes.append(f"{label}: {_run_text(s)}")
    _machines(cmp, [a.host] if a.host else [], [b.host] if b.host else [])
    wa, wb = a.workload, b.workload
    for k in ("input_tokens", "output_tokens", "endpoint"):
        va, vb = getattr(wa, k), getattr(wb, k)
        if va != vb:
            cmp.notes.append(f"work not matched: {k} {_text(va)} vs {_text(vb)}")
            cmp.unmatched_work.append(f"{k} {_text(va)} vs {_text(vb)}")
    return cmp


def _level_values(sweep: SweepFile, target: str, path: str) -> dict[float, tuple[float, ...]]:
    vals: dict[float, list[float]] = {}
    for r in sweep.runs:
        if r.target == target and r.is_valid and (v := r.value(path)) is not None:
            vals.setdefault(r.level, []).append(v)
    return {c: tuple(v) for c, v in vals.items()}


def _span(values: set[int], unit: str) -> str:
    lo, hi = min(values), max(values)
    return f"{lo} {unit}" if lo == hi else f"{lo}-{hi} {unit}"


def _levels_once(n: int) -> str:
    return "1 level measured once" if n == 1 else f"{n} levels measured once"


def _lone_text(pooled: int, floor: int) -> str:
    """What the compared levels a side measured once read: ``; 2 levels measured once
    read it, or the other side's spread at the level where larger`` (the pooled spread, or
    the other side's repeats there), ``; 1 level measured once, with nothing pooled, reads
    the assumed 3% run-to-run noise``, or nothing."""
    parts = []
    if pooled:
        verb = "reads" if pooled == 1 else "read"
        parts.append(
            f"{_levels_once(pooled)} {verb} it, or the other side's spread at the level "
            "where larger"
        )
    if floor:
        parts.append(
            f"{_levels_once(floor)}, with nothing pooled, {'reads' if floor == 1 else 'read'} "
            f"the assumed {NOISE_FLOOR:.0%} run-to-run noise"
        )
    return "".join(f"; {p}" for p in parts)


def _pooled_text(pooled: Sequence[PooledNoise], per: str, lone: tuple[int, int] = (0, 0)) -> str:
    """``(Welch)``, or where a side's noise was pooled over its levels for some row,
    ``pooled over 6 levels (df 6, per metric)``; with what the levels it measured once
    read (``lone``: how many read the pooled spread, how many the noise floor), ``pooled
    over 3-8 levels (df 3-8, per target and metric; 2 levels measured once read it, or the
    other side's spread at the level where larger)``."""
    once = _lone_text(*lone)
    if not pooled:
        return f"(Welch{once})"
    levels = _span({p.levels for p in pooled}, "levels")
    df = _span({p.df for p in pooled}, "").strip()
    return f"pooled over {levels} (df {df}, per {per}{once})"


def _repeats_note(
    label: str,
    s: SweepFile,
    pooled: Sequence[PooledNoise] = (),
    per: str = "metric",
    lone: tuple[int, int] = (0, 0),
) -> str:
    """What a side's intervals rest on (``pooled``: its noises pooled over levels that some
    row read, ``per``: what one was pooled for, ``metric`` or ``target and metric``;
    ``lone``: how many compared levels it measured once read its pooled spread, and how
    many the noise floor, having nothing pooled)."""
    counts: dict[tuple[str, float], int] = {}
    for r in s.runs:
        if r.is_valid:
            counts[(r.target, r.level)] = counts.get((r.target, r.level), 0) + 1
    most = max(counts.values(), default=0)
    if most >= 2:
        spread = _pooled_text(pooled, per, lone)
        head = f"{label}: up to {most} repeats per level: intervals from their spread {spread}"
        if own_starts(s):
            return f"{head}, each repeat on its own engine start"
        # a level's repeats ran on one engine start: what changes from one start (or
        # machine, or day) to the next is not in their spread (docs/metrics.md)
        return (
            f"{head}; repeats measured back to back share an engine start, so "
            "start-to-start variation is not in them (restart_between_repeats measures it, "
            "--tie-margin allows for it)"
        )
    return (
        f"{label}: one repeat per level: no spread of its own; the assumed "
        f"{NOISE_FLOOR:.0%} run-to-run noise stands in (--repeats 2 or more measures it)"
    )


#: effective settings a target's record keeps that are no setting of the engine's to
#: compare (where it listened, which is another port each start) or are said apart
_NOT_SETTINGS = frozenset({"version", "url"})


def _setting_text(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return _text(v).lower()
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _target_notes(a: SweepFile, b: SweepFile, ta: str, tb: str) -> list[str]:
    """What ran on each side of one compared pair, where it differs: the engine and its
    version, and the effective settings the engine ran with (read from its log and
    endpoints: a setting the YAML left to the engine is there as the engine chose it)."""
    ia = next((t for t in a.targets if t.name == ta), None)
    ib = next((t for t in b.targets if t.name == tb), None)
    if ia is None or ib is None:
        return []
    name = ta if ta == tb else f"{ta}->{tb}"
    notes = []
    if ia.engine is not None and ib.engine is not None and ia.engine != ib.engine:
        notes.append(f"{name}: another engine: {ia.engine} vs {ib.engine}")
    elif ia.version is not None and ib.version is not None and ia.version != ib.version:
        notes.append(f"{name}: another engine version: {ia.version} vs {ib.version}")
    keys = [k for k in dict.fromkeys([*ia.settings, *ib.settings]) if k not in _NOT_SETTINGS]
    both = [k for k in keys if k in ia.settings and k in ib.settings]
    changed = [
        f"{k} {_setting_text(ia.settings[k])} -> {_setting_text(ib.settings[k])}"
        for k in both
        if ia.settings[k] != ib.settings[k]
    ]
    # a setting one side never recorded (an older crossover, a URL target) is not known
    # to differ
    one_side = len(keys) - len(both)
    if changed:
        more = f" ({one_side} more recorded on one side only)" if one_side else ""
        notes.append(
            f"{name}: settings that differ (as the engine ran): {', '.join(changed)}{more}"
        )
    return notes


def _pairs(
    na: list[str], nb: list[str], before: str, after: str, asked: Sequence[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The targets compared: those ``asked`` (each name checked against its side), else
    those of one name on both sides, else the only target of each."""
    if asked:
        for label, names, i in ((before, na, 0), (after, nb, 1)):
            missing = [p[i] for p in asked if p[i] not in names]
            if missing:
                raise UsageError(
                    f"--target: {label} has no target {missing[0]} (it holds: {', '.join(names)})"
                )
        return list(dict.fromkeys(asked))
    pairs = [(t, t) for t in na if t in nb]
    if not pairs and len(na) == 1 and len(nb) == 1:
        pairs = [(na[0], nb[0])]
    if not pairs:
        raise UsageError(
            f"no target in common: {', '.join(na)} vs {', '.join(nb)} (--target "
            f"{na[0]}={nb[0]} pairs two of them)"
        )
    return pairs


def _steady(
    values: dict[float, tuple[float, ...]], spec: MetricSpec | None, short: set[float]
) -> list[tuple[float, ...]]:
    """A side's values to pool for a metric: a throughput's without that side's short
    levels, whose spread is ramp-up and drain's, not the noise of a steady rate (the
    analysis leaves them out of every throughput comparison, ``MetricSpec.steady_only``)."""
    skip = short if spec is not None and spec.steady_only else set()
    return [v for c, v in values.items() if c not in skip]


def _held(
    spec: MetricSpec | None,
    level: float,
    short: tuple[set[float], set[float]],
    kept: set[float],
) -> OpenLoopHold | None:
    """Why a metric at an open-loop level is not judged on its interval, as the crossover
    analysis reads it: a throughput over a window (``steady_only``) at a level short on
    either side, else one that counts only what was served (``arrival_bound``) where both
    kept up; None for a latency, and for a level compared as measured (an overloaded one
    among them: its throughput is the server's capacity)."""
    if spec is None:
        return None
    if spec.steady_only and (level in short[0] or level in short[1]):
        return "short"
    if spec.arrival_bound and level in kept:
        return "kept_up"
    return None


def _rates(levels: Sequence[float]) -> str:
    return ", ".join(f"{c:g}" for c in levels)


def _held_notes(
    name: str, held_at: dict[OpenLoopHold, list[float]], short: tuple[set[float], set[float]]
) -> list[str]:
    """The notes on a pair's throughputs not judged on their intervals: the short levels
    (which side was short) and those where both kept up; none where no row was held."""
    notes = []
    if held_at["short"]:
        on: dict[str, list[float]] = {}
        for c in held_at["short"]:
            a, b = c in short[0], c in short[1]
            side = "both sides" if a and b else ("the before side" if a else "the after side")
            on.setdefault(side, []).append(c)
        where = "; ".join(f"{_rates(cs)} requests/s on {side}" for side, cs in on.items())
        notes.append(
            f"{name}: too short for a steady state at {where}: throughputs there are ramp-up "
            "and drain, not compared (latencies are)"
        )
    if held_at["kept_up"]:
        notes.append(
            f"{name}: both kept up with the arrivals at {_rates(held_at['kept_up'])} "
            "requests/s: throughputs there are the arrivals', a tie however far apart the "
            "windows read (latencies are compared)"
        )
    return notes


def compare_sweeps(
    a: SweepFile,
    b: SweepFile,
    before: str = "A",
    after: str = "B",
    *,
    tie_rel: float = 0.0,
    pairs: Sequence[tuple[str, str]] = (),
) -> Comparison:
    """Per target and level, the headline metrics of two sweeps (valid runs; ``tie_rel``:
    the tie margin; ``pairs``: which target of ``a`` against which of ``b``, else those of
    one name, or the only one of each)."""
    cmp = Comparison(before, after, tie_rel=tie_rel)
    na, nb = a.target_names(), b.target_names()
    for label, names in ((before, na), (after, nb)):
        if not names:  # else "no target in common:  vs a, b"
            raise UsageError(f"{label}: the sweep holds no target (no run in it)")
    pairs = _pairs(na, nb, before, after, pairs)
    axis_a, axis_b = a.axis(), b.axis()
    if axis_a != axis_b:
        cmp.unmatched_work.append(
            f"a {axis_a} sweep vs a {axis_b} sweep (closed-loop levels vs arrival rates)"
        )
    headlines = RATE_HEADLINES if axis_a == "rate" else SWEEP_HEADLINES
    # each side's noises pooled over its levels that some row read
    used: tuple[list[PooledNoise], list[PooledNoise]] = ([], [])
    # each side's compared levels measured once: those that read a pooled noise, the floor
    lone: tuple[dict[str, set[str]], dict[str, set[str]]] = (
        {"pooled": set(), "floor": set()},
        {"pooled": set(), "floor": set()},
    )
    open_loop = axis_a == axis_b == "rate"
    held_notes: list[str] = []
    for ta, tb in pairs:
        name = ta if ta == tb else f"{ta}->{tb}"
        values = {
            h.key: (_level_values(a, ta, h.path), _level_values(b, tb, h.path)) for h in headlines
        }
        # each side's levels too short for a steady state, and those where both kept up
        short = (
            (short_levels(a.runs, ta), short_levels(b.runs, tb)) if open_loop else (set(), set())
        )
        kept = kept_up_levels(a.runs, ta) & kept_up_levels(b.runs, tb) if open_loop else set()
        specs = {h.key: headline_spec(h) for h in headlines}

        noises = {
            h.key: (
                pooled_log_noise(_steady(values[h.key][0], specs[h.key], short[0])),
                pooled_log_noise(_steady(values[h.key][1], specs[h.key], short[1])),
            )
            for h in headlines
        }
        levels = sorted(
            {c for va, vb in values.values() for c in va}
            | {c for va, vb in values.values() for c in vb}
        )
        held_at: dict[OpenLoopHold, list[float]] = {"short": [], "kept_up": []}
        for c in levels:
            for h in headlines:
                va, vb = values[h.key]
                na_, nb_ = noises[h.key]
                group = f"{name} {level_label(axis_a, c)}"
                row = CompareRow(
                    group,
                    h,
                    va.get(c, ()),
                    vb.get(c, ()),
                    tie_rel,
                    before_noise=na_,
                    after_noise=nb_,
                    held=_held(specs[h.key], c, short, kept),
                )
                if row.held is not None and row.change_text == HELD_TEXT[row.held]:
                    if c not in held_at[row.held]:
                        held_at[row.held].append(c)
                cmp.rows.append(row)
                for side, read, noise in zip(used, row.pooled_sides(), (na_, nb_), strict=True):
                    if read and noise is not None and all(noise is not u for u in side):
                        side.append(noise)
                for once, how in zip(lone, row.lone_reads(), strict=True):
                    if how is not None:
                        once[how].add(group)
        held_notes += _held_notes(name, held_at, short)
    for ta, tb in pairs:
        cmp.notes += _target_notes(a, b, ta, tb)
    cmp.notes += held_notes
    per = "metric" if len(pairs) == 1 else "target and metric"
    for label, s, pooled, once in ((before, a, used[0], lone[0]), (after, b, used[1], lone[1])):
        counted = (len(once["pooled"]), len(once["floor"]))
        cmp.notes.append(_repeats_note(label, s, pooled, per, counted))
    for label, s in ((before, a), (after, b)):
        bad = sum(1 for r in s.runs if not r.is_valid)
        if bad:
            cmp.notes.append(f"{label}: {bad} invalid or unverified runs left out")
        if s.runs and not any(r.is_valid for r in s.runs):
            cmp.invalid_runs.append(f"{label} has no valid run")
    for label, s in ((before, a), (after, b)):
        if s.machines() > 1:
            seen = "; then ".join(h.describe() for h in kinds(s.hosts))
            cmp.notes.append(f"{label}: resumed on another machine ({seen})")
        elif len(ids := machine_ids(s.hosts)) > 1:
            cmp.notes.append(
                f"{label}: resumed on another machine of the same kind (machine "
                f"{', then '.join(ids)}): its runs were measured on {len(ids)} machines of "
                f"one kind ({MACHINE_VARIATION})"
            )
    _machines(cmp, a.hosts, b.hosts)
    wa, wb = a.workload or {}, b.workload or {}
    for k in ("input_tokens", "output_tokens", "endpoint"):
        if k in wa and k in wb and wa[k] != wb[k]:
            cmp.notes.append(f"work not matched: {k} {_text(wa[k])} vs {_text(wb[k])}")
            cmp.unmatched_work.append(f"{k} {_text(wa[k])} vs {_text(wb[k])}")
    return cmp


def compare_paths(
    a: Path, b: Path, *, tie_rel: float = 0.0, pairs: Sequence[tuple[str, str]] = ()
) -> Comparison:
    """Compare two run summaries or two sweeps, as the paths say (``tie_rel``: the tie
    margin, a ratio within it of 1 is no significant change; ``pairs``: the sweeps'
    targets to compare, before's against after's)."""
    for p in (a, b):
        if not p.exists():
            raise UsageError(f"{p}: no such file or directory")
    sa, sb = is_sweep(a), is_sweep(b)
    if sa != sb:
        # the one that is no sweep may be no run summary either (a truncated sweep.json,
        # a binary file): its own reason first, not "not one of each"
        load_run(b if sa else a)
        raise UsageError("compare two run summaries or two sweeps, not one of each")
    if sa:
        return compare_sweeps(
            load_sweep(a), load_sweep(b), str(a), str(b), tie_rel=tie_rel, pairs=pairs
        )
    if pairs:
        raise UsageError("--target pairs the targets of two sweeps; these are two runs")
    return compare_runs(load_run(a), load_run(b), str(a), str(b), tie_rel=tie_rel)


def format_table(cmp: Comparison) -> str:
    """The comparison as aligned plain text for the terminal."""
    head = ("", "metric", "before", "after", "ratio", "95% interval", "")
    rows = [head] + [r.cells() for r in cmp.rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    right = {2, 3, 4, 5}
    lines = [f"before: {cmp.before}", f"after:  {cmp.after}"]
    for r in rows:
        cells = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    margin = cmp.margin_line()
    if margin is not None:
        lines.append(margin)
    lines += [f"note: {n}" for n in cmp.notes]
    return "\n".join(lines)


def render_compare_html(cmp: Comparison, title: str = "crossover compare") -> str:
    """The comparison as a self-contained HTML page (autoescaped)."""
    from crossover.report.html import environment

    return (
        environment()
        .get_template("compare.html.j2")
        .render(
            title=title,
            generated_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            before=cmp.before,
            after=cmp.after,
            rows=[(r.cells(), r.change) for r in cmp.rows],
            margin=cmp.margin_line(),
            notes=cmp.notes,
        )
    )


def write_compare_html(cmp: Comparison, out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_compare_html(cmp), encoding="utf-8")
    return out
