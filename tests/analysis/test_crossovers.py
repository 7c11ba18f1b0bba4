from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from crossover.analysis import (
    METRICS,
    SweepFile,
    analyze_sweep,
    findings_to_schema,
    format_crossover,
)
from crossover.analysis.crossovers import arrival_effects, metric_spec

from .synthetic_servers import TRUE_CROSSOVER, summary, synthetic_runs

TOTAL = [METRICS[0]]
GRID = [1, 2, 4, 8, 16, 32, 64, 128, 256]


def _sweep(runs: list[dict[str, Any]]) -> SweepFile:
    return SweepFile.model_validate({"schema": "crossover.sweep/1", "runs": runs})


def _run(
    target: str, c: int, repeat: int = 0, verdict: str = "valid", **v: float
) -> dict[str, Any]:
    return {"target": target, "concurrency": c, "repeat": repeat, "summary": summary(verdict, **v)}


@pytest.mark.parametrize("seed", range(20))
def test_interval_contains_true_crossover_on_coarse_grid(seed: int) -> None:
    rng = np.random.default_rng(seed)
    findings = analyze_sweep(
        _sweep(synthetic_runs(GRID, rng, noise=0.02, repeats=3)), metrics=TOTAL
    )
    (x,) = findings
    assert x.kind == "crossover"
    assert (x.below, x.above) == ("A", "B")
    assert x.bracket is not None
    assert x.bracket[0] <= 16
    assert x.bracket[1] >= 32
    assert x.interval is not None
    assert x.interval[0] <= TRUE_CROSSOVER <= x.interval[1]
    assert x.interval[0] <= x.concurrency <= x.interval[1]  # type: ignore[operator]


def test_noise_free_two_levels_interval_is_bracket_and_line() -> None:
    runs = [_run("A", 1, total=120), _run("B", 1, total=100)]
    runs += [_run("A", 4, total=100), _run("B", 4, total=120)]
    (x,) = analyze_sweep(_sweep(runs), metrics=TOTAL)
    assert x.kind == "crossover"
    assert x.concurrency == pytest.approx(2.0)  # halfway in log2
    assert x.interval == (1.0, 4.0)  # no third level: the shape between is unknown
    line = format_crossover(x)
    assert line == "total tokens/s: A leads below 2 concurrent requests (1.0-4.0), B above"
    (rec,), inc = findings_to_schema([x])
    assert not inc
    assert rec.model_dump()["interval"] == (1.0, 4.0)
    assert "B leads below" in format_crossover(rec.model_copy(update={"below": "B"}))


def test_latency_direction_lower_is_better() -> None:
    runs = []
    for c, a, b in ((1, 10.0, 20.0), (2, 12.0, 20.0), (4, 30.0, 20.0), (8, 40.0, 20.0)):
        runs += [_run("A", c, ttft_ms=a), _run("B", c, ttft_ms=b)]
    (x,) = analyze_sweep(_sweep(runs), metrics=[metric_spec("ttft_ms.p50")])
    assert (x.kind, x.below, x.above) == ("crossover", "A", "B")
    assert 2 < x.concurrency < 4  # type: ignore[operator]
    assert format_crossover(x).startswith("TTFT p50: A leads below ")


def test_no_crossover_reports_leader() -> None:
    runs = []
    for c in (1, 2, 4):
        runs += [_run("A", c, total=200.0 * c), _run("B", c, total=100.0 * c)]
    (f,) = analyze_sweep(_sweep(runs), metrics=TOTAL)
    assert f.kind == "none"
    assert f.leader == "A"
    assert "no crossover in the range measured" in format_crossover(f)
    assert findings_to_schema([f]) == ([], [])


def test_not_significant_sign_change_is_inconclusive() -> None:
    # one repeat each: 3% noise floor; the differences are 1-2%, never significant
    runs = []
    for c, a, b in ((1, 101.0, 100.0), (2, 102.0, 100.0), (4, 99.0, 100.0), (8, 98.5, 100.0)):
        runs += [_run("A", c, total=a), _run("B", c, total=b)]
    (f,) = analyze_sweep(_sweep(runs), metrics=TOTAL)
    assert f.kind == "inconclusive"
    assert f.bracket == (2, 4)
    assert "inconclusive between 2 and 4" in format_crossover(f)
    _, (inc,) = findings_to_schema([f])
    assert inc.bracket == (2, 4)


def test_overlapping_repeats_never_claim_a_crossover() -> None:
    runs = []
    for c, a, b in ((1, (110, 96), (100, 101)), (2, (80, 118), (100, 101))):
        for r in range(2):
            runs += [_run("A", c, r, total=a[r]), _run("B", c, r, total=b[r])]
    (f,) = analyze_sweep(_sweep(runs), metrics=TOTAL)
    assert f.kind == "inconclusive"


def test_invalid_runs_are_never_points() -> None:
    runs = []
    for c in (1, 2, 4):
        runs += [_run("A", c, total=200.0), _run("B", c, total=100.0)]
    # an invalid (and an unverified) run that would flip the sign at 4
    runs += [_run("A", 8, verdict="invalid", total=1.0), _run("B", 8, total=100.0)]
    runs += [_run("A", 16, verdict="unverified", total=1.0), _run("B", 16, total=100.0)]
    (f,) = analyze_sweep(_sweep(runs), metrics=TOTAL)
    assert f.kind == "none"
    assert f.levels == (1, 2, 4)


def test_three_targets_every_pair_and_null_values() -> None:
    runs = [_run(t, c, total=100.0) for t in ("A", "B", "C") for c in (1, 2)]
    runs.append({"target": "C", "concurrency": 4, "repeat": 0, "summary": summary()})
    findings = analyze_sweep(_sweep(runs), metrics=TOTAL)
    assert {(f.a, f.b) for f in findings} == {("A", "B"), ("A", "C"), ("B", "C")}
    assert all(f.kind == "none" and f.leader is None for f in findings)


def test_first_wave_ttft_tells_an_arrival_effect_from_a_prefill_one() -> None:
    # pooled TTFT p50: B ahead from 16 on; but on the first wave (sent together, the same
    # arrivals for both) A is ahead everywhere: B's later requests arrived spread out
    levels = ((1, 10, 20, 10, 20), (4, 40, 60, 40, 60), (16, 300, 200, 150, 300),
              (64, 900, 500, 400, 800))  # fmt: skip
    runs = []
    for c, pooled_a, pooled_b, first_a, first_b in levels:
        runs += [_run("A", c, ttft_ms=pooled_a, first_wave_ttft_ms=first_a),
                 _run("B", c, ttft_ms=pooled_b, first_wave_ttft_ms=first_b)]  # fmt: skip
    by = {f.metric: f for f in analyze_sweep(_sweep(runs))}
    pooled, first = by["ttft_ms.p50"], by["first_wave_ttft_ms.p50"]
    assert (pooled.kind, pooled.below, pooled.above) == ("crossover", "A", "B")
    assert (first.kind, first.leader) == ("none", "A")
    assert format_crossover(first).startswith("TTFT p50 (first wave): A leads B over 1-64")
    assert arrival_effects(list(by.values())) == [(pooled, first)]
    # where the first wave crosses too, the crossing is prefill: nothing to note
    for r in runs:
        if r["target"] == "A" and r["concurrency"] >= 16:
            r["summary"]["waves"]["first_ttft_ms"] = r["summary"]["ttft_ms"]
    again = analyze_sweep(_sweep(runs))
    assert any(f.metric == "first_wave_ttft_ms.p50" and f.kind == "crossover" for f in again)
    assert arrival_effects(again) == []


def test_first_wave_metric_is_silent_where_no_run_has_it() -> None:
    # summaries without waves (open loop, or written before the metric existed): nothing
    # about it, not a "no level with valid runs" line per pair
    runs = []
    for c in (1, 2, 4):
        runs += [_run("A", c, ttft_ms=10.0 * c), _run("B", c, ttft_ms=20.0 * c)]
    metrics = {f.metric for f in analyze_sweep(_sweep(runs))}
    assert "ttft_ms.p50" in metrics and "first_wave_ttft_ms.p50" not in metrics
