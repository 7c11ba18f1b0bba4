"""The engine's generated-token counter: parsing the exposition, and reading it after a
level until it has caught up."""

from __future__ import annotations

import asyncio
import gzip
from pathlib import Path

from aiohttp import web

from crossover.engines.counters import (
    GENERATION_COUNTERS,
    CounterTrack,
    counter_after,
    counter_series,
    counter_value,
)

SGLANG_METRICS = (
    Path(__file__).parents[1] / "fixtures" / "sglang" / "sglang-0.5.17-metrics-h200.txt.gz"
)

VLLM = """# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} 120.0
vllm:generation_tokens_total{engine="1",model_name="m"} 30.0
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 999.0
"""


def test_counter_sums_label_sets() -> None:
    assert counter_value(VLLM) == ("vllm:generation_tokens_total", 150.0)


def test_no_known_counter_or_garbage_is_none() -> None:
    assert counter_value("# TYPE x counter\nx_total 3\n") is None
    assert counter_value("this is { not prometheus") is None
    assert counter_value("") is None


def test_llamacpp_counter_is_not_a_witness() -> None:
    """llama-server adds a request's tokens when its slot is reused: it trails a level."""
    text = "# TYPE llamacpp:tokens_predicted_total counter\nllamacpp:tokens_predicted_total 7\n"
    assert "llamacpp:tokens_predicted_total" not in GENERATION_COUNTERS
    assert counter_value(text) is None


def _serve_values(values: list[float]) -> tuple[web.Application, list[int]]:
    hits = [0]

    async def metrics(request: web.Request) -> web.Response:
        v = values[min(hits[0], len(values) - 1)]
        hits[0] += 1
        body = (
            "# TYPE calibration:generation_tokens_total counter\n"
            f"calibration:generation_tokens_total {v}\n"
        )
        return web.Response(text=body, content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return app, hits


def _after(values: list[float], enough: float, settle_s: float = 2.0) -> tuple[float | None, int]:
    async def go() -> tuple[float | None, int]:
        app, hits = _serve_values(values)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        url = f"http://127.0.0.1:{runner.addresses[0][1]}/metrics"
        try:
            track = CounterTrack("calibration:generation_tokens_total", {(): (100.0, None)}, 100.0)
            got = await counter_after(url, track, enough, settle_s)
        finally:
            await runner.cleanup()
        return (got.after if got is not None else None), hits[0]

    return asyncio.run(go())


def test_counter_after_returns_at_once_when_it_has_caught_up() -> None:
    assert _after([160.0], enough=50) == (160.0, 1)


def test_counter_after_waits_for_a_lagging_counter() -> None:
    value, reads = _after([120.0, 140.0, 160.0], enough=50)
    assert (value, reads) == (160.0, 3)


def test_counter_after_stops_when_the_counter_stands_still() -> None:
    """A counter that stays below the claim (a lying server) is read twice, not for 2 s."""
    value, reads = _after([130.0], enough=50)
    assert (value, reads) == (130.0, 2)


def test_counter_after_unreadable_is_none() -> None:
    async def go() -> CounterTrack | None:
        track = CounterTrack("vllm:generation_tokens_total", {(): (1.0, None)}, 1.0)
        return await counter_after("http://127.0.0.1:9/metrics", track, 1, 0.3)

    assert asyncio.run(go()) is None


def test_sglang_counter_from_its_real_metrics() -> None:
    """SGLang 0.5.17's /metrics after a sweep on the H200 (tests/fixtures/sglang): the
    counter is summed over its label sets (one per is_streaming value)."""
    text = gzip.decompress(SGLANG_METRICS.read_bytes()).decode()
    assert counter_value(text) == ("sglang:generation_tokens_total", 8.0 + 179472.0)
    assert "sglang:generation_tokens_total" in GENERATION_COUNTERS
    # 701 streamed requests of 256 tokens and one of 16 (a smoke test)


def test_sglang_counter_is_what_the_scraper_keeps() -> None:
    from crossover.sweep.scrape import DEFAULT_METRICS, parse_prometheus

    values = parse_prometheus(
        gzip.decompress(SGLANG_METRICS.read_bytes()).decode(), DEFAULT_METRICS
    )
    assert values["sglang:generation_tokens_total"] == 179480.0
    assert values["sglang:num_running_reqs"] == 0.0
    assert "sglang:token_usage" in values


def _exposition(*series: tuple[str, float, float | None]) -> str:
    """vLLM's counter with ``_created`` beside it, one line per (model, value, created)."""
    lines = ["# TYPE vllm:generation_tokens counter"]
    for model, value, created in series:
        lines.append(f'vllm:generation_tokens_total{{model_name="{model}"}} {value}')
        if created is not None:
            lines.append(f'vllm:generation_tokens_created{{model_name="{model}"}} {created}')
    return "\n".join(lines) + "\n"


def _track(text: str, model: str | None = "m") -> CounterTrack:
    got = counter_series(text, model=model)
    assert got is not None
    return CounterTrack(got[0], got[1], sum(v for v, _ in got[1].values()))


def _add(track: CounterTrack, text: str, model: str | None = "m") -> None:
    got = counter_series(text, model=model)
    assert got is not None
    track.add(got[1])


def test_the_series_sums_each_rise_and_only_the_runs_model() -> None:
    t = _track(_exposition(("m", 100, 1.0), ("other", 5000, 1.0)))
    assert t.before == 100
    _add(t, _exposition(("m", 160, 1.0), ("other", 9000, 1.0)))
    _add(t, _exposition(("m", 200, 1.0), ("other", 9900, 1.0)))
    assert (t.rise, t.resets, t.scrapes) == (100, 0, 3)


def test_a_reset_between_readings_is_seen_in_the_series() -> None:
    """100 -> 180, reset to 0, -> 40: the rise read as a series is 120 and the reset is
    marked; before-and-after alone would read -60, or, past 100, a lie."""
    t = _track(_exposition(("m", 100, None)))
    _add(t, _exposition(("m", 180, None)))
    _add(t, _exposition(("m", 40, None)))
    assert (t.rise, t.resets) == (120, 1)


def test_a_new_created_is_a_reset_even_where_the_value_rose() -> None:
    """Restarted and past its old value by the next reading: only ``_created`` says so."""
    t = _track(_exposition(("m", 100, 1.0)))
    _add(t, _exposition(("m", 150, 2.0)))
    assert (t.rise, t.resets) == (150, 1)


def test_without_model_labels_every_series_counts() -> None:
    text = "# TYPE x counter\ncalibration:generation_tokens_total 7\n"
    assert counter_value(text, model="m") == ("calibration:generation_tokens_total", 7.0)


def test_a_model_no_series_is_labelled_with_counts_every_series() -> None:
    """Asked for by an alias of the served name: no series is labelled with it, and
    leaving them all out would read as usage over-reporting."""
    text = _exposition(("served-name", 100, None), ("other", 20, None))
    assert counter_value(text, model="alias") == ("vllm:generation_tokens_total", 120.0)
