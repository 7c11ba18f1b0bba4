"""The latency model: measured TTFT and per-token gap against the configured values."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import aiohttp

from crossover.calibration.server import CalibrationConfig, serve

from .conftest import Streamed, run, stream

Body = Callable[..., dict[str, Any]]


def _ttft_ms(s: Streamed) -> float:
    return (s.token_events[0][0].arrival_ns - s.send_ns) / 1e6


def _gap_ms(s: Streamed) -> float:
    ev = s.token_events
    return (ev[-1][0].arrival_ns - ev[0][0].arrival_ns) / (s.tokens - 1) / 1e6


def test_lone_request_matches_ttft_and_gap(body: Body) -> None:
    cfg = CalibrationConfig(ttft_ms=40.0, itl_ms=4.0)

    async def go() -> list[Streamed]:
        async with serve(cfg) as url, aiohttp.ClientSession() as s:
            await stream(s, f"{url}/v1/completions", body(2))  # warm the connection
            return [await stream(s, f"{url}/v1/completions", body(40)) for _ in range(5)]

    got = run(go)
    assert all(s.tokens == 40 for s in got)
    # noise on a shared machine only adds delay, so the best of five shows the model;
    # the loop's timers have 1 ms granularity (client and server share one loop here),
    # hence the +3 ms beside the few percent
    assert 40.0 <= min(_ttft_ms(s) for s in got) <= 40.0 * 1.03 + 3.0
    assert all(_ttft_ms(s) >= 40.0 for s in got)
    assert abs(sorted(_gap_ms(s) for s in got)[1] - 4.0) <= 4.0 * 0.05


def test_per_stream_and_prompt_terms(body: Body) -> None:
    cfg = CalibrationConfig(
        ttft_ms=20.0, ttft_per_stream_ms=10.0, ttft_per_prompt_token_ms=1.0,
        itl_ms=3.0, itl_per_stream_ms=1.0,
    )  # fmt: skip

    async def go() -> tuple[list[Streamed], dict[str, Any]]:
        async with serve(cfg) as url, aiohttp.ClientSession() as s:
            await stream(s, f"{url}/v1/completions", body(1))
            async with s.post(f"{url}/calibration/reset") as r:
                assert r.status == 200
            # three requests in flight together: the k-th to arrive sees k others
            got = await asyncio.gather(
                *(stream(s, f"{url}/v1/completions", body(30)) for _ in range(3))
            )
            async with s.get(f"{url}/calibration/truth") as r:
                truth = await r.json()
            return list(got), truth

    got, truth = run(go)
    recs = sorted(truth["requests"], key=lambda r: r["arrival_ns"])
    prompt = 4  # "one two three four"
    expected = [20.0 + 10.0 * k + 1.0 * prompt for k in range(3)]
    assert [r["configured_ttft_ms"] for r in recs] == expected
    # all three overlap through the first one's decode: gap = 3 + 1 * 2; later ones see
    # the earlier ones finish, and their gap falls towards 3 + 1 * 0
    assert abs(recs[0]["configured_gap_ms"] - 5.0) < 1e-6
    by_id = {r["id"]: r for r in recs}
    for r in recs:
        # generous: client and server share one loop here, on a shared 2-core machine
        assert 0 <= r["emitted_ttft_ms"] - r["configured_ttft_ms"] <= 15.0
        assert 3.0 <= r["configured_gap_ms"] <= 5.0
        assert abs(r["emitted_gap_ms"] - r["configured_gap_ms"]) <= 0.05 * 5.0
    for s in got:
        want = by_id[s.chunks[0]["id"]]["configured_gap_ms"]
        assert abs(_gap_ms(s) - want) <= want * 0.05
        # three sends from one client loop (two opening connections) blur the client's
        # TTFT upwards, so here only its lower bound is the model's
        assert _ttft_ms(s) >= by_id[s.chunks[0]["id"]]["configured_ttft_ms"]


def test_tokens_per_chunk_keeps_the_per_token_gap(body: Body) -> None:
    cfg = CalibrationConfig(ttft_ms=10.0, itl_ms=2.0, tokens_per_chunk=4)

    async def go() -> Streamed:
        async with serve(cfg) as url, aiohttp.ClientSession() as s:
            return await stream(s, f"{url}/v1/completions", body(41))

    s = run(go)
    sizes = [len(text.split()) for _, text in s.token_events]
    assert sizes == [1] + [4] * 10
    assert s.usage is not None
    assert s.usage["completion_tokens"] == 41
    assert abs(_gap_ms(s) - 2.0) <= 2.0 * 0.05
