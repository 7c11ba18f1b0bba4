"""Crossovers between targets, with intervals from repeated runs (docs/metrics.md).

For each metric and each pair of targets (A, B), over the concurrency levels
where both have valid runs: the difference ``d(c) = A - B`` with a confidence
interval from the repeats (:func:`crossover.analysis.stats.difference_interval`).
A level is a significant lead for A or B when its interval excludes zero
(oriented by the metric's direction: more throughput, less latency).

* **crossover**: two consecutive significant levels with opposite leaders
  (only non-significant levels between them). Located where the two curves cross
  when each is interpolated linearly in log(value) against log2(concurrency) between
  measured levels (where log(A / B) is zero): the report draws its curves with the same
  interpolation, so they cross at the dashed line. The interval is where the
  interpolated confidence band of the relative difference contains zero (from where one
  bound crosses zero to where the other does), clipped to the bracketing levels.
* **inconclusive**: the point estimate changes sign but the leads around it
  are not significant (or not opposite); no crossover is claimed.
* **none**: no sign change over the levels measured.

Invalid and unverified runs never become points here. A rate sweep's runs are
compared the same way along the rate axis (requests/s); runs on different axes are
never compared with each other. An overloaded rate level (more arrived than the server
served: ``crossover.analysis.overload``) stays a point: its throughput is the server's
capacity, and its latencies, which grow with the level's length, still say who fell
behind; the sweep's output and report flag it. An open-loop level too short for a steady
state (``crossover.analysis.short``: its arrivals lasted under 3 request times, or it
served more than arrived) is left out of the throughput comparisons only
(``MetricSpec.steady_only``): its window caught ramp-up and drain, so its tokens/s and
requests/s are no rate the server keeps, while each request's latencies are still what
that request met. An overloaded level that is short too stays a point, as above. Leaving
a short level out is one filter on the values compared; the short-levels line says which
levels went. An open-loop level where both targets **kept up** with their arrivals
(``crossover.analysis.overload.kept_up``: a steady window that served at least 90% of
them) is a tie on the throughputs that only count what was served
(``MetricSpec.arrival_bound``: tokens/s, requests/s; not goodput, which also counts who
met the SLO): both served the same seeded arrivals, and what their windows count differs
by the window's own noise (vLLM's served 97-99% of its arrivals at 12 and 16 requests/s,
SGLang's 102-105%, on docs/results/h100/moe-open-decide-freeze, and that read as a lead).
Such a level has no sign, as a tie-margin tie has none, and the finding says where both
kept up.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from decimal import ROUND_HALF_UP, Decimal
from typing import Literal

import numpy as np

from crossover.analysis.schema import Axis, Crossover, Inconclusive, SweepFile, SweepRun
from crossover.analysis.stats import DiffInterval, difference_interval


@dataclass(frozen=True)
class MetricSpec:
    """A metric compared between targets: where it is in a run summary, which way is better."""

    key: str
    label: str
    path: str
    higher_is_better: bool
    unit: str
    #: only some runs have it (summaries that predate it, open-loop runs): a sweep where no
    #: run has it says nothing about it rather than "no level with valid runs" per pair
    optional: bool = False
    #: the axes it is compared along
    axes: tuple[Axis, ...] = ("concurrency", "rate")
    #: a rate over the run's window (throughput, goodput): open-loop levels too short for
    #: a steady state are left out of its comparisons (``crossover.analysis.short``), as
    #: their window caught ramp-up and drain; latencies are per request and keep them
    steady_only: bool = False
    #: counts only what was served (tokens/s, requests/s): at an open-loop level where
    #: both targets kept up with their arrivals it is the arrivals' figure, not the
    #: engine's, so such a level is a tie (``crossover.analysis.overload.kept_up``)
    arrival_bound: bool = False


METRICS: tuple[MetricSpec, ...] = (
    MetricSpec(
        "total_tokens_per_s",
        "total tokens/s",
        "throughput.total_tokens_per_s",
        True,
        "tok/s",
        steady_only=True,
        arrival_bound=True,
    ),
    MetricSpec(
        "output_tokens_per_s",
        "output tokens/s",
        "throughput.output_tokens_per_s",
        True,
        "tok/s",
        steady_only=True,
        arrival_bound=True,
    ),
    # requests/s meeting every SLO term: only runs measured with --slo have it
    MetricSpec(
        "goodput_rps",
        "goodput",
        "goodput.requests_per_s",
        True,
        "req/s",
        optional=True,
        steady_only=True,
    ),
    # an open loop: requests completed per second, against the rate they arrived at
    MetricSpec(
        "requests_per_s",
        "requests/s done",
        "throughput.requests_per_s",
        True,
        "req/s",
        axes=("rate",),
        steady_only=True,
        arrival_bound=True,
    ),
    MetricSpec("ttft_ms.p50", "TTFT p50", "ttft_ms.p50", False, "ms"),
    MetricSpec("ttft_ms.p99", "TTFT p99", "ttft_ms.p99", False, "ms"),
    # the first wave of a closed-loop level: the same arrivals for every engine (a TTFT p50
    # crossover that this one does not repeat comes from how the later requests arrived)
    MetricSpec(
        "first_wave_ttft_ms.p50",
        "TTFT p50 (first wave)",
        "waves.first_ttft_ms.p50",
        False,
        "ms",
        optional=True,
    ),
    MetricSpec("itl_ms.p50", "ITL p50", "itl_ms.p50", False, "ms"),
    MetricSpec("tpot_ms.p50", "TPOT p50", "tpot_ms.p50", False, "ms"),
)


def metric_spec(key: str) -> MetricSpec:
    """The spec of a metric key; an unknown key is a throughput-like metric at that path."""
    for spec in METRICS:
        if spec.key == key:
            return spec
    return MetricSpec(key, key, key, not key.endswith("_ms") and "_ms." not in key, "")


@dataclass(frozen=True)
class LevelDiff:
    """A - B at one level (concurrency, or rate in a rate sweep). ``lead`` is the target
    that leads significantly there, or ``None`` when the interval contains zero."""

    concurrency: float
    diff: DiffInterval
    mean_a: float
    mean_b: float
    n_a: int
    n_b: int
    lead: str | None
    #: the two means within the tie margin of each other (``compare_pair(tie_rel=...)``):
    #: level there, neither a lead nor a sign
    tie: bool = False
    #: an open-loop level where both kept up with their arrivals, on a metric that counts
    #: only what was served (``MetricSpec.arrival_bound``): a tie too
    kept_up: bool = False


@dataclass(frozen=True)
class Finding:
    """What one metric shows for one pair of targets over the measured range.

    ``kind`` is ``crossover`` (``below``/``above``/``concurrency``/``interval``
    set), ``inconclusive`` (``bracket`` set) or ``none`` (``leader`` is who leads
    everywhere significantly, ``None`` if nobody does). Along ``axis`` ``rate``,
    ``concurrency``, ``levels`` and ``bracket`` are arrival rates (requests/s).
    """

    kind: Literal["crossover", "inconclusive", "none"]
    metric: str
    a: str
    b: str
    levels: tuple[float, ...]
    below: str | None = None
    above: str | None = None
    concurrency: float | None = None
    interval: tuple[float, float] | None = None
    bracket: tuple[float, float] | None = None
    leader: str | None = None
    reason: str = ""
    per_level: tuple[LevelDiff, ...] = field(default=(), repr=False, compare=False)
    axis: Axis = "concurrency"
    #: levels where the two means were within the tie margin ``tie_rel`` of each other
    #: (kind ``none`` only): level there, so a lead is over the other levels
    ties: tuple[float, ...] = ()
    tie_rel: float = 0.0
    #: open-loop levels where both kept up with their arrivals (kind ``none`` only, a
    #: throughput that counts only what was served): level there, as ``ties``
    kept_up: tuple[float, ...] = ()

    @property
    def tie_clause(self) -> str:
        """``level within 3% at 1, 2`` where ties were read, ``both kept up with the
        arrivals at 4, 8`` where both kept up, both joined by ``; ``, else ``""``."""
        parts = []
        if self.ties:
            parts.append(
                f"level within {fmt_margin(self.tie_rel)} at "
                f"{', '.join(f'{c:g}' for c in self.ties)}"
            )
        if self.kept_up:
            parts.append(
                f"both kept up with the arrivals at {', '.join(f'{c:g}' for c in self.kept_up)}"
            )
        return "; ".join(parts)

    @property
    def rel_width(self) -> float | None:
        """Width of the interval relative to the located concurrency."""
        if self.interval is None or not self.concurrency:
            return None
        return (self.interval[1] - self.interval[0]) / self.concurrency

    def to_schema(self) -> Crossover | Inconclusive | None:
        """The sweep file's record of this finding (``None`` for kind ``none``)."""
        if self.kind == "crossover":
            assert self.below is not None
            assert self.above is not None
            assert self.concurrency is not None
            assert self.interval is not None
            point = round(self.concurrency, 3)
            return Crossover(
                metric=self.metric,
                below=self.below,
                above=self.above,
                concurrency=point if self.axis == "concurrency" else None,
                rate=point if self.axis == "rate" else None,
                interval=(round(self.interval[0], 3), round(self.interval[1], 3)),
                bracket=self.bracket,
            )
        if self.kind == "inconclusive":
            assert self.bracket is not None
            return Inconclusive(
                metric=self.metric,
                a=self.a,
                b=self.b,
                bracket=self.bracket,
                reason=self.reason,
                axis=self.axis,
            )
        return None


def level_values(
    runs: Sequence[SweepRun],
    target: str,
    path: str,
    axis: Axis = "concurrency",
    steady_only: bool = False,
) -> dict[float, list[float]]:
    """Values of one metric per level on ``axis``, from the target's valid runs only;
    ``steady_only``: without the levels where a repeat was too short for a steady state
    (``MetricSpec.steady_only``). A whole level goes, not only its short repeats: keeping
    the others would pick a level's repeats by their outcome."""
    out: dict[float, list[float]] = {}
    skip = short_levels(runs, target) if steady_only else set()
    for run in runs:
        if run.target != target or not run.is_valid or run.axis != axis:
            continue
        if run.axis == "rate" and run.level in skip:
            continue
        v = run.value(path)
        if v is not None:
            out.setdefault(run.level, []).append(v)
    return out


def kept_up_levels(runs: Sequence[SweepRun], target: str) -> set[float]:
    """The target's rate levels where every valid run kept up with its arrivals
    (``crossover.analysis.overload.kept_up``)."""
    from crossover.analysis.overload import kept_up

    return levels_all_kept_up(
        (r.level, kept_up(r.summary))
        for r in runs
        if r.target == target and r.is_valid and r.axis == "rate"
    )


def levels_all_kept_up(flags: Iterable[tuple[float, bool | None]]) -> set[float]:
    """The levels whose every ``(level, kept_up)`` flag is True: one valid run that did
    not keep up, or could not tell, leaves its level to be compared as measured."""
    seen: dict[float, bool] = {}
    for level, k in flags:
        seen[level] = seen.get(level, True) and k is True
    return {c for c, all_kept in seen.items() if all_kept}


def short_levels(runs: Sequence[SweepRun], target: str) -> set[float]:
    """The target's rate levels where a valid run was too short for a steady state (not
    an overloaded one: it stays a point, at the server's capacity)."""
    from crossover.analysis.short import is_short

    return {r.level for r in runs if r.target == target and is_short(r)}


def level_diffs(
    a_name: str,
    b_name: str,
    a_values: dict[float, list[float]],
    b_values: dict[float, list[float]],
    spec: MetricSpec,
    *,
    confidence: float = 0.95,
    noise_floor_rel: float = 0.03,
    tie_rel: float = 0.0,
    kept_up: Collection[float] = (),
) -> list[LevelDiff]:
    """A - B at every level both have values for, in increasing concurrency. With
    ``tie_rel`` > 0 a level whose means differ by less than that share of the larger is a
    tie: no lead, however tight its interval (two repeats that agree to 0.1% call a 0.3%
    gap significant; another machine may turn it round). A level in ``kept_up`` (both
    kept up with their arrivals, on a metric that counts only what was served) is a tie
    too, however far apart its windows read."""
    out: list[LevelDiff] = []
    for c in sorted(set(a_values) & set(b_values)):
        a, b = a_values[c], b_values[c]
        d = difference_interval(a, b, confidence=confidence, noise_floor_rel=noise_floor_rel)
        ma, mb = float(np.mean(a)), float(np.mean(b))
        both = c in kept_up
        tie = both or (tie_rel > 0.0 and abs(ma - mb) < tie_rel * max(abs(ma), abs(mb)))
        lead: str | None = None
        if d.significant and not tie:
            a_better = (d.lo > 0) == spec.higher_is_better
            lead = a_name if a_better else b_name
        out.append(LevelDiff(c, d, ma, mb, len(a), len(b), lead, tie, both))
    return out


def _zero(x0: float, y0: float, x1: float, y1: float) -> float:
    """Where the line through (x0, y0), (x1, y1) is zero (y0, y1 of opposite signs)."""
    if y0 == y1:
        return 0.5 * (x0 + x1)
    return x0 + (x1 - x0) * (y0 / (y0 - y1))


def _quadratic_zero(x: Sequence[float], y: Sequence[float], lo: float, hi: float) -> float | None:
    """The root in ``[lo, hi]`` of the parabola through three points, if any."""
    coeffs = np.polyfit(np.asarray(x), np.asarray(y), 2)
    roots = [float(r.real) for r in np.roots(coeffs) if abs(r.imag) < 1e-12]
    inside = [r for r in roots if lo - 1e-9 <= r <= hi + 1e-9]
    return inside[0] if inside else None


def _locate(levels: Sequence[LevelDiff], i: int, j: int, sign: float) -> tuple[float, float, float]:
    """Crossover point and interval (in concurrency) between ``levels[i]`` and
    ``levels[j]``, consecutive significant levels with opposite leads. ``sign``
    orients the difference so it is positive at ``i`` and negative at ``j``.

    Beside the noise (the confidence bounds crossing zero), the interval holds
    the interpolation error: the distance between the linear zero and the zero
    of a parabola through a third, neighbouring level. It shrinks as refinement
    brings levels closer; with no third level the interval is the whole bracket.
    """
    x = [math.log2(lv.concurrency) for lv in levels]
    # relative to the level's magnitude: throughput grows with concurrency, so the
    # absolute difference bends in log space where the relative one stays near linear
    scale = [sign / (0.5 * (abs(lv.mean_a) + abs(lv.mean_b)) or 1.0) for lv in levels]
    # the point: log(A / B), the gap between the curves as the report draws them
    # (log value against log2 level); the relative difference where a mean is not positive
    mean = [
        sign * math.log(lv.mean_a / lv.mean_b)
        if lv.mean_a > 0 and lv.mean_b > 0
        else s * lv.diff.mean
        for s, lv in zip(scale, levels, strict=True)
    ]
    # after orienting, the lower bound is the first to reach zero, the upper the last
    lower = [min(s * lv.diff.lo, s * lv.diff.hi) for s, lv in zip(scale, levels, strict=True)]
    upper = [max(s * lv.diff.lo, s * lv.diff.hi) for s, lv in zip(scale, levels, strict=True)]
    left = x[j]
    for k in range(i, j):
        if lower[k] <= 0:
            left = x[k]
            break
        if lower[k + 1] <= 0:
            left = _zero(x[k], lower[k], x[k + 1], lower[k + 1])
            break
    right = x[i]
    for k in range(j, i, -1):
        if upper[k] >= 0:
            right = x[k]
            break
        if upper[k - 1] >= 0:
            right = _zero(x[k - 1], upper[k - 1], x[k], upper[k])
            break
    zeros: list[tuple[float, int]] = []
    for k in range(i, j):
        if mean[k] == 0:
            zeros.append((x[k], k))
        elif mean[k] > 0 > mean[k + 1] or mean[k] < 0 < mean[k + 1]:
            zeros.append((_zero(x[k], mean[k], x[k + 1], mean[k + 1]), k))
    point, seg = zeros[len(zeros) // 2] if zeros else (0.5 * (left + right), i)
    errors: list[float] = []
    for trio in ((seg - 1, seg, seg + 1), (seg, seg + 1, seg + 2)):
        if trio[0] >= 0 and trio[2] < len(levels):
            q = _quadratic_zero([x[t] for t in trio], [mean[t] for t in trio], x[seg], x[seg + 1])
            errors.append(abs(q - point) if q is not None else x[seg + 1] - x[seg])
    if errors:
        lo, hi = min(left, point) - max(errors), max(right, point) + max(errors)
    else:
        lo, hi = x[i], x[j]
    return 2.0**point, 2.0 ** max(x[i], lo), 2.0 ** min(x[j], hi)


def _sign_changes(levels: Sequence[LevelDiff]) -> list[tuple[int, int]]:
    """Pairs (i, j) of levels, consecutive but for ties between them, where the point
    estimate changes sign (a tie has no sign: it neither makes nor breaks a change)."""
    signed = [i for i, lv in enumerate(levels) if not lv.tie]
    return [
        (i, j)
        for i, j in itertools.pairwise(signed)
        if np.sign(levels[i].diff.mean) * np.sign(levels[j].diff.mean) < 0
    ]


def compare_pair(
    a_name: str,
    b_name: str,
    a_values: dict[float, list[float]],
    b_values: dict[float, list[float]],
    spec: MetricSpec,
    *,
    confidence: float = 0.95,
    noise_floor_rel: float = 0.03,
    axis: Axis = "concurrency",
    tie_rel: float = 0.0,
    kept_up: Collection[float] = (),
) -> list[Finding]:
    """All findings for one metric and one pair, from per-level values of valid runs
    (``tie_rel``: :func:`level_diffs`; 0, the default, has no ties). ``kept_up``: the
    rate levels where both kept up with their arrivals (:func:`kept_up_levels` of each),
    ties on a metric that counts only what was served (``MetricSpec.arrival_bound``)
    along the rate axis, and nothing on any other."""
    levels = level_diffs(
        a_name,
        b_name,
        a_values,
        b_values,
        spec,
        confidence=confidence,
        noise_floor_rel=noise_floor_rel,
        tie_rel=tie_rel,
        kept_up=kept_up if spec.arrival_bound and axis == "rate" else (),
    )
    cs = tuple(lv.concurrency for lv in levels)
    base = Finding("none", spec.key, a_name, b_name, cs, per_level=tuple(levels), axis=axis)
    sig = [i for i, lv in enumerate(levels) if lv.lead is not None]
    findings: list[Finding] = []
    claimed: list[tuple[int, int]] = []
    for i, j in itertools.pairwise(sig):
        below, above = levels[i].lead, levels[j].lead
        if below == above or below is None or above is None:
            continue
        sign = 1.0 if levels[i].diff.mean > 0 else -1.0
        point, lo, hi = _locate(levels, i, j, sign)
        claimed.append((i, j))
        findings.append(
            replace(
                base,
                kind="crossover",
                below=below,
                above=above,
                concurrency=point,
                interval=(lo, hi),
                bracket=(cs[i], cs[j]),
            )
        )
    # sign changes of the point estimate not explained by a claimed crossover,
    # grouped per stretch between significant levels
    groups: dict[int, list[tuple[int, int]]] = {}
    for k, k2 in _sign_changes(levels):
        if any(i <= k < j for i, j in claimed):
            continue
        groups.setdefault(sum(1 for s in sig if s <= k), []).append((k, k2))
    for ks in groups.values():
        lo_i, hi_i = ks[0][0], ks[-1][1]
        leads = {lv.lead for lv in levels if lv.lead is not None}
        if not leads:
            reason = "no level shows a significant difference"
        else:
            reason = "the sign of the difference changes where it is not significant"
        findings.append(
            replace(base, kind="inconclusive", bracket=(cs[lo_i], cs[hi_i]), reason=reason)
        )
    if not findings:
        leads = {lv.lead for lv in levels if lv.lead is not None}
        leader = next(iter(leads)) if len(leads) == 1 else None
        ties = [cs[i] for i, lv in enumerate(levels) if lv.tie and not lv.kept_up]
        kept = [cs[i] for i, lv in enumerate(levels) if lv.kept_up]
        if not levels:
            reason = f"no {axis} level with valid runs of both"
        elif len(kept) == len(levels):
            reason = (
                "both kept up with the arrivals at every level compared: what each served "
                "there is the arrival rate"
            )
            kept = []
        elif leader is None:
            reason = "no significant difference at any level"
        else:
            reason = "no crossover in the range measured"
        none = replace(
            base,
            leader=leader,
            ties=tuple(ties) if levels else (),
            tie_rel=tie_rel,
            kept_up=tuple(kept),
        )
        if none.tie_clause:
            reason += f"; {none.tie_clause}"
        findings.append(replace(none, reason=reason))
    findings.sort(key=lambda f: f.bracket[0] if f.bracket else 0)
    return findings


def analyze_sweep(
    sweep: SweepFile,
    *,
    metrics: Sequence[MetricSpec] = METRICS,
    confidence: float = 0.95,
    noise_floor_rel: float = 0.03,
    tie_rel: float = 0.0,
) -> list[Finding]:
    """Findings for every metric and every pair of targets of a sweep, along each axis
    its runs have (concurrency, rate); ``tie_rel``: :func:`level_diffs`."""
    names = sweep.target_names()
    axes: list[Axis] = [a for a in ("concurrency", "rate") if any(r.axis == a for r in sweep.runs)]
    out: list[Finding] = []
    for axis in axes or ["concurrency"]:
        for spec in metrics:
            if axis not in spec.axes:
                continue
            values = {
                n: level_values(sweep.runs, n, spec.path, axis, spec.steady_only) for n in names
            }
            if spec.optional and not any(values.values()):
                continue
            kept = {n: kept_up_levels(sweep.runs, n) for n in names} if axis == "rate" else {}
            for ia, a in enumerate(names):
                for b in names[ia + 1 :]:
                    out.extend(
                        compare_pair(
                            a,
                            b,
                            values[a],
                            values[b],
                            spec,
                            confidence=confidence,
                            noise_floor_rel=noise_floor_rel,
                            axis=axis,
                            tie_rel=tie_rel,
                            kept_up=kept[a] & kept[b] if kept else (),
                        )
                    )
    return out


def fmt_margin(tie_rel: float) -> str:
    """A tie margin as a percentage: ``3%`` for 0.03, ``2.5%`` for 0.025."""
    return f"{100.0 * tie_rel:.4g}%"


def reanalyze(sweep: SweepFile, *, tie_rel: float = 0.0) -> tuple[SweepFile, list[Finding]]:
    """The sweep with its ``crossovers`` and ``inconclusive`` read with the tie margin
    ``tie_rel`` (recorded as ``tie_margin``, ``None`` for none), and the findings behind
    them: what the sweep runner writes to sweep.json (``SweepRunner.sweep_file``)."""
    findings = analyze_sweep(sweep, tie_rel=tie_rel)
    xs, inc = findings_to_schema(findings)
    update = {"crossovers": xs, "inconclusive": inc, "tie_margin": tie_rel or None}
    return sweep.model_copy(update=update), findings


def arrival_effects(findings: Sequence[Finding]) -> list[tuple[Finding, Finding]]:
    """Pooled TTFT p50 crossovers the first wave does not repeat, each with the first
    wave's finding for the same pair and axis: the crossing comes from how the later
    requests arrived, not from prefill (docs/metrics.md, "TTFT by wave")."""
    first = {(f.a, f.b, f.axis): f for f in findings if f.metric == "first_wave_ttft_ms.p50"}
    out = []
    for f in findings:
        if f.metric != "ttft_ms.p50" or f.kind != "crossover":
            continue
        w = first.get((f.a, f.b, f.axis))
        if w is not None and w.kind != "crossover":
            out.append((f, w))
    return out


def overloaded_levels(sweep: SweepFile) -> dict[str, list[float]]:
    """Per target, the rate levels where a valid run was overloaded (in increasing order)."""
    out: dict[str, list[float]] = {}
    for run in sweep.runs:
        if run.axis == "rate" and run.is_valid and run.overloaded:
            levels = out.setdefault(run.target, [])
            if run.level not in levels:
                levels.append(run.level)
    return {t: sorted(v) for t, v in out.items()}


def format_overloads(sweep: SweepFile) -> list[str]:
    """One line per target with overloaded rate levels, with how far behind it fell."""
    from crossover.analysis.overload import open_loop_load

    lines = []
    for target, levels in overloaded_levels(sweep).items():
        worst = [
            found
            for r in sweep.runs
            if r.target == target and r.rate == levels[-1] and r.is_valid
            if (found := open_loop_load(r.summary)) is not None
        ]
        at = ", ".join(_fmt_l(lv) for lv in levels)
        how = f"; at {_fmt_l(levels[-1])} it {worst[0].describe()}" if worst else ""
        lines.append(
            f"{target} is overloaded at {at} requests/s{how}: its queue grew through the "
            "level, so its latencies there measure how long the level lasted"
        )
    return lines


def findings_to_schema(findings: Sequence[Finding]) -> tuple[list[Crossover], list[Inconclusive]]:
    """What the sweep file records: ``crossovers`` and ``inconclusive``."""
    xs: list[Crossover] = []
    inc: list[Inconclusive] = []
    for f in findings:
        rec = f.to_schema()
        if isinstance(rec, Crossover):
            xs.append(rec)
        elif isinstance(rec, Inconclusive):
            inc.append(rec)
    return xs, inc


def _decimal(x: float, places: str) -> Decimal:
    """``x`` as stored in sweep.json (3 decimals), then rounded half up to ``places``: the
    same digits from a finding and from the file it was written to."""
    return Decimal(repr(round(x, 3))).quantize(Decimal(places), rounding=ROUND_HALF_UP)


def fmt_point(c: float) -> str:
    """A crossover's point, in text and on charts: ``12`` from 10 on, ``6.3`` below."""
    if round(c, 3) >= 10:
        return str(_decimal(c, "1"))
    text = str(_decimal(c, "0.1"))
    return text.removesuffix(".0")


def fmt_interval(lo: float, hi: float) -> str:
    """A crossover's interval, one decimal, rounded as :func:`fmt_point` rounds."""
    return f"{_decimal(lo, '0.1')}-{_decimal(hi, '0.1')}"


def _fmt_l(level: float) -> str:
    """A measured level as given: ``4`` for a concurrency, ``2.5`` for a rate."""
    return f"{level:g}"


def axis_unit(axis: Axis) -> str:
    """How levels on ``axis`` are named in text and on plots."""
    return "requests/s" if axis == "rate" else "concurrent requests"


def crossover_levels(sweep: SweepFile, x: Crossover) -> list[float]:
    """The levels a recorded crossover's pair was compared over: where both have valid
    runs with the metric, on the crossover's axis (what :func:`format_crossover` needs to
    tell a crossing at the edge of the measured range)."""
    axis: Axis = "concurrency" if x.concurrency is not None else "rate"
    spec = metric_spec(x.metric)
    a = level_values(sweep.runs, x.below, spec.path, axis, spec.steady_only)
    b = level_values(sweep.runs, x.above, spec.path, axis, spec.steady_only)
    return sorted(set(a) & set(b))


def _crossover_line(
    label: str,
    below: str,
    above: str,
    point: float,
    interval: tuple[float, float],
    unit: str,
    levels: Sequence[float],
) -> str:
    """``A leads below P (lo-hi), B above``, unless P (as printed) is an end of the
    measured range: then "below P" (or "above P") would claim a lead where nothing was
    measured, so the line names the one level at the edge where that target led.

    Such a crossing is still reported: the two levels around it are measured, each with a
    significant lead, opposite to the other; only its wording changes. It says the lead
    changes hands right after the lowest level (or right before the highest), nothing
    about below or above the range. The stored point and interval are unchanged."""
    lo, hi = interval
    where = f"({fmt_interval(lo, hi)})"
    if levels and fmt_point(point) == fmt_point(levels[0]):
        return (
            f"{label}: {below} leads at {_fmt_l(levels[0])} {unit} (the lowest level "
            f"measured), {above} above (crossing in {fmt_interval(lo, hi)})"
        )
    if levels and fmt_point(point) == fmt_point(levels[-1]):
        return (
            f"{label}: {below} leads below {fmt_point(point)} {unit} {where}, {above} at "
            f"{_fmt_l(levels[-1])} (the highest level measured)"
        )
    return f"{label}: {below} leads below {fmt_point(point)} {unit} {where}, {above} above"


def format_crossover(x: Finding | Crossover, levels: Sequence[float] = ()) -> str:
    """One terminal line, e.g. ``total tokens/s: A leads below 12 concurrent
    requests (10.8-14.1), B above`` (``... below 6.2 requests/s ...`` along a rate axis).
    A crossing at an end of the levels measured reads ``A leads at 1 concurrent requests
    (the lowest level measured), B above (crossing in 1.0-1.1)``; a recorded
    :class:`Crossover` knows its levels only when given them (:func:`crossover_levels`)."""
    label = metric_spec(x.metric).label
    if isinstance(x, Crossover):
        where = x.concurrency if x.concurrency is not None else x.rate
        assert where is not None
        unit = axis_unit("concurrency" if x.concurrency is not None else "rate")
        return _crossover_line(label, x.below, x.above, where, x.interval, unit, levels)
    unit = axis_unit(x.axis)
    if x.kind == "crossover":
        assert x.interval is not None
        assert x.concurrency is not None
        assert x.below is not None
        assert x.above is not None
        return _crossover_line(
            label, x.below, x.above, x.concurrency, x.interval, unit, levels or x.levels
        )
    span, over, levels_word = "none", "over", "levels"
    if x.levels:
        first, last = _fmt_l(x.levels[0]), _fmt_l(x.levels[-1])
        span = first if first == last else f"{first}-{last}"
        if first == last:  # one level compared: "at 1", "(level 1)", not "1-1"
            over, levels_word = "at", "level"
    if x.kind == "inconclusive":
        assert x.bracket is not None
        return (
            f"{label}: {x.a} vs {x.b} inconclusive between {_fmt_l(x.bracket[0])} and "
            f"{_fmt_l(x.bracket[1])} {unit} ({x.reason})"
        )
    if x.leader is not None:
        other = x.b if x.leader == x.a else x.a
        # the levels a tie margin read as level, where some were: the lead is over the others
        ties = x.tie_clause
        return (
            f"{label}: {x.leader} leads {other} {over} {span} {unit} "
            f"(no crossover in the range measured{'; ' + ties if ties else ''})"
        )
    return f"{label}: {x.a} vs {x.b}: {x.reason} ({levels_word} {span})"
