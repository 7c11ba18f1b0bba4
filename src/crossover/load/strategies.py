"""Load strategies. They decide *when* a request is sent and nothing else.

* Closed loop: ``C`` workers, each sends its next request when its last one ends. The
  workers start one per pass of the event loop, so the reads of the streams already
  started are stamped between the sends (sending 1,024 requests in one pass held the
  loop ~100 ms, and every first token that arrived meanwhile was stamped that late).
* Open loop: Poisson arrivals on an absolute schedule fixed before the run. When
  the client cannot send on time (or ``max_in_flight`` holds a request back), the
  request keeps its scheduled time, so ``queue_ms`` shows the delay and
  coordinated omission cannot hide latency (vLLM #54101).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from crossover.records.model import RequestRecord

#: sends request ``index`` (scheduled at ``t_scheduled_ns`` or None) and returns its record
SendFn = Callable[[int, int | None, bool], Awaitable[RequestRecord]]
#: what the closed and open loops start at each index: a request, or a whole session
StartFn = Callable[[int, int | None, bool], Awaitable[object]]


async def sleep_until(t_ns: int) -> None:
    """Return once ``perf_counter_ns()`` has reached ``t_ns``. uvloop's timers (libuv's)
    run on whole milliseconds and wake up to a millisecond early (1.25 ms seen here), so
    one sleep sent requests before they were due: ``queue_ms`` -0.92 ms on a trace
    replay, -0.80 ms in a rate sweep. What is left after a sleep is slept again (below
    half a millisecond that is one pass of the loop, which reads the streams meanwhile)."""
    while (left := t_ns - time.perf_counter_ns()) > 0:  # noqa: ASYNC110 - a clock, not an event
        await asyncio.sleep(left / 1e9)


def poisson_schedule(rate_rps: float, count: int, seed: int, start_ns: int) -> list[int]:
    """Absolute send times: exponential gaps with mean 1/rate, fixed by the seed."""
    rng = random.Random(f"arrivals:{seed}")
    out = []
    t = float(start_ns)
    for _ in range(count):
        t += rng.expovariate(rate_rps) * 1e9
        out.append(int(t))
    return out


async def closed_loop(
    send: StartFn,
    concurrency: int,
    requests: int | None,
    duration_s: float | None,
    abort: asyncio.Event,
    first_index: int = 0,
    warmup: bool = False,
    drain: asyncio.Event | None = None,
) -> None:
    """``C`` workers sending ``requests`` (or for ``duration_s``); once ``drain`` is set
    no worker sends another request and the load ends when those in flight have (a
    level stopped on purpose: every request it sent finishes)."""
    counter = itertools.count(first_index)
    last = None if requests is None else first_index + requests
    deadline = None if duration_s is None else time.perf_counter_ns() + int(duration_s * 1e9)

    async def worker() -> None:
        while not abort.is_set() and not (drain is not None and drain.is_set()):
            i = next(counter)
            if last is not None and i >= last:
                return
            if deadline is not None and time.perf_counter_ns() >= deadline:
                return
            await send(i, None, warmup)

    workers = concurrency if last is None else min(concurrency, last - first_index)
    loop = asyncio.get_running_loop()
    started: list[asyncio.Task[None]] = []
    try:
        for _ in range(max(workers, 0)):
            if abort.is_set():
                break
            started.append(loop.create_task(worker()))
            await asyncio.sleep(0)  # one start per pass: ready reads run in between
    except BaseException:
        for t in started:
            t.cancel()
        await asyncio.gather(*started, return_exceptions=True)
        raise
    await _gather_or_abort(started, abort)


async def open_loop(
    send: StartFn,
    rate_rps: float,
    requests: int | None,
    duration_s: float | None,
    abort: asyncio.Event,
    seed: int,
    max_in_flight: int | None = None,
    first_index: int = 0,
    offsets_ns: Sequence[int] | None = None,
    part: tuple[int, int] = (0, 1),
    start_ns: int | None = None,
    offsets_from: int = 0,
) -> None:
    """``offsets_ns``: send times after the start (a replayed trace) instead of Poisson
    arrivals; past the last one the offsets repeat, shifted by the trace's span. Request
    ``k`` is entry ``offsets_from + k`` (a sweep level replays its own slice of the
    trace's lines), sent that entry's time after entry ``offsets_from``'s.

    ``part`` ``(k, W)``: of the whole schedule, send only entries ``k``, ``k + W``, ... (one
    worker's part of a run split W ways by index); every worker computes the same schedule
    from the same rate and seed, so with one ``start_ns`` (the workers' shared start, a
    ``perf_counter_ns`` reading) each entry is sent when a single process would send it.
    """
    count = requests if requests is not None else int(rate_rps * (duration_s or 0) * 1.5) + 16
    start = start_ns if start_ns is not None else time.perf_counter_ns() + 5_000_000
    if offsets_ns:
        n = len(offsets_ns)
        span = offsets_ns[-1] + (offsets_ns[-1] // max(n - 1, 1))

        def at(line: int) -> int:
            return (line // n) * span + offsets_ns[line % n]

        first = offsets_from % n
        schedule = [start + at(first + k) - at(first) for k in range(count)]
    else:
        schedule = poisson_schedule(rate_rps, count, seed, start)
    if duration_s is not None:
        end = start + int(duration_s * 1e9)
        schedule = [t for t in schedule if t < end] if requests is None else schedule
    gate = asyncio.Semaphore(max_in_flight) if max_in_flight else None
    loop = asyncio.get_running_loop()
    tasks: set[asyncio.Task[None]] = set()

    async def one(i: int, t_sched: int) -> None:
        if gate is None:
            await send(i, t_sched, False)
            return
        async with gate:  # the wait is inside queue_ms: t_scheduled stays as planned
            await send(i, t_sched, False)

    mine, parts = part
    try:
        for k, t_sched in enumerate(schedule):
            if k % parts != mine:
                continue
            if abort.is_set():
                break
            await sleep_until(t_sched)
            task = loop.create_task(one(first_index + k, t_sched))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
    except BaseException:
        # cancelled between sends (Ctrl-C): the requests in flight end with it, awaited,
        # not left to fail after the loop has gone ("Task exception was never retrieved")
        started = list(tasks)
        for t in started:
            t.cancel()
        await asyncio.gather(*started, return_exceptions=True)
        raise
    if tasks:
        await _gather_or_abort(list(tasks), abort)


async def session_loop(
    send: SendFn,
    turns: int,
    think_s: float,
    *,
    concurrency: int | None,
    rate_rps: float | None,
    requests: int,
    abort: asyncio.Event,
    seed: int,
    first_index: int = 0,
    part: tuple[int, int] = (0, 1),
    start_ns: int | None = None,
) -> None:
    """Multi-turn sessions (``crossover.workload.sessions``): request ``i`` is turn ``i mod
    turns`` of session ``i div turns``. Turns of a session go one after another, each sent
    ``think_s`` after the previous one ended (that time is its ``t_scheduled``, so a late
    send shows in ``queue_ms``); a failed turn ends its session (its history is broken).
    Sessions start ``concurrency`` at a time (closed loop over sessions) or on a Poisson
    schedule of ``rate_rps`` sessions per second; ``part`` and ``start_ns``: this process
    starts only its part of that schedule's sessions (``open_loop``), each one whole, so
    its history stays in order."""
    last = first_index + requests
    n_sessions = -(-requests // turns)

    async def run_session(s: int, t_sched: int | None, _warmup: bool) -> RequestRecord | None:
        """Session ``s``, its first turn sent at once (the loop that started it kept its
        schedule); returns its last record."""
        rec = None
        for t in range(turns):
            i = first_index + s * turns + t
            if i >= last or abort.is_set():
                break
            if rec is not None:
                if not rec.ok:
                    break
                t_sched = time.perf_counter_ns() + int(think_s * 1e9)
                await sleep_until(t_sched)
            rec = await send(i, t_sched, False)
        return rec

    # the sessions themselves are started as a closed or an open loop starts requests
    if concurrency is not None:
        await closed_loop(run_session, concurrency, n_sessions, None, abort)
    else:
        assert rate_rps is not None
        await open_loop(
            run_session, rate_rps, n_sessions, None, abort, seed, part=part, start_ns=start_ns
        )


async def _gather_or_abort(aws: Sequence[Awaitable[None]], abort: asyncio.Event) -> None:
    """Wait for all; if ``abort`` is set first (engine died, Ctrl-C), cancel the rest."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    if not tasks:
        return
    stopper = asyncio.ensure_future(abort.wait())
    everything: asyncio.Future[list[None]] = asyncio.gather(*tasks)
    waiters: set[asyncio.Future[Any]] = {everything, stopper}
    try:
        done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        if everything in done:
            everything.result()  # re-raise a worker's exception
    finally:
        stopper.cancel()
        for t in tasks:
            t.cancel()
        await asyncio.gather(everything, return_exceptions=True)


async def measured_load(
    send: SendFn,
    *,
    concurrency: int | None,
    rate_rps: float | None,
    requests: int | None,
    duration_s: float | None,
    abort: asyncio.Event,
    seed: int,
    max_in_flight: int | None,
    probe_interval_s: float,
    offsets_ns: Sequence[int] | None = None,
    sessions: tuple[int, float] | None = None,
    part: tuple[int, int] = (0, 1),
    start_ns: int | None = None,
    offsets_from: int = 0,
    drain: asyncio.Event | None = None,
) -> list[float]:
    """The measured part of a load, in-process or in a worker: a closed loop at
    ``concurrency`` or else an open loop at ``rate_rps``, with the heap frozen and the
    event loop's own lag probed throughout (every ``probe_interval_s``). Returns the
    probe's lags (ms). ``part`` and ``start_ns``: an open loop's part of a schedule shared
    by several workers (``open_loop``). ``drain``: a closed loop sends nothing more once it
    is set (``closed_loop``); the other loads ignore it."""
    from crossover.load.looplag import LoopLagProbe, frozen_heap

    probe = LoopLagProbe(probe_interval_s)
    with frozen_heap():
        probe.start()
        if not abort.is_set() and sessions is not None:
            assert requests is not None
            await session_loop(
                send, sessions[0], sessions[1], concurrency=concurrency, rate_rps=rate_rps,
                requests=requests, abort=abort, seed=seed, part=part, start_ns=start_ns,
            )  # fmt: skip
        elif not abort.is_set():
            if concurrency is not None:
                await closed_loop(send, concurrency, requests, duration_s, abort, drain=drain)
            else:
                assert rate_rps is not None
                await open_loop(
                    send, rate_rps, requests, duration_s, abort, seed, max_in_flight,
                    offsets_ns=offsets_ns, part=part, start_ns=start_ns,
                    offsets_from=offsets_from,
                )  # fmt: skip
        return await probe.stop()
