"""``decide --check``'s GPU-time estimate: the grid's and the first pass's measuring seconds
from a hand-made forecast's output tokens/s, plus engine starts, the arithmetic checked
exactly (rates and token counts chosen so every quotient is exact in binary)."""

from __future__ import annotations

from typing import Any

import pytest

from crossover.decide.estimate import (
    PassEstimate,
    SessionEstimate,
    estimate_line,
    estimate_session,
    run_seconds,
)
from crossover.sweep.config import SweepConfig

#: output tokens/s per target and level
RATES = {"a": {1: 100.0, 4: 200.0, 16: 400.0}, "b": {1: 50.0, 4: 100.0}}
GRID = {"a": [1, 4, 16], "b": [1, 4]}
FIRST = {"a": [1, 16], "b": [1]}  # a: the reference


def _config(**over: Any) -> SweepConfig:
    data: dict[str, Any] = {
        "concurrency": [1, 4, 16],
        "output_tokens": 100,
        "requests_per_concurrency": 2,
        "min_requests_per_level": 4,
        "warmup_requests": "level",
        "warmup_output_tokens": 25,
        "repeats": 2,
        "targets": [
            {"name": "a", "launch": {"engine": "vllm", "model": "m"}},
            {"name": "b", "concurrency": [1, 4], "launch": {"engine": "vllm", "model": "m"}},
        ],
    }
    data.update(over)
    return SweepConfig.model_validate(data)


def test_a_run_is_its_requests_and_its_warm_up_over_the_predicted_rate() -> None:
    cfg = _config()
    # c=1: max(4, 2 x 1) = 4 requests x 100 tokens / 100 tok/s; warm-up 1 x 25 / 100
    assert run_seconds(cfg, RATES, "a", 1, warm_up=True) == 4.0 + 0.25
    # c=16: 32 requests x 100 / 400; warm-up one wave, 16 x 25 / 400
    assert run_seconds(cfg, RATES, "a", 16, warm_up=True) == 8.0 + 1.0
    assert run_seconds(cfg, RATES, "a", 16, warm_up=False) == 8.0
    assert run_seconds(cfg, RATES, "b", 16, warm_up=True) is None  # not predicted


def test_the_grid_and_the_first_pass() -> None:
    est = estimate_session(_config(), GRID, FIRST, RATES, start_s=100.0, reference_repeats=2)
    # a: 4.25 + 4.5 + 9 a repeat; b: 8.5 + 9; two repeats each
    assert est.grid == PassEstimate(measuring_s=70.5, runs=10, starts=2, start_s=100.0)
    assert est.grid.gpu_s == 270.5
    # the reference's repeats while its engine is up, b's levels once
    assert est.first_pass == PassEstimate(measuring_s=35.0, runs=5, starts=2, start_s=100.0)
    assert est.missing == ()


def test_under_a_budget_the_reference_repeats_only_its_cheap_levels() -> None:
    est = estimate_session(
        _config(), GRID, FIRST, RATES, start_s=10.0, reference_repeats=2, repeat_below_s=5.0
    )
    # a at 1 (4.25 s) twice, at 16 (9 s) once; b at 1
    assert est.first_pass == PassEstimate(measuring_s=26.0, runs=4, starts=2, start_s=10.0)


def test_warmed_once_per_start_and_a_url_target_starts_nothing() -> None:
    targets = [
        {"name": "a", "launch": {"engine": "vllm", "model": "m"}},
        {"name": "b", "concurrency": [1, 4], "url": "http://h:1", "model": "m"},
    ]
    cfg = _config(warmup_requests=2, warmup_every_level=False, targets=targets)
    est = estimate_session(cfg, GRID, FIRST, RATES, start_s=100.0)
    # a: 4 + 2 x 25 / 100 warmed, then 4, 4, 4, 8, 8; b: 8 + 2 x 25 / 50, then 8, 8, 8
    assert est.grid == PassEstimate(measuring_s=32.5 + 33.0, runs=10, starts=1, start_s=100.0)


def test_a_level_held_for_a_duration_is_that_long() -> None:
    cfg = _config(requests_per_concurrency=None, duration_s_per_level=30.0)
    assert run_seconds(cfg, RATES, "a", 4, warm_up=True) == 30.0 + 0.5


def test_a_level_the_prior_does_not_predict_is_named_not_guessed() -> None:
    rates = {"a": RATES["a"], "b": {1: 50.0}}
    est = estimate_session(_config(), GRID, FIRST, rates, start_s=100.0)
    assert est.grid is None and est.missing == (("b", 4),)
    assert est.first_pass is not None  # b at 4 is not in it
    assert estimate_line(est) == "estimate: none; the prior predicts no output tokens/s for b at 4"


def test_the_line() -> None:
    est = SessionEstimate(
        grid=PassEstimate(1234.0, 54, 3, 105.0),
        first_pass=PassEstimate(310.0, 23, 3, 105.0),
        start_s=105.0,
        missing=(),
        first_pass_low=PassEstimate(310.0, 23, 3, 105.0),
    )
    assert estimate_line(est) == (
        "estimate (from the prior's throughput, starts 105 s each): grid 1,234 s measuring "
        "+ 3 starts = 25.8 GPU-min; first pass 310 s + 3 starts = 10.4 GPU-min (the rest "
        "depends on what it measures)"
    )
    assert "starts 105 s each, --start-s)" in estimate_line(est, "--start-s")
    assert estimate_line(None) == (
        "estimate: no estimate without --prior (the forecast's output tokens/s per level)"
    )


def test_a_decisions_plan_and_its_reference_repeats() -> None:
    """The decision of a YAML: its grid every target's own levels, its first pass the
    check's levels; without reference repeats the reference measures each level once."""
    from crossover.decide.coarse import first_pass_levels
    from crossover.decide.estimate import decision_estimate
    from crossover.decide.live import question_for
    from crossover.decide.state import PolicyConfig

    cfg = _config()
    q = question_for(cfg, "crossover", ["total_tokens_per_s"])
    first = first_pass_levels(q, None, PolicyConfig().coarse_step)
    assert first == {"a": [1, 4], "b": [1, 4]}  # 16: a's alone
    est = decision_estimate(cfg, q, first, RATES, PolicyConfig(), 100.0)
    assert est.grid == PassEstimate(70.5, 10, 2, 100.0)
    assert est.first_pass == PassEstimate(2 * (4.25 + 4.5) + 8.5 + 9.0, 6, 2, 100.0)
    once = decision_estimate(cfg, q, first, RATES, PolicyConfig(reference_repeats=False), 100.0)
    assert once.first_pass == PassEstimate(4.25 + 4.5 + 8.5 + 9.0, 4, 2, 100.0)


def test_the_line_gives_the_first_pass_as_a_range_where_levels_may_stop() -> None:
    est = SessionEstimate(
        grid=PassEstimate(1234.0, 54, 3, 105.0),
        first_pass=PassEstimate(310.0, 23, 3, 105.0),
        start_s=105.0,
        missing=(),
        first_pass_low=PassEstimate(190.0, 23, 3, 105.0, stopped=9),
    )
    assert estimate_line(est).endswith(
        "first pass 190-310 s + 3 starts = 8.4-10.4 GPU-min (low with 9 sequential levels "
        "stopped at the first chance, high with every level whole; the rest depends on what "
        "it measures)"
    )
    # both ends printing alike: one figure
    same = SessionEstimate(
        grid=est.grid,
        first_pass=est.first_pass,
        start_s=105.0,
        missing=(),
        first_pass_low=PassEstimate(309.9, 23, 3, 105.0, stopped=1),
    )
    assert "first pass 310 s + 3 starts = 10.4 GPU-min (the rest" in estimate_line(same)


def test_a_sequential_level_stopped_at_its_earliest_is_its_first_waves() -> None:
    """A later target's sequential level stops at the earliest once one wave has finished
    (``max(c, 4)`` requests), the requests then in flight drained: two waves of 16 at
    c = 16 (16 finished, 15 more sent), four single requests at c = 1."""
    from crossover.decide.coarse import earliest_stop

    cfg = _config(requests_per_concurrency=4)  # four waves: 64 requests at 16, 4 at 1
    assert earliest_stop(16, 64) == 31
    assert earliest_stop(4, 16) == 7
    assert earliest_stop(1, 6) == 4
    assert earliest_stop(1, 4) is None  # 4 on one stream: all sent by then, no stop saves
    assert earliest_stop(16, 32) is None  # two waves
    assert earliest_stop(16, None) == 31  # held for a duration
    # 64 requests x 100 / 400 whole; stopped: 2 waves x 16 x 100 / 400; warm-up 16 x 25 / 400
    assert run_seconds(cfg, RATES, "a", 16, warm_up=True) == 16.0 + 1.0
    assert run_seconds(cfg, RATES, "a", 16, warm_up=True, sent=31) == 8.0 + 1.0
    assert run_seconds(cfg, RATES, "a", 16, warm_up=False, sent=64) == 16.0  # never past whole
    held = _config(requests_per_concurrency=None, duration_s_per_level=30.0)
    assert run_seconds(held, RATES, "a", 16, warm_up=False, sent=31) == 8.0
    assert run_seconds(held, RATES, "a", 1, warm_up=False, sent=4) == 4.0
    assert run_seconds(held, RATES, "a", 1, warm_up=False, sent=400) == 30.0


def test_a_four_wave_decision_is_a_range_from_its_one_wave_stops() -> None:
    """Four waves a level (``requests_per_concurrency: 4``): b's level 4 is sequential
    (16 requests, a stop after its first wave leaves 9 unsent), its level 1 whole (4
    requests on one stream, all sent by the earliest stop). The first pass's low end
    counts b at 4 up to its first stop (two waves: 8 of 16 requests' time), its high end
    whole; the reference's levels are whole at both ends."""
    from crossover.decide.coarse import first_pass_levels
    from crossover.decide.estimate import decision_estimate
    from crossover.decide.live import question_for
    from crossover.decide.state import PolicyConfig

    cfg = _config(requests_per_concurrency=4)
    q = question_for(cfg, "crossover", ["total_tokens_per_s"])
    first = first_pass_levels(q, None, PolicyConfig().coarse_step)
    assert first == {"a": [1, 4], "b": [1, 4]}
    est = decision_estimate(cfg, q, first, RATES, PolicyConfig(), 100.0)
    # a: 1 (4 requests, 4.25 s), 4 (16 x 100 / 200 = 8 + 0.5) twice; b: 1 (8.5), 4 (16 + 1)
    whole = 2 * (4.25 + 8.5) + 8.5 + 17.0
    assert est.first_pass == PassEstimate(whole, 6, 2, 100.0)
    # b at 4 stopped at the first chance: 7 sent, two waves of 4: 8 x 100 / 100 + 1
    assert est.first_pass_low == PassEstimate(whole - 8.0, 6, 2, 100.0, stopped=1)
    line = estimate_line(est)
    assert "first pass 43-51 s + 2 starts = 4.0-4.2 GPU-min (low with 1 sequential level" in line


def test_a_two_wave_decision_is_one_figure() -> None:
    """Two waves a level (``requests_per_concurrency: 2``, the H100 and H200 YAMLs'): no
    level is sequential, both ends are the same and the line gives one figure."""
    from crossover.decide.coarse import first_pass_levels
    from crossover.decide.estimate import decision_estimate
    from crossover.decide.live import question_for
    from crossover.decide.state import PolicyConfig

    cfg = _config()
    q = question_for(cfg, "crossover", ["total_tokens_per_s"])
    first = first_pass_levels(q, None, PolicyConfig().coarse_step)
    est = decision_estimate(cfg, q, first, RATES, PolicyConfig(), 100.0)
    assert est.first_pass_low == est.first_pass
    assert "first pass 35 s + 2 starts = 3.9 GPU-min (the rest depends" in estimate_line(est)


def _rate_config(**over: Any) -> SweepConfig:
    data: dict[str, Any] = {
        "rates": [1.0, 2.0, 4.0, 8.0],
        "duration_s_per_level": 40,
        "output_tokens": 100,
        "repeats": 2,
        "targets": [
            {"name": "a", "launch": {"engine": "vllm", "model": "m"}},
            {"name": "b", "launch": {"engine": "sglang", "model": "m"}},
        ],
    }
    data.update(over)
    return SweepConfig.model_validate(data)


def test_an_open_loop_is_estimated_from_its_arrivals_without_a_forecast() -> None:
    """Along rates a run lasts as long as its arrivals: the grid every rate every repeat,
    the first pass the reference's levels with its repeats (its engine up) and a later
    target's once; each start its engine's own; said as a floor."""
    from crossover.decide.estimate import arrival_seconds, rate_estimate
    from crossover.decide.live import question_for
    from crossover.decide.state import PolicyConfig

    cfg = _rate_config()
    assert arrival_seconds(cfg, 8.0) == 40.0
    q = question_for(cfg, "crossover", ["ttft_ms.p99"])
    first = {"a": [1.0, 4.0, 8.0], "b": [1.0, 4.0, 8.0]}
    est = rate_estimate(cfg, q, first, PolicyConfig(), {"a": 100.0, "b": 60.0})
    assert est.arrivals_only
    assert est.grid == PassEstimate(2 * 2 * 4 * 40.0, 16, 2, 80.0)
    assert est.first_pass == PassEstimate((2 * 3 + 3) * 40.0, 9, 2, 80.0)
    assert est.start_of == {"a": 100.0, "b": 60.0}
    assert estimate_line(est) == (
        "estimate (arrivals alone, each run's warm-up and drain left out: at least; starts "
        "a 100 s, b 60 s): grid 640 s measuring + 2 starts = 13.3 GPU-min; first pass "
        "360 s + 2 starts = 8.7 GPU-min (the rest depends on what it measures)"
    )
    # without the reference's repeats up front, every first-pass level once
    once = rate_estimate(cfg, q, first, PolicyConfig(reference_repeats=False), 90.0)
    assert once.first_pass == PassEstimate(6 * 40.0, 6, 2, 90.0)
    # a level of N requests lasts N / rate: 32 requests at 8/s arrive over 4 s
    counted = _rate_config(duration_s_per_level=None, requests_per_level=32)
    assert arrival_seconds(counted, 8.0) == 4.0
    assert arrival_seconds(counted, 2.0) == 16.0
    # along concurrency it refuses (the forecast's estimate is that one)
    cq = question_for(_config(), "crossover", ["total_tokens_per_s"])
    with pytest.raises(ValueError, match="along arrival rates"):
        rate_estimate(_config(), cq, {"a": [1.0]}, PolicyConfig(), 1.0)


def test_the_arrivals_floor_holds_on_the_committed_open_loop_grids() -> None:
    """The arrivals-only estimate of an open-loop grid is below what its runs took on the
    H100 (warm-ups and drains on top), and not far below: 448 s of 551 for the 16 s
    levels of docs/results/h100/moe-open, 480 of 543 for sglang-freeze-open's 40 s ones."""
    import json
    from pathlib import Path

    from crossover.decide.coarse import first_pass_levels
    from crossover.decide.estimate import rate_estimate
    from crossover.decide.live import question_for
    from crossover.decide.state import PolicyConfig
    from crossover.sweep.config import load_sweep_config

    root = Path(__file__).resolve().parents[2]
    for yaml_name, folder, share in (
        ("moe-open-h100.yaml", "moe-open", 0.75),
        ("sglang-freeze-open-h100.yaml", "sglang-freeze-open", 0.85),
    ):
        cfg = load_sweep_config(root / "scripts" / "h200" / yaml_name)
        q = question_for(cfg, "crossover", ["ttft_ms.p99"])
        first = first_pass_levels(q, None, PolicyConfig().coarse_step)
        est = rate_estimate(cfg, q, first, PolicyConfig(), 100.0)
        runs = json.loads((root / "docs/results/h100" / folder / "sweep.json").read_text())["runs"]
        took = sum(r["summary"]["duration_s"] for r in runs)
        assert est.grid is not None and est.grid.runs == len(runs), folder
        assert share * took <= est.grid.measuring_s <= took, (folder, est.grid.measuring_s, took)
