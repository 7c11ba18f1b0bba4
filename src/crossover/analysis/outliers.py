"""Repeats that disagree with their siblings beyond the sweep's own repeat noise.

One disturbed run (a page-cache flush, another job on the machine) beside a normal
repeat widens the level's interval until every finding through it reads inconclusive.
Such a repeat is flagged, and ``crossover sweep --redo TARGET@LEVEL`` measures it again.

How a repeat is judged, on the level's headline throughput (total tokens/s along
concurrency, output tokens/s along the rate axis), in log space (a ratio):

* the sweep's repeat noise ``sigma`` is the median, over every target and level with
  two or more valid repeats, of the standard deviation of the repeats' logs (the
  median: one disturbed level does not make the noise look large);
* with three or more repeats, a repeat is off when its ratio to the level's median
  (robust to the one off) is beyond ``max(RATIO, exp(K x sigma))``;
* with two, the pair disagrees when their ratio is beyond
  ``max(RATIO, exp(K x sigma x sqrt 2))`` (the difference of two noisy values), and
  the one further from the target's neighbouring levels is named.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from crossover.analysis.schema import Axis, SweepFile, SweepRun, level_label

#: a ratio below this is never flagged, however quiet the machine (1.5x)
RATIO = 1.5
#: how many noise standard deviations a repeat must be off by
K = 4.0


@dataclass(frozen=True)
class Outlier:
    target: str
    axis: Axis
    level: float
    repeat: int
    value: float
    #: the level's median (three or more repeats), or its one sibling's value
    siblings: float
    metric: str

    @property
    def ratio(self) -> float:
        return self.value / self.siblings

    @property
    def redo(self) -> str:
        """Its ``--redo`` spec: ``NAME@LEVEL``."""
        return f"{self.target}@{self.level:g}"

    def describe(self) -> str:
        unit = "total tok/s" if self.metric == "throughput.total_tokens_per_s" else "output tok/s"
        return (
            f"{self.target} {level_label(self.axis, self.level)} repeat {self.repeat}: "
            f"{self.value:,.0f} {unit}, {self.ratio:.2f}x its siblings' {self.siblings:,.0f}"
        )


def headline(axis: str) -> str:
    return "throughput.output_tokens_per_s" if axis == "rate" else "throughput.total_tokens_per_s"


def _groups(sweep: SweepFile) -> dict[tuple[str, Axis, float], list[tuple[SweepRun, float]]]:
    out: dict[tuple[str, Axis, float], list[tuple[SweepRun, float]]] = {}
    for r in sweep.runs:
        v = r.value(headline(r.axis)) if r.is_valid else None
        if v is not None and v > 0:
            out.setdefault((r.target, r.axis, r.level), []).append((r, v))
    return out


def repeat_noise(sweep: SweepFile) -> float | None:
    """The sweep's typical repeat noise: the median SD of the logs over its levels."""
    sds = [
        statistics.stdev(math.log(v) for _, v in runs)
        for runs in _groups(sweep).values()
        if len(runs) >= 2
    ]
    return statistics.median(sds) if sds else None


def outlier_repeats(sweep: SweepFile) -> list[Outlier]:
    """Every valid repeat that disagrees with its siblings beyond the noise (see above)."""
    groups = _groups(sweep)
    sigma = repeat_noise(sweep)
    if sigma is None:
        return []
    out: list[Outlier] = []
    for (target, axis, level), runs in sorted(groups.items()):
        metric = headline(axis)
        if len(runs) >= 3:
            limit = max(math.log(RATIO), K * sigma)
            middle = statistics.median(v for _, v in runs)
            for r, v in runs:
                if abs(math.log(v / middle)) > limit:
                    out.append(Outlier(target, axis, level, r.repeat, v, middle, metric))
        elif len(runs) == 2:
            limit = max(math.log(RATIO), K * sigma * math.sqrt(2))
            (ra, va), (rb, vb) = runs
            if abs(math.log(va / vb)) <= limit:
                continue
            trend = _neighbours(groups, target, axis, level)
            if trend is None:  # nothing to tell which: the lower one (a disturbed run is slow)
                off, v, other = (ra, va, vb) if va < vb else (rb, vb, va)
            elif abs(math.log(va / trend)) >= abs(math.log(vb / trend)):
                off, v, other = ra, va, vb
            else:
                off, v, other = rb, vb, va
            out.append(Outlier(target, axis, level, off.repeat, v, other, metric))
    return out


def _neighbours(
    groups: dict[tuple[str, Axis, float], list[tuple[SweepRun, float]]],
    target: str,
    axis: Axis,
    level: float,
) -> float | None:
    """The target's throughput at ``level`` as its neighbouring levels put it: the
    geometric mean of the medians just below and just above (or the one there is)."""
    mine = sorted(lv for (t, a, lv) in groups if t == target and a == axis)
    i = mine.index(level)
    near = [mine[j] for j in (i - 1, i + 1) if 0 <= j < len(mine)]
    if not near:
        return None
    meds = [statistics.median(v for _, v in groups[(target, axis, lv)]) for lv in near]
    return math.exp(sum(math.log(m) for m in meds) / len(meds))
