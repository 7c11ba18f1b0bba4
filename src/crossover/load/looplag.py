"""The event loop's own lag while a run is in flight, and the garbage collector kept
out of it.

A probe task sleeps ``interval_s`` over and over and records how much later than asked
it woke up. Anything that holds the loop (a slow callback, a burst of sends, work done
when many streams end together) shows as lag, and every chunk that arrived meanwhile was
stamped that much late: the figure is reported beside the client floor in the run
summary (``client_loop``, see ``crossover.metrics.loop``). The probe costs one timer per
interval, nothing per chunk: ~200 wake-ups a second at 5 ms, the interval from 16
streams up and for open loops. Below 16 streams it is longer (``probe_interval_s``, up
to 50 ms at one stream): one stream at 20 tokens a second gave the loop 10x more probe
wake-ups than chunks (with the longer sleep the one-stream steady CPU went from 0.36x
to 0.60x vLLM's client, docs/results/client_overhead.md). A longer
interval samples the loop's lateness less often, not less fairly: each wake-up is a
timer due at a moment the load did not choose.

The largest stalls profiled at 1,024 streams were the garbage collector's full passes
(84 and 115 ms in one run): they walk every object the process holds, most of them
made at start-up (modules, schemas, prompts). ``frozen_heap`` collects once before the
measured load and freezes what is left, so later passes walk only what the load made.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager

#: the probe's sleep: short enough to see stalls, long enough to cost nothing
PROBE_INTERVAL_S = 0.005
#: the longest sleep, at one stream
MAX_PROBE_INTERVAL_S = 0.05
#: streams from which the probe sleeps PROBE_INTERVAL_S
FULL_RATE_STREAMS = 16


def probe_interval_s(concurrency: int | None) -> float:
    """The probe's sleep for a closed loop of ``concurrency`` streams (``None``: an open
    loop): 5 ms from 16 streams, 5 ms x 16 / streams below (capped at 50 ms)."""
    if concurrency is None or concurrency >= FULL_RATE_STREAMS:
        return PROBE_INTERVAL_S
    return min(MAX_PROBE_INTERVAL_S, PROBE_INTERVAL_S * FULL_RATE_STREAMS / max(concurrency, 1))


class LoopLagProbe:
    """``start()`` on the loop to watch, ``stop()`` when the load is over."""

    def __init__(self, interval_s: float = PROBE_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.lags_ms: list[float] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        perf = time.perf_counter_ns
        interval_ns = int(self.interval_s * 1e9)
        lags = self.lags_ms
        while True:
            t0 = perf()
            await asyncio.sleep(self.interval_s)
            lags.append((perf() - t0 - interval_ns) / 1e6)

    async def stop(self) -> list[float]:
        """Stop probing; the lags seen (ms), one per wake-up."""
        task = self._task
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            self._task = None
        return self.lags_ms


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Collect, then keep every object alive now out of the collector's passes until the
    block ends (``gc.freeze``); the collector still runs for what the load allocates."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


#: ``idle_lag_ms``: how long it watches and how often it wakes
IDLE_PROBE_S = 0.2
IDLE_PROBE_INTERVAL_S = 0.001


def idle_lag_ms(
    duration_s: float = IDLE_PROBE_S, interval_s: float = IDLE_PROBE_INTERVAL_S
) -> float:
    """The p99 lateness (ms) of an event loop with nothing else to do, watched for
    ``duration_s`` on a fresh loop (call it outside one): what this machine's busy
    cores (an engine on the same host, other jobs) already cost every loop before the
    load adds its own work. ``--workers auto`` sizes from it."""

    async def watch() -> list[float]:
        probe = LoopLagProbe(interval_s)
        probe.start()
        await asyncio.sleep(duration_s)
        return await probe.stop()

    lags = sorted(max(x, 0.0) for x in asyncio.run(watch()))
    if not lags:
        return 0.0
    return lags[min(len(lags) - 1, int(0.99 * len(lags)))]
