"""A crossing at an end of the levels measured reads truthfully: a point that prints as
the lowest level is not a lead "below" it, where nothing was measured (and likewise at
the highest level); a crossing inside the range keeps its usual line."""

from __future__ import annotations

from typing import Any

import pytest

from crossover.analysis import SweepFile, analyze_sweep, findings_to_schema, format_crossover
from crossover.analysis.crossovers import crossover_levels, metric_spec

from .synthetic_servers import summary

ITL = [metric_spec("itl_ms.p50")]


def _sweep(curves: dict[str, dict[int, float]]) -> SweepFile:
    runs: list[dict[str, Any]] = [
        {"target": t, "concurrency": c, "repeat": 0, "summary": summary(itl_ms=v)}
        for t, curve in curves.items()
        for c, v in curve.items()
    ]
    return SweepFile.model_validate({"schema": "crossover.sweep/1", "runs": runs})


def test_a_crossing_at_the_lowest_level_is_a_lead_at_it_not_below_it() -> None:
    # A leads by 4 % at 1 (past the 3 % noise floor), B by half from 2 on: the curves
    # cross just after 1, at a point printed as 1
    sweep = _sweep({"A": {1: 10.0, 2: 20.0, 4: 40.0}, "B": {1: 10.4, 2: 10.0, 4: 10.0}})
    (x,) = analyze_sweep(sweep, metrics=ITL)
    assert (x.kind, x.below, x.above) == ("crossover", "A", "B")
    assert x.concurrency is not None and 1 < x.concurrency < 1.05
    line = format_crossover(x)
    assert line == (
        "ITL p50: A leads at 1 concurrent requests (the lowest level measured), "
        "B above (crossing in 1.0-1.1)"
    )
    assert "below" not in line
    (rec,), _ = findings_to_schema([x])  # as recorded in sweep.json: the same line
    assert format_crossover(rec, crossover_levels(sweep, rec)) == line
    assert rec.concurrency == pytest.approx(x.concurrency, abs=1e-3)  # the figure stays


def test_a_crossing_at_the_highest_level_is_a_lead_at_it_not_above_it() -> None:
    sweep = _sweep({"A": {1: 10.0, 2: 10.0, 4: 10.35}, "B": {1: 400.0, 2: 200.0, 4: 10.0}})
    (x,) = analyze_sweep(sweep, metrics=ITL)
    assert (x.kind, x.below, x.above) == ("crossover", "A", "B")
    line = format_crossover(x)
    assert line.endswith(", B at 4 (the highest level measured)"), line
    assert "above" not in line


def test_a_crossing_inside_the_range_keeps_its_line() -> None:
    sweep = _sweep({"A": {1: 10.0, 2: 10.0, 4: 40.0}, "B": {1: 20.0, 2: 20.0, 4: 20.0}})
    (x,) = analyze_sweep(sweep, metrics=ITL)
    line = format_crossover(x)
    assert line.startswith("ITL p50: A leads below 2.8 concurrent requests (")
    assert line.endswith("), B above")
