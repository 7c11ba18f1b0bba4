"""A level whose engine filled its KV cache while requests waited is flagged, and an
open-loop level whose engine kept requests waiting is said queued, from the gauges sampled
while it ran: on synthetic samples and on the committed H100 runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossover.analysis.kv import (
    FULL,
    QUEUED_FOR_S,
    QUEUED_IN_A_ROW,
    above_slots,
    format_above_slots,
    format_kv_full,
    format_queued,
    kv_full_runs,
    kv_pressure,
    queue_reading,
    queued_runs,
)
from crossover.analysis.schema import ServerMetricsSample, SweepFile
from crossover.engines import registry
from crossover.report.load import load_sweep

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results" / "h100"


def samples(*rows: dict[str, float | None]) -> list[ServerMetricsSample]:
    return [ServerMetricsSample(t_s=float(i), values=v) for i, v in enumerate(rows)]


def sglang(usage: float | None, queued: float | None) -> dict[str, float | None]:
    return {"sglang:token_usage": usage, "sglang:num_queue_reqs": queued}


def test_a_full_cache_with_requests_waiting_is_full() -> None:
    found = kv_pressure(samples(sglang(0.5, 0.0), sglang(1.0, 81.0), sglang(0.9, 20.0)))
    assert found is not None and found.full
    assert found.usage_series == "sglang:token_usage"
    assert found.waiting_series == "sglang:num_queue_reqs"
    assert (found.peak_usage, found.peak_waiting) == (1.0, 81.0)
    assert (found.samples, found.full_samples, found.full_waiting_samples) == (3, 1, 1)
    assert found.describe() == (
        "KV usage up to 1.00, up to 81 requests waiting (1 of 3 samples full with requests waiting)"
    )


def test_a_queue_without_a_full_cache_is_not() -> None:
    # vLLM at 256 on the H100: 153 queued at the burst's start, the cache at 0.89
    rows = [
        {"vllm:kv_cache_usage_perc": 0.89, "vllm:num_requests_waiting": 153.0},
        {"vllm:kv_cache_usage_perc": FULL - 0.001, "vllm:num_requests_waiting": 2.0},
    ]
    found = kv_pressure(samples(*rows))
    assert found is not None and not found.full
    assert found.peak_waiting == 153.0 and found.full_samples == 0


def test_a_full_cache_with_nobody_waiting_is_not() -> None:
    # every request had room: nothing waited for it, so TTFT holds no such wait
    found = kv_pressure(samples(sglang(1.0, 0.0), sglang(0.99, 0.0), sglang(0.5, 4.0)))
    assert found is not None and not found.full
    assert found.full_samples == 2 and found.full_waiting_samples == 0


def test_full_and_waiting_must_be_read_in_the_same_sample() -> None:
    found = kv_pressure(samples(sglang(1.0, 0.0), sglang(0.7, 30.0)))
    assert found is not None and not found.full


def test_usage_at_the_threshold_counts_as_full() -> None:
    rows = {"llamacpp:kv_cache_usage_ratio": FULL, "llamacpp:requests_deferred": 1.0}
    found = kv_pressure(samples(rows))
    assert found is not None and found.full


@pytest.mark.parametrize(
    "rows",
    [
        [],
        [{"calibration:num_requests_waiting": 40.0}],  # a queue, but no KV usage series
        [{"sglang:num_queue_reqs": 40.0}],
        [{"sglang:token_usage": None, "sglang:num_queue_reqs": 3.0}],  # NaN read as missing
    ],
)
def test_no_usage_reading_is_none(rows: list[dict[str, float | None]]) -> None:
    assert kv_pressure(samples(*rows)) is None


def test_none_without_samples() -> None:
    assert kv_pressure(None) is None


def test_usage_without_a_waiting_reading_is_never_full() -> None:
    found = kv_pressure(samples(sglang(1.0, None)))
    assert found is not None and not found.full and found.peak_waiting is None


def test_each_declared_series_is_one_the_engine_keeps() -> None:
    declared = {
        s.name: (s.kv_usage_metric, s.waiting_metric, s.running_metric) for s in registry.specs()
    }
    assert declared["vllm"] == (
        "vllm:kv_cache_usage_perc", "vllm:num_requests_waiting", "vllm:num_requests_running",
    )  # fmt: skip
    assert declared["sglang"] == (
        "sglang:token_usage", "sglang:num_queue_reqs", "sglang:num_running_reqs",
    )  # fmt: skip
    assert declared["llamacpp"] == (
        "llamacpp:kv_cache_usage_ratio", "llamacpp:requests_deferred",
        "llamacpp:requests_processing",
    )  # fmt: skip
    for s in registry.specs():
        for name in (s.kv_usage_metric, s.waiting_metric, s.running_metric):
            assert name is None or name in s.metric_names, (s.name, name)


def _flagged(folder: str) -> list[tuple[str, float, int]]:
    sweep = load_sweep(RESULTS / folder)
    return [(x.target, x.level, x.repeat) for x in kv_full_runs(sweep)]


def test_the_h100_decision_flags_sglang_at_256_only() -> None:
    # sglang:token_usage 1.0 with 81 queued; sglang at 128 (0.63) and vLLM at 256 (0.89,
    # 153 queued) did not fill theirs
    assert _flagged("moe-warm-decide-b") == [("sglang", 256, 0)]


def test_the_h100_grid_flags_vllm_at_512_and_sglang_at_256_in_both_repeats() -> None:
    assert _flagged("moe-warm-grid") == [
        ("vllm", 512, 0),
        ("vllm", 512, 1),
        ("sglang", 256, 0),
        ("sglang", 256, 1),
    ]
    lines = format_kv_full(kv_full_runs(load_sweep(RESULTS / "moe-warm-grid")))
    assert lines == [
        "vllm at c=512 (repeats 0, 1): KV usage up to 1.00, up to 314 requests waiting: the "
        "engine's KV cache was full: requests waited for room, so TTFT there counts that wait",
        "sglang at c=256 (repeats 0, 1): KV usage up to 1.00, up to 115 requests waiting: the "
        "engine's KV cache was full: requests waited for room, so TTFT there counts that wait",
    ]


def test_targets_narrow_the_runs() -> None:
    sweep = load_sweep(RESULTS / "moe-warm-grid")
    assert {x.target for x in kv_full_runs(sweep, ["sglang"])} == {"sglang"}


def queue(
    running: float | None, waiting: float | None, usage: float | None
) -> dict[str, float | None]:
    return {
        "sglang:num_running_reqs": running,
        "sglang:num_queue_reqs": waiting,
        "sglang:token_usage": usage,
    }


def test_a_queue_that_lasts_samples_in_a_row_is_queued() -> None:
    found = queue_reading(
        samples(queue(240, 0, 0.9), queue(255, 18, 0.93), queue(254, 25, 0.94), queue(251, 0, 0.91))
    )
    assert found is not None and found.queued
    assert (found.longest, found.peak_waiting, found.waiting_samples, found.samples) == (
        2,
        25,
        2,
        4,
    )
    # what ran beside the queue, not over the whole run
    assert (found.peak_running, found.peak_usage) == (255, 0.94)


def test_a_queue_in_one_sample_at_a_time_is_not() -> None:
    # one scheduling step's arrivals read between two steps: no wait past a second
    found = queue_reading(samples(queue(200, 3, 0.8), queue(201, 0, 0.8), queue(199, 2, 0.8)))
    assert found is not None and not found.queued and found.longest == 1 < QUEUED_IN_A_ROW
    # a missing reading breaks the row
    found = queue_reading(samples(queue(200, 3, 0.8), queue(None, None, None), queue(199, 2, 0.8)))
    assert found is not None and not found.queued


def test_no_waiting_reading_is_none() -> None:
    assert queue_reading(None) is None
    assert queue_reading(samples({"sglang:token_usage": 0.5})) is None


def test_the_open_loop_decision_says_sglang_queued_at_20_requests_per_s() -> None:
    """SGLang at 20 requests/s (docs/results/h100/moe-open-decide-freeze) kept up to 25
    requests waiting with 255 of its 256 slots running and its cache at 0.94, short of
    full: queued, not KV full; vLLM at 20 (up to 300 running) kept none waiting, nor did
    SGLang at 16."""
    sweep = load_sweep(RESULTS / "moe-open-decide-freeze")
    found = queued_runs(sweep)
    assert [(x.target, x.level, x.repeat) for x in found] == [("sglang", 20, 0), ("sglang", 20, 1)]
    assert kv_full_runs(sweep) == []
    assert [x.limit for x in found] == [256, 256]
    assert format_queued(found) == [
        "sglang at rate=20 (repeats 0, 1): up to 25 requests waiting (up to 5 samples in a "
        "row), up to 255 running of its 256 slots at KV usage up to 0.94: requests waited to "
        "be admitted while arrivals kept coming (the engine's running-request limit, or KV "
        "room it keeps for tokens still to generate, held them back), so TTFT there counts "
        "that wait"
    ]
    assert queued_runs(sweep, ["vllm"]) == []


def test_a_closed_loop_queue_is_not_said_queued() -> None:
    # a closed loop's burst queues at its start (vLLM at 256 queued 153 on the H100 grid)
    assert queued_runs(load_sweep(RESULTS / "moe-warm-grid")) == []


def test_a_queue_is_timed_not_counted() -> None:
    """At a shorter scrape interval two samples in a row are one scheduling step's burst:
    the row must span ``QUEUED_FOR_S`` (samples 0.2 s apart: six of them)."""
    rows = [queue(200, 5, 0.8), queue(200, 5, 0.8)]
    fast = [ServerMetricsSample(t_s=0.2 * i, values=v) for i, v in enumerate(rows)]
    found = queue_reading(fast)
    assert found is not None and found.longest == 2 and not found.queued
    rows = [queue(200, 5, 0.8)] * 6
    fast = [ServerMetricsSample(t_s=0.2 * i, values=v) for i, v in enumerate(rows)]
    found = queue_reading(fast)
    assert found is not None and found.queued and found.longest_s >= QUEUED_FOR_S


def _with_slots(folder: str, target: str, **settings: int) -> SweepFile:
    """A committed sweep as if ``target`` had run with other slots (its settings as the
    engine ran them, where the check reads them)."""
    sweep = load_sweep(RESULTS / folder)
    targets = [
        t.model_copy(update={"settings": {**t.settings, **settings}}) if t.name == target else t
        for t in sweep.targets
    ]
    return sweep.model_copy(update={"targets": targets})


def test_no_committed_closed_loop_level_is_above_its_targets_slots() -> None:
    """Every committed sweep matched its slots to its top level (SGLang 256 at c=256,
    llama.cpp 128 at 128, vLLM 512 at 512): nothing is said."""
    folders = sorted(p.parent for p in RESULTS.parent.glob("*/*/sweep.json"))
    assert len(folders) >= 15
    for folder in folders:
        assert above_slots(load_sweep(folder)) == [], folder


def test_levels_above_the_slots_the_engine_ran_are_said_with_the_queue_read() -> None:
    """The H100 grid's SGLang as if it had run 64 slots: its levels 128 and 256 are above
    them, and the most requests its waiting gauge read there is said."""
    sweep = _with_slots("moe-warm-grid", "sglang", parallel_slots=64)
    found = above_slots(sweep)
    assert [(x.target, x.slots, x.levels) for x in found] == [("sglang", 64, (128.0, 256.0))]
    runs = [r for r in sweep.runs if r.target == "sglang" and r.level > 64 and r.is_valid]
    read = [
        v
        for r in runs
        for s in r.server_metrics or []
        if (v := s.values.get("sglang:num_queue_reqs")) is not None
    ]
    assert read and found[0].peak_waiting == max(read) > 0
    (line,) = format_above_slots(found)
    assert line.startswith(
        f"sglang at c=128, c=256, above the 64 requests it ran at once, up to "
        f"{max(read):.0f} requests read waiting: the requests beyond them waited"
    )
    assert above_slots(sweep, ["vllm"]) == []


def test_replicas_multiply_the_slots() -> None:
    sweep = _with_slots("moe-warm-grid", "sglang", parallel_slots=64, replicas=2)
    assert [x.levels for x in above_slots(sweep)] == [(256.0,)]


def test_the_findings_and_the_html_report_say_it() -> None:
    from crossover.analysis.crossovers import analyze_sweep
    from crossover.report.html import render_html
    from crossover.report.text import findings_lines

    sweep = _with_slots("moe-warm-grid", "sglang", parallel_slots=64)
    findings = analyze_sweep(sweep)
    lines = findings_lines(sweep, findings)
    said = [ln for ln in lines if ln.startswith("[bold red]above slots:[/] sglang at c=128")]
    assert len(said) == 1
    html = render_html(sweep, {}, findings, [])
    assert '<h2 id="above-slots">' in html
    assert "sglang at c=128, c=256, above the 64 requests it ran at once" in html
    plain = render_html(load_sweep(RESULTS / "moe-warm-grid"), {}, findings, [])
    assert 'id="above-slots"' not in plain
