"""An outlier repeat is flagged against its siblings and the sweep's own repeat noise;
ordinary spread is not."""

from __future__ import annotations

from typing import Any

from crossover.analysis import SweepFile
from crossover.analysis.outliers import outlier_repeats, repeat_noise

from .synthetic_servers import summary


def _sweep(values: dict[int, list[float]]) -> SweepFile:
    runs: list[dict[str, Any]] = []
    for c, reps in values.items():
        for r, v in enumerate(reps):
            runs.append({"target": "fast", "concurrency": c, "repeat": r,
                         "summary": summary(total=v, concurrency=c)})  # fmt: skip
    return SweepFile.model_validate({"runs": runs})


def test_two_repeats_far_apart_name_the_one_off_the_curve() -> None:
    # the case: 21 tok/s beside its repeat's 128, the other levels within 3%
    sweep = _sweep({1: [60, 62], 2: [100, 103], 4: [21, 128], 8: [150, 147], 16: [170, 172]})
    (o,) = outlier_repeats(sweep)
    assert (o.target, o.level, o.repeat, o.value, o.siblings) == ("fast", 4, 0, 21, 128)
    assert o.redo == "fast@4"
    assert o.describe() == "fast c=4 repeat 0: 21 total tok/s, 0.16x its siblings' 128"
    # one level alone: its own spread is all the noise there is to judge it by
    assert outlier_repeats(_sweep({4: [128, 21]})) == []


def test_three_repeats_flag_only_the_odd_one() -> None:
    sweep = _sweep({1: [60, 61, 59], 2: [100, 30, 101], 4: [140, 139, 141]})
    (o,) = outlier_repeats(sweep)
    assert (o.level, o.repeat) == (2, 1) and round(o.siblings) == 100


def test_ordinary_spread_is_not_flagged() -> None:
    noise = repeat_noise(_sweep({1: [60, 62], 2: [100, 104]}))
    assert noise is not None and 0.01 < noise < 0.03
    assert outlier_repeats(_sweep({1: [60, 66], 2: [100, 112], 4: [140, 150]})) == []
    # a noisy machine: 30% spread everywhere is its noise, not one outlier
    assert outlier_repeats(_sweep({1: [40, 80], 2: [70, 130], 4: [90, 170]})) == []
    assert outlier_repeats(_sweep({1: [60], 2: [100]})) == []  # one repeat: nothing to judge
