"""The client event loop's lag during a run, summarized for the run JSON (``client_loop``).

The raw readings come from ``crossover.load.looplag`` (one per probe wake-up, ms late).
"""

from __future__ import annotations

import numpy as np

from crossover.metrics.summary import LoopLag


def loop_lag(lags_ms: list[float], interval_s: float, workers: int = 1) -> LoopLag:
    """Percentiles of the probe's overshoot (negative readings, timer jitter, count as 0)."""
    arr = np.maximum(np.asarray(lags_ms, dtype=np.float64), 0.0)
    if arr.size == 0:
        return LoopLag(interval_ms=interval_s * 1e3, workers=workers)
    p50, p90, p95, p99 = np.percentile(arr, [50, 90, 95, 99])
    return LoopLag(
        interval_ms=interval_s * 1e3,
        samples=int(arr.size),
        mean_ms=float(arr.mean()),
        p50_ms=float(p50),
        p90_ms=float(p90),
        p95_ms=float(p95),
        p99_ms=float(p99),
        max_ms=float(arr.max()),
        over_1ms=int((arr > 1.0).sum()),
        workers=workers,
    )
