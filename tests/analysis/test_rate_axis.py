"""Crossovers along the rate axis of a rate sweep, and runs of the two axes kept apart."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from crossover.analysis import METRICS, SweepFile, analyze_sweep, findings_to_schema
from crossover.analysis import format_crossover as fmt

from .synthetic_servers import summary

TPOT = [m for m in METRICS if m.key == "tpot_ms.p50"]


def _run(
    target: str, rep: int, tpot: float, rate: float | None = None, c: int | None = None
) -> dict[str, Any]:
    return {"target": target, "rate": rate, "concurrency": c, "repeat": rep,
            "summary": summary(tpot_ms=tpot)}  # fmt: skip


def _rates() -> list[dict[str, Any]]:
    # A: 5 ms at light load, degrading fast; B: a flat 8 ms. Equal at 6 requests/s.
    runs = []
    for rate in (1.0, 2.5, 4.0, 8.0, 16.0):
        for rep in range(3):
            jitter = 0.01 * (rep - 1)
            runs.append(_run("A", rep, (5 + 0.5 * rate) * (1 + jitter), rate=rate))
            runs.append(_run("B", rep, 8.0 * (1 - jitter), rate=rate))
    return runs


def test_crossover_along_the_rate_axis() -> None:
    sweep = SweepFile.model_validate({"runs": _rates()})
    assert sweep.axis() == "rate"
    (x,) = analyze_sweep(sweep, metrics=TPOT)
    assert (x.kind, x.axis, x.below, x.above) == ("crossover", "rate", "A", "B")
    assert x.bracket == (4.0, 8.0)
    assert x.interval is not None and x.interval[0] <= 6.0 <= x.interval[1]
    (rec,), _ = findings_to_schema([x])
    assert rec.concurrency is None and rec.rate is not None
    assert "requests/s" in fmt(x) and "requests/s" in fmt(rec)
    # the sweep file keeps rate runs as such, and concurrency runs unchanged
    again = SweepFile.model_validate_json(sweep.to_json())
    assert [r.rate for r in again.runs] == [r.rate for r in sweep.runs]


def test_axes_are_never_compared_with_each_other() -> None:
    runs = _rates() + [_run(t, rep, 7.0, c=4) for t in "AB" for rep in range(3)]
    sweep = SweepFile.model_validate({"runs": runs})
    assert sweep.axis() == "concurrency"  # mixed: not a rate sweep
    findings = analyze_sweep(sweep, metrics=TPOT)
    assert {f.axis for f in findings} == {"concurrency", "rate"}
    (along_c,) = [f for f in findings if f.axis == "concurrency"]
    assert along_c.levels == (4,)  # no rate level leaks in
    assert along_c.kind == "none"  # equal there


@pytest.mark.parametrize(("rate", "c"), [(None, None), (2.0, 4)])
def test_a_run_has_exactly_one_level(rate: float | None, c: int | None) -> None:
    with pytest.raises(ValidationError, match="either concurrency or rate"):
        SweepFile.model_validate({"runs": [_run("A", 0, 5.0, rate=rate, c=c)]})
