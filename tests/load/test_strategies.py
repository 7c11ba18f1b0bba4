"""When the open loop sends: never before a request is due, on uvloop as on asyncio."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvloop

from crossover.load.strategies import open_loop, session_loop, sleep_until
from crossover.records.model import RequestRecord

RUNNERS: dict[str, Callable[[Coroutine[Any, Any, None]], None]] = {
    "uvloop": uvloop.run,
    "asyncio": asyncio.run,
}


def _record(i: int, t_sched: int | None, t_send: int) -> RequestRecord:
    return RequestRecord(
        index=i, expected_output_tokens=1, t_scheduled_ns=t_sched, t_send_ns=t_send
    )


@pytest.mark.parametrize("loop", RUNNERS)
def test_open_loop_never_sends_before_the_schedule(loop: str) -> None:
    """uvloop's millisecond timers woke a single sleep up to a millisecond early: a
    request sent before it was due, ``queue_ms`` -0.80 ms in a rate sweep."""
    sends: list[tuple[int, int]] = []

    async def send(i: int, t_sched: int | None, warmup: bool) -> RequestRecord:
        now = time.perf_counter_ns()
        assert t_sched is not None
        sends.append((t_sched, now))
        return _record(i, t_sched, now)

    async def main() -> None:
        await open_loop(send, 400.0, 200, None, asyncio.Event(), seed=3)

    RUNNERS[loop](main())
    assert len(sends) == 200
    early = [(t_send - t_sched) / 1e6 for t_sched, t_send in sends if t_send < t_sched]
    assert early == [], f"{len(early)} sent early, by up to {-min(early):.3f} ms"


@pytest.mark.parametrize("loop", RUNNERS)
def test_sleep_until_and_session_think_time(loop: str) -> None:
    """A session's next turn is due ``think_s`` after the last one ended: not sent before."""
    late: list[int] = []

    async def send(i: int, t_sched: int | None, warmup: bool) -> RequestRecord:
        now = time.perf_counter_ns()
        if t_sched is not None:
            late.append(now - t_sched)
        return _record(i, t_sched, now)

    async def main() -> None:
        for k in range(50):
            t = time.perf_counter_ns() + 300_000 + k * 37_000
            await sleep_until(t)
            late.append(time.perf_counter_ns() - t)
        await session_loop(
            send,
            5,
            0.0013,
            concurrency=4,
            rate_rps=None,
            requests=40,
            abort=asyncio.Event(),
            seed=1,
        )

    RUNNERS[loop](main())
    assert len(late) > 50
    assert min(late) >= 0


def test_open_loop_cancelled_between_sends_ends_its_requests() -> None:
    """Ctrl-C during a capacity level cancelled the open loop while it slept until its
    next send: the requests already in flight were left running, and failed after the
    loop had gone ("Task exception was never retrieved" under the one error line)."""
    started: list[int] = []
    ended: list[int] = []
    three = asyncio.Event()

    async def send(i: int, t_sched: int | None, warmup: bool) -> RequestRecord:
        started.append(i)
        if len(started) == 3:
            three.set()
        try:
            await asyncio.sleep(3600)
        finally:
            ended.append(i)
        raise AssertionError("not reached")

    async def main() -> None:
        load = asyncio.ensure_future(open_loop(send, 200.0, 1000, None, asyncio.Event(), seed=0))
        await three.wait()
        load.cancel()
        with pytest.raises(asyncio.CancelledError):
            await load
        assert sorted(ended) == sorted(started)

    asyncio.run(main())
