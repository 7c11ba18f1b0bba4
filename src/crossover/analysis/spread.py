"""How far a sweep's repeats of a level lie apart: per metric, the median and the largest
``(max - min) / mean`` over every target and level with two valid repeats or more.

Repeats measured back to back share an engine start, so their spread holds none of what
changes from one start to the next (the memory layout, the kernels chosen, the graphs
compiled); with ``restart_between_repeats`` each repeat has its own start and the spread
holds it. On an H100 (vLLM and SGLang, MoE shape, levels 1-64;
docs/results/h100/moe-warm-restart) a level's median spread was 0.1% in throughput on one
start and 0.3% across starts, 4.5% and 6.8% in TTFT p50.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from crossover.analysis.crossovers import level_values, metric_spec
from crossover.analysis.schema import Axis, SweepFile, level_label

#: the metrics a spread is shown for: the sweep table's three
SPREAD_METRICS: tuple[str, ...] = ("total_tokens_per_s", "ttft_ms.p50", "itl_ms.p50")


@dataclass(frozen=True)
class RepeatSpread:
    """One metric's spread of repeats over a sweep's levels."""

    metric: str
    #: the median over the target-levels with two valid repeats or more, a share (0.003)
    median: float
    #: the largest, and where: target, axis, level
    largest: float
    target: str
    axis: Axis
    level: float
    #: how many target-levels had two valid repeats or more
    levels: int

    @property
    def label(self) -> str:
        return metric_spec(self.metric).label

    def where(self) -> str:
        """``vllm c=8``."""
        return f"{self.target} {level_label(self.axis, self.level)}"


def level_spreads(
    sweep: SweepFile, metric: str, axis: Axis = "concurrency"
) -> list[tuple[float, str, float]]:
    """``(spread, target, level)`` for every target-level along ``axis`` with two valid
    repeats or more and a positive mean."""
    path = metric_spec(metric).path
    out = []
    for t in sweep.target_names():
        for level, vals in level_values(sweep.runs, t, path, axis).items():
            mean = statistics.fmean(vals) if len(vals) >= 2 else 0.0
            if mean > 0:
                out.append(((max(vals) - min(vals)) / mean, t, level))
    return out


def repeat_spreads(sweep: SweepFile, metrics: Sequence[str] = SPREAD_METRICS) -> list[RepeatSpread]:
    """Each metric's spread of repeats along the sweep's axis (rate where its runs hold
    arrival rates, else concurrency); a metric no level has two repeats of is left out."""
    axis: Axis = "rate" if any(r.axis == "rate" for r in sweep.runs) else "concurrency"
    out = []
    for m in metrics:
        found = sorted(level_spreads(sweep, m, axis))
        if not found:
            continue
        top, target, level = found[-1]
        median = statistics.median(x for x, _, _ in found)
        out.append(RepeatSpread(m, median, top, target, axis, level, len(found)))
    return out


def own_starts(sweep: SweepFile) -> bool:
    """Whether each repeat was measured on its own engine start (``restart_between_repeats``)."""
    return bool((sweep.workload or {}).get("restart_between_repeats"))
