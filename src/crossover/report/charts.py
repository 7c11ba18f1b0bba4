"""PNG charts of a sweep (matplotlib, Agg canvas, imported only when drawing).

Only valid runs are drawn as curves; invalid and unverified runs appear as
grey crosses ("not used") so that they are seen but never read as results.
"""

from __future__ import annotations

import io
import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from crossover.analysis.crossovers import Finding, fmt_interval, fmt_point, metric_spec
from crossover.analysis.schema import Axis, SweepFile, SweepRun, level_label

if TYPE_CHECKING:
    from matplotlib.axes import Axes

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2")


@dataclass(frozen=True)
class Series:
    """One target's valid values of a metric per level: mean, min, max over repeats."""

    levels: list[float]
    mean: list[float]
    low: list[float]
    high: list[float]


def series(runs: Sequence[SweepRun], target: str, path: str) -> Series:
    """Mean and spread over repeats of one metric, valid runs only, by level (concurrency,
    or rate in a rate sweep)."""
    by_level: dict[float, list[float]] = {}
    for r in runs:
        if r.target == target and r.is_valid and (v := r.value(path)) is not None:
            by_level.setdefault(r.level, []).append(v)
    levels = sorted(by_level)
    return Series(
        levels,
        [statistics.fmean(by_level[c]) for c in levels],
        [min(by_level[c]) for c in levels],
        [max(by_level[c]) for c in levels],
    )


def per_user_tokens_per_s(run: SweepRun) -> float | None:
    """Decode speed one user sees: 1000 / TPOT p50, else output tokens/s / concurrency
    (``None`` for a rate level without TPOT)."""
    tpot = run.value("tpot_ms.p50")
    if tpot is not None and tpot > 0:
        return 1000.0 / tpot
    out = run.value("throughput.output_tokens_per_s")
    return out / run.concurrency if out is not None and run.concurrency else None


def _txt(s: str) -> str:
    """A label drawn as plain text: matplotlib reads ``$...$`` as math."""
    return s.replace("$", r"\$")


def _legend(ax: Axes) -> None:
    # outside the frame, right of it: the crossover labels inside never sit under it
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return buf.getvalue()


def _new_axes(
    title: str,
    ylabel: str,
    log_x: bool = True,
    axis: Axis = "concurrency",
    rate_unit: str = "requests/s",
) -> tuple[Any, Axes]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4.6))  # shown at the page's full width
    ax = fig.add_subplot()
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    if log_x:
        from matplotlib.ticker import FuncFormatter

        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        ax.set_xlabel(
            f"{rate_unit} (arrival rate offered, Poisson)"
            if axis == "rate"
            else "concurrency (requests in flight)"
        )
    ax.grid(True, alpha=0.3)
    return fig, ax


#: at most this many measured levels get a tick each; more fall back to powers of 2
MAX_LEVEL_TICKS = 14


def level_ticks(ax: Axes, sweep: SweepFile) -> None:
    """Ticks at the levels measured (a rate sweep's 5, 10, 50, 200 requests/s are not
    powers of 2), unless there are too many to read."""
    from matplotlib.ticker import NullLocator

    levels = sorted({r.level for r in sweep.runs if r.axis == sweep.axis()})
    if 0 < len(levels) <= MAX_LEVEL_TICKS:
        ax.set_xticks(levels)
        ax.xaxis.set_minor_locator(NullLocator())


def _mark_overloaded(ax: Axes, sweep: SweepFile, path: str, labelled: list[bool]) -> None:
    """A red ring on each overloaded rate level's point (the mean over its repeats)."""
    for name in sweep.target_names():
        s = series(sweep.runs, name, path)
        hot = {r.level for r in sweep.runs if r.target == name and r.is_valid and r.overloaded}
        pts = [(lv, m) for lv, m in zip(s.levels, s.mean, strict=True) if lv in hot]
        if not pts:
            continue
        label = None if labelled[0] else "overloaded (fewer served than arrived)"
        labelled[0] = True
        ax.scatter(
            [p[0] for p in pts], [p[1] for p in pts], s=160, facecolors="none",
            edgecolors="red", lw=1.5, label=label, zorder=5,
        )  # fmt: skip


def spans_decades(values: Sequence[float], ratio: float = 30.0) -> bool:
    """True when the positive values span more than ``ratio``: the axis goes log."""
    pos = [v for v in values if v > 0]
    return bool(pos) and max(pos) / min(pos) > ratio


def crossover_label(f: Finding) -> str:
    """``TTFT p50: A → B at 6.9``: the metric as people name it, not its key; the point
    rounded as every other list of crossovers rounds it (``fmt_point``)."""
    assert f.concurrency is not None
    return f"{metric_spec(f.metric).label}: {f.below} → {f.above} at {fmt_point(f.concurrency)}"


#: points drawn between two measured levels, so a curve bends as the analysis interpolates
CURVE_STEPS = 32


def curve(levels: Sequence[float], values: Sequence[float]) -> tuple[list[float], list[float]]:
    """The line through measured points as the crossover analysis interpolates it: log of
    the value linear in log2 of the level (straight on log-log axes), so two targets' lines
    cross exactly where the analysis puts their crossover; linear where a value is not
    positive."""
    xs: list[float] = []
    ys: list[float] = []
    pts = list(zip(levels, values, strict=True))
    for (x0, y0), (x1, y1) in itertools.pairwise(pts):
        for k in range(CURVE_STEPS):
            t = k / CURVE_STEPS
            xs.append(2.0 ** ((1 - t) * math.log2(x0) + t * math.log2(x1)))
            if y0 > 0 and y1 > 0:
                ys.append(math.exp((1 - t) * math.log(y0) + t * math.log(y1)))
            else:
                ys.append((1 - t) * y0 + t * y1)
    if pts:
        xs.append(pts[-1][0])
        ys.append(pts[-1][1])
    return xs, ys


def targets_apart(all_series: Sequence[Series], ratio: float = 5.0) -> bool:
    """True when, at some level, one target's mean is more than ``ratio`` times another's:
    on a linear axis the lower curves would be flattened at the bottom, so it goes log."""
    by_level: dict[float, list[float]] = {}
    for s in all_series:
        for level, m in zip(s.levels, s.mean, strict=True):
            if m > 0:
                by_level.setdefault(level, []).append(m)
    return any(len(v) > 1 and max(v) / min(v) > ratio for v in by_level.values())


def _apart(a: float, b: float) -> bool:
    return a <= 0 or b <= 0 or abs(math.log(a / b)) > 0.18


#: caption lines under the axes, in axes fractions
_CAPTION_TOP = -0.17
_CAPTION_STEP = 0.065


def _mark_crossovers(ax: Axes, findings: Sequence[Finding], metrics: set[str]) -> None:
    """Each crossover: its interval shaded, a dashed line at its point with a number at
    the top, and a caption line under the chart (number, metric, who leads where, point
    and interval). Labels inside the frame hid the curves once there were several."""
    marked = [x for x in findings if x.kind == "crossover" and x.metric in metrics]
    rows: list[list[float]] = []  # the points numbered at each height so far
    for i, f in enumerate(marked, start=1):
        assert f.interval is not None
        assert f.concurrency is not None
        ax.axvspan(f.interval[0], f.interval[1], color="0.5", alpha=0.15, lw=0)
        ax.axvline(f.concurrency, color="0.3", ls="--", lw=1)
        # a number near another one (within ~20% on the log axis) goes one step lower
        row = next(
            (k for k, xs in enumerate(rows) if all(_apart(f.concurrency, x) for x in xs)),
            len(rows),
        )
        if row == len(rows):
            rows.append([])
        rows[row].append(f.concurrency)
        ax.annotate(
            str(i),
            (f.concurrency, 0.97 - 0.075 * row),
            xycoords=("data", "axes fraction"),
            fontsize=7,
            ha="center",
            va="top",
            bbox={"boxstyle": "circle,pad=0.2", "fc": "white", "ec": "0.3", "alpha": 0.95},
        )
        lo, hi = f.interval
        ax.text(
            0.0,
            _CAPTION_TOP - _CAPTION_STEP * (i - 1),
            _txt(f"{i}  {crossover_label(f)} (interval {fmt_interval(lo, hi)})"),
            transform=ax.transAxes,
            fontsize=8,
            ha="left",
            va="top",
        )


def _mark_not_used(ax: Axes, runs: Sequence[SweepRun], path: str, labelled: list[bool]) -> None:
    pts = [(r.level, v) for r in runs if not r.is_valid and (v := r.value(path)) is not None]
    if pts:
        label = None if labelled[0] else "invalid/unverified (not used)"
        labelled[0] = True
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker="x", color="0.55", label=label)


def throughput_chart(sweep: SweepFile, findings: Sequence[Finding]) -> bytes:
    """Total tokens/s against concurrency (output tokens/s against the arrival rate);
    error bars span the repeats."""
    return _png(throughput_axes(sweep, findings)[0])


def throughput_metric(sweep: SweepFile) -> tuple[str, str, str]:
    """(metric key, summary path, label) the throughput chart draws: total tokens/s along
    concurrency; output tokens/s along the rate axis, where total tokens/s counts the
    prompts of requests that arrived whether or not the server kept up."""
    if sweep.axis() == "rate":
        return "output_tokens_per_s", "throughput.output_tokens_per_s", "output tokens/s"
    return "total_tokens_per_s", "throughput.total_tokens_per_s", "total tokens/s"


def throughput_axes(sweep: SweepFile, findings: Sequence[Finding]) -> tuple[Any, Axes]:
    """The throughput chart's figure and axes: log y when the targets lie far apart, the
    crossovers of its metric marked (the other throughput's are listed in the page)."""
    key, path, label = throughput_metric(sweep)
    fig, ax = _new_axes("Throughput", label, axis=sweep.axis(), rate_unit=sweep.rate_unit())
    labelled = [False]
    drawn: list[Series] = []
    for i, name in enumerate(sweep.target_names()):
        s = series(sweep.runs, name, path)
        drawn.append(s)
        if s.levels:
            err = [
                [m - lo for m, lo in zip(s.mean, s.low, strict=True)],
                [hi - m for m, hi in zip(s.mean, s.high, strict=True)],
            ]
            color = COLORS[i % len(COLORS)]
            ax.errorbar(
                s.levels, s.mean, yerr=err, marker="o", capsize=3, color=color, ls="none",
                label=_txt(name),
            )  # fmt: skip
            ax.plot(*curve(s.levels, s.mean), color=color)
        own = [r for r in sweep.runs if r.target == name]
        _mark_not_used(ax, own, path, labelled)
    if targets_apart(drawn):
        ax.set_yscale("log")
        ax.set_ylabel(f"{label} (log scale)")
    _mark_overloaded(ax, sweep, path, [False])
    level_ticks(ax, sweep)
    _mark_crossovers(ax, findings, {key})
    _legend(ax)
    return fig, ax


def latency_chart(sweep: SweepFile, findings: Sequence[Finding], section: str, title: str) -> bytes:
    """p50 line with a p90-p99 band per target, for ``ttft_ms`` or ``itl_ms``."""
    fig, ax = _new_axes(
        title,
        f"{section.removesuffix('_ms').upper()} (ms)",
        axis=sweep.axis(),
        rate_unit=sweep.rate_unit(),
    )
    labelled = [False]
    p50_all: list[list[float]] = []
    for i, name in enumerate(sweep.target_names()):
        color = COLORS[i % len(COLORS)]
        p50 = series(sweep.runs, name, f"{section}.p50")
        p50_all.append(list(p50.mean))
        p90 = series(sweep.runs, name, f"{section}.p90")
        p99 = series(sweep.runs, name, f"{section}.p99")
        if p50.levels:
            ax.plot(p50.levels, p50.mean, marker="o", ls="none", color=color)
            ax.plot(*curve(p50.levels, p50.mean), color=color, label=_txt(f"{name} p50"))
        if p90.levels and p90.levels == p99.levels:
            band_x, low = curve(p90.levels, p90.mean)
            ax.fill_between(
                band_x,
                low,
                curve(p99.levels, p99.mean)[1],
                color=color,
                alpha=0.18,
                lw=0,
                label=_txt(f"{name} p90-p99"),
            )
        own = [r for r in sweep.runs if r.target == name]
        _mark_not_used(ax, own, f"{section}.p50", labelled)
    if spans_decades([v for s in p50_all for v in s]):  # TTFT under a queue
        ax.set_yscale("log")
    _mark_overloaded(ax, sweep, f"{section}.p50", [False])
    level_ticks(ax, sweep)
    _mark_crossovers(ax, findings, {m for m in (f.metric for f in findings) if section in m})
    _legend(ax)
    return _png(fig)


def pareto_chart(sweep: SweepFile) -> bytes:
    """Tokens/s per user against total tokens/s: up and right is better."""
    return _png(pareto_axes(sweep)[0])


def pareto_axes(sweep: SweepFile) -> tuple[Any, Axes]:
    """The Pareto chart's figure and axes; each point labelled with its level where the
    label does not cover another (``place_labels``)."""
    fig, ax = _new_axes("Per-user speed vs total throughput", "total tokens/s", log_x=False)
    ax.set_xlabel("tokens/s per user (1000 / TPOT p50)")
    labels: list[tuple[float, float, str, str]] = []
    for i, name in enumerate(sweep.target_names()):
        pts: dict[float, list[tuple[float, float]]] = {}
        for r in sweep.runs:
            if r.target != name or not r.is_valid:
                continue
            u, t = per_user_tokens_per_s(r), r.value("throughput.total_tokens_per_s")
            if u is not None and t is not None:
                pts.setdefault(r.level, []).append((u, t))
        if not pts:
            continue
        levels = sorted(pts)
        xs = [statistics.fmean(p[0] for p in pts[c]) for c in levels]
        ys = [statistics.fmean(p[1] for p in pts[c]) for c in levels]
        color = COLORS[i % len(COLORS)]
        ax.plot(xs, ys, marker="o", color=color, label=_txt(name))
        for c, x, y in zip(levels, xs, ys, strict=True):
            labels.append((x, y, level_label(sweep.axis(), c), color))
    _legend(ax)
    place_labels(fig, ax, labels)
    return fig, ax


#: where a point's label may go, in points from the point: right-above first
LABEL_OFFSETS = ((4, 4), (4, -11), (-6, 6), (-6, -13), (4, 14), (4, -21), (-6, 16), (-6, -23))


def place_labels(fig: Any, ax: Axes, labels: Sequence[tuple[float, float, str, str]]) -> None:
    """Annotate each ``(x, y, text, color)`` at the first offset where its box overlaps
    no label placed before it; where every offset would, the label is left out (the
    legend and the line's order still say which point it is), never drawn over another."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()  # type: ignore[no-untyped-call]
    ax.autoscale_view()
    placed: list[Any] = []
    for x, y, text, color in labels:
        for k, (dx, dy) in enumerate(LABEL_OFFSETS):
            ann = ax.annotate(
                text,
                (x, y),
                fontsize=7,
                color=color,
                xytext=(dx, dy),
                textcoords="offset points",
                ha="left" if dx >= 0 else "right",
            )
            box = ann.get_window_extent(renderer)
            if not any(box.overlaps(b) for b in placed):
                placed.append(box)
                break
            ann.remove()
            if k == len(LABEL_OFFSETS) - 1:
                break


def all_charts(sweep: SweepFile, findings: Sequence[Finding]) -> dict[str, bytes]:
    """Every chart of the report as PNG bytes, by file stem."""
    return {
        "throughput": throughput_chart(sweep, findings),
        "ttft": latency_chart(sweep, findings, "ttft_ms", "Time to first token"),
        "itl": latency_chart(sweep, findings, "itl_ms", "Inter-token latency"),
        "pareto": pareto_chart(sweep),
    }
