"""``crossover commbench``: NCCL all-reduce latency and bandwidth across the local GPUs.

Writes the measured latency-vs-size table that ``crossover advise --allreduce-table``
feeds to the cost model (``crossover.advise.cost.load_curve``). PyTorch is imported only
inside the workers and the GPU count check.
"""

from __future__ import annotations

from crossover.commbench.results import (
    CommbenchResult,
    Point,
    Summary,
    algbw_gbs,
    busbw_gbs,
    message_sizes,
    summarize,
)
from crossover.commbench.runner import (
    build_result,
    disable_multicast,
    gpu_count,
    run_commbench,
    time_calls,
)
from crossover.multicast import MULTICAST_OFF

__all__ = [
    "MULTICAST_OFF",
    "CommbenchResult",
    "Point",
    "Summary",
    "algbw_gbs",
    "build_result",
    "busbw_gbs",
    "disable_multicast",
    "gpu_count",
    "message_sizes",
    "run_commbench",
    "summarize",
    "time_calls",
]
