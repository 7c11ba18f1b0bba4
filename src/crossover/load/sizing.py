"""``--workers N|auto``: how many client processes a run's load is spread over."""

from __future__ import annotations

import os

from crossover.errors import UsageError


def workers_for(text: str, concurrency: int | None) -> int:
    """``N`` or ``auto``: ``auto_workers`` from the streams and a short probe of this
    machine's idle event-loop lag (only where more than one process could help)."""
    if text == "auto":
        from crossover.load.looplag import idle_lag_ms
        from crossover.load.workers import STREAMS_PER_WORKER, auto_workers

        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):  # pragma: no cover - not Linux
            cores = os.cpu_count() or 1
        if concurrency is None or cores < 2:
            return 1
        # a loop already late gives each process fewer streams; under a handful of
        # streams no lag makes a second process worth its start-up
        lag = idle_lag_ms() if concurrency > STREAMS_PER_WORKER // 8 else None
        return auto_workers(concurrency, cores, lag)
    try:
        n = int(text)
    except ValueError:
        raise UsageError(f"--workers: expected a number or auto, got {text!r}") from None
    if n < 1:
        raise UsageError("--workers: at least 1")
    return n
