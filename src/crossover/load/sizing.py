"""``--workers N|auto``: how many client processes a run's load is spread over."""

from __future__ import annotations

import os

from crossover.errors import UsageError

#: streams one event loop carries under ``--workers auto``: at 256 streams one loop's
#: p99 lag passed 1 ms on the calibration server (docs/results/client_overhead.md)
STREAMS_PER_WORKER = 128
#: the loop lag (ms, p99) a worker may start with before it is given fewer streams
LAG_BUDGET_MS = 1.0
#: at most this many streams run from one process, however late the loop: under a
#: handful of streams no lag makes a second process worth its start-up
FEW_STREAMS = STREAMS_PER_WORKER // 8


def auto_workers(streams: int | None, cores: int, lag_ms: float | None = None) -> int:
    """``--workers auto``: client processes for ``streams`` concurrent streams.

    One per ``STREAMS_PER_WORKER`` streams; where a loop is already ``lag_ms`` late
    (p99: ``idle_lag_ms`` before a run, or a previous level's ``client_loop``) past
    ``LAG_BUDGET_MS``, each carries fewer streams in proportion (a loop 2 ms late gets
    half as many), since every chunk it reads is stamped that late. Never more than
    ``cores``, never fewer than 1; a load with no stream count (an open loop, a trace:
    ``streams`` None) runs from one process.
    """
    if streams is None or streams < 1:
        return 1
    per_worker = float(STREAMS_PER_WORKER)
    if lag_ms is not None and lag_ms > LAG_BUDGET_MS:
        per_worker *= LAG_BUDGET_MS / lag_ms
    want = -(-streams // max(1, int(per_worker)))  # ceil
    return max(1, min(want, cores))


def usable_cores() -> int:
    """The cores this process may run on (its affinity; all of them off Linux)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def auto_workers_here(streams: int | None, lag_ms: float | None) -> int:
    """``auto_workers`` on this machine's cores, for ``run --workers auto`` (``lag_ms``: the
    idle probe's) and a sweep's ``workers: auto`` (the target's previous level's client
    loop lag; before its first level, the idle probe's as for ``run``): one process for no
    stream count, one core, or ``FEW_STREAMS`` or fewer."""
    cores = usable_cores()
    if streams is None or cores < 2 or streams <= FEW_STREAMS:
        return 1
    return auto_workers(streams, cores, lag_ms)


def lag_counts(streams: int | None) -> bool:
    """Whether a loop lag can change ``auto_workers_here``'s answer for ``streams``: more
    than ``FEW_STREAMS`` of them, on more than one core. Elsewhere the load runs from one
    process whatever the lag, and no probe of it is worth its time."""
    return streams is not None and streams > FEW_STREAMS and usable_cores() >= 2


def workers_for(text: str, concurrency: int | None) -> int:
    """``N`` or ``auto``: ``auto_workers_here`` from the streams and a short probe of this
    machine's idle event-loop lag (only where more than one process could help)."""
    if text == "auto":
        if not lag_counts(concurrency):
            return 1
        from crossover.load.looplag import idle_lag_ms

        # a loop already late gives each process fewer streams
        return auto_workers_here(concurrency, idle_lag_ms())
    try:
        n = int(text)
    except ValueError:
        raise UsageError(f"--workers: expected a number or auto, got {text!r}") from None
    if n < 1:
        raise UsageError("--workers: at least 1")
    return n
