"""Request and warm-up counts a run or a sweep level takes when none are given: defined
here once, used by ``run`` (``RunConfig``), ``sweep`` (``SweepConfig``, its level and
runner), ``capacity``, the advisor's emitted sweep, and the help texts that describe them.

A single run measures at least 32 requests; a sweep level at least 16 (it has many
levels, repeats and a verdict per level). Both take 4 per request in flight. Warm-up
fills the slots once: a run up to 16 requests, a sweep level up to 8 (4 for a level with
no concurrency, an open-loop rate), ``capacity`` 4 before its first rate, with at most
that many requests in flight (8 for an open loop); ``warmup_requests: level``
(``crossover.spec.load``) fills every slot of a closed loop at once instead. A level held
for a duration builds 16 prompts per slot ahead, at least 64.
"""

from __future__ import annotations

import math
from typing import Literal

REQUESTS_PER_SLOT = 4
RUN_MIN_REQUESTS = 32
LEVEL_MIN_REQUESTS = 16
RUN_MAX_WARMUP = 16
LEVEL_MAX_WARMUP = 8
#: warm-up where no concurrency says how many slots to fill (open loop)
WARMUP_WITHOUT_CONCURRENCY = 4
CAPACITY_WARMUP = 4


def run_requests(concurrency: int | None) -> int:
    """Measured requests of one run: 4 per request in flight, at least 32."""
    return max(RUN_MIN_REQUESTS, REQUESTS_PER_SLOT * (concurrency or 1))


def level_requests(level: float) -> int:
    """Measured requests of one sweep level (a concurrency or a rate): 4 x level, at
    least 16."""
    return max(LEVEL_MIN_REQUESTS, math.ceil(REQUESTS_PER_SLOT * level))


def warmup(concurrency: int | None, kind: Literal["run", "level", "capacity"]) -> int:
    """The warm-up rule, the one place it lives: fill the slots once, a run up to 16
    requests, a sweep level up to 8, 4 with no concurrency (an open loop); capacity 4
    before its first rate."""
    if kind == "capacity":
        return CAPACITY_WARMUP
    if concurrency is None:
        return WARMUP_WITHOUT_CONCURRENCY
    return min(concurrency, RUN_MAX_WARMUP if kind == "run" else LEVEL_MAX_WARMUP)


def warmup_concurrency(concurrency: int | None, warm: int) -> int:
    """Requests in flight during warm-up: the level's concurrency (an open loop: up to
    8), never more than the warm-up requests themselves."""
    return max(1, min(warm, concurrency or LEVEL_MAX_WARMUP))


#: prompts built ahead for a level held for a duration: 16 per slot, at least 64 (more
#: are built as the level goes)
TIMED_PROMPTS_PER_SLOT = 16
TIMED_MIN_PROMPTS = 64


def timed_prompts(concurrency: int | None) -> int:
    """Prompts built before a closed-loop level held for a duration (4 slots for an open
    loop)."""
    return max(TIMED_MIN_PROMPTS, TIMED_PROMPTS_PER_SLOT * (concurrency or 4))


RUN_REQUESTS_HELP = f"{REQUESTS_PER_SLOT}x concurrency, at least {RUN_MIN_REQUESTS}"
RUN_WARMUP_HELP = f"concurrency, at most {RUN_MAX_WARMUP}"
LEVEL_REQUESTS_HELP = f"max({LEVEL_MIN_REQUESTS}, {REQUESTS_PER_SLOT} x level)"
LEVEL_WARMUP_HELP = f"min(level, {LEVEL_MAX_WARMUP})"
