"""The run's settings, kept importable from here: they are declared in ``crossover.spec``
(``spec.run``, ``spec.workload``, ``spec.limits``)."""

from __future__ import annotations

from crossover.spec.limits import Timeouts
from crossover.spec.run import (
    SESSIONS_NOT_TIMED,
    RunConfig,
    base_url,
    level_run,
    parse_named_url,
    run_seed,
)
from crossover.spec.workload import normalize_shape, shape_conflict, trace_lengths

__all__ = [
    "SESSIONS_NOT_TIMED",
    "RunConfig",
    "Timeouts",
    "base_url",
    "level_run",
    "normalize_shape",
    "parse_named_url",
    "run_seed",
    "shape_conflict",
    "trace_lengths",
]
