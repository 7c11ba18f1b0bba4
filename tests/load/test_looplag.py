"""The event-loop lag probe, the frozen heap, and the closed loop's staggered start."""

from __future__ import annotations

import asyncio
import gc
import itertools
import time

from crossover.load.looplag import LoopLagProbe, frozen_heap, probe_interval_s
from crossover.load.strategies import closed_loop
from crossover.load.workers import plan_shares
from crossover.metrics.loop import loop_lag
from crossover.records.model import RequestRecord


def test_probe_sees_a_blocked_loop() -> None:
    async def go() -> list[float]:
        probe = LoopLagProbe(interval_s=0.002)
        probe.start()
        await asyncio.sleep(0.03)
        time.sleep(0.08)  # noqa: ASYNC251 - holds the loop, as a slow callback would
        await asyncio.sleep(0.03)
        return await probe.stop()

    lags = asyncio.run(go())
    lag = loop_lag(lags, 0.002)
    assert lag.samples == len(lags) >= 5
    assert lag.max_ms is not None and lag.max_ms >= 70
    assert lag.p50_ms is not None and lag.p50_ms < 20
    assert lag.over_1ms >= 1


def test_probe_interval_follows_the_streams() -> None:
    """Few streams: fewer wake-ups (one stream's 20 tokens a second drowned in 200 probe
    wake-ups); from 16 streams and for open loops the 5 ms probe."""
    assert probe_interval_s(1) == 0.05
    assert probe_interval_s(2) == 0.04
    assert probe_interval_s(4) == 0.02
    assert probe_interval_s(8) == 0.01
    assert probe_interval_s(16) == probe_interval_s(1024) == probe_interval_s(None) == 0.005
    intervals = [probe_interval_s(c) for c in range(1, 40)]
    assert intervals == sorted(intervals, reverse=True)


def test_workers_probe_at_the_whole_runs_interval() -> None:
    """Four workers of 8 streams each probe as one 32-stream run does (the summary
    reports one interval for the pooled readings)."""
    shares = plan_shares(
        workers=4, concurrency=32, rate_rps=None, max_in_flight=None, requests=64,
        duration_s=None, warmup=0, seed=1,
    )  # fmt: skip
    assert len(shares) == 4
    assert {s.probe_interval_s for s in shares} == {probe_interval_s(32)} == {0.005}
    one = plan_shares(
        workers=2, concurrency=4, rate_rps=None, max_in_flight=None, requests=8,
        duration_s=None, warmup=0, seed=1,
    )  # fmt: skip
    assert {s.probe_interval_s for s in one} == {0.02}


def test_no_readings_are_none_not_zero() -> None:
    lag = loop_lag([], 0.005)
    assert lag.samples == 0 and lag.max_ms is None and lag.p50_ms is None


def test_frozen_heap_freezes_and_unfreezes() -> None:
    with frozen_heap():
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


def test_closed_loop_starts_one_stream_per_loop_pass() -> None:
    """Between two streams' first sends the loop gets round to other work (reads)."""
    ticks = 0
    seen: list[int] = []

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    async def send(i: int, t_sched: int | None, warmup: bool) -> RequestRecord:
        seen.append(ticks)
        await asyncio.sleep(0.01)
        return RequestRecord(index=i, expected_output_tokens=1, t_send_ns=0)

    async def go() -> None:
        t = asyncio.ensure_future(ticker())
        await asyncio.sleep(0)
        await closed_loop(send, 16, 16, None, asyncio.Event())
        t.cancel()

    asyncio.run(go())
    assert len(seen) == 16
    assert all(b > a for a, b in itertools.pairwise(seen)), seen
