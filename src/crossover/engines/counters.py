"""The engine's own count of generated tokens, read from its Prometheus endpoint.

A witness for the output counts that does not come through the responses: read just
before a level and just after it, the counter's rise is what the engine says it
generated (warm-up included; other clients of the same server add to it).
"""

from __future__ import annotations

import asyncio
import math

import aiohttp

from crossover.engines import registry

#: generated-token counters that are current when a response ends, first found wins: each
#: engine's own (``EngineSpec.counter``, where its source says why it is current; not
#: llama.cpp's, see ``specs.llamacpp``), then the calibration server's.
CALIBRATION_COUNTER = "calibration:generation_tokens_total"
GENERATION_COUNTERS = (*registry.counters(), CALIBRATION_COUNTER)
#: after a level, read again while the counter still trails the claimed total (an engine
#: may count a request after its response left), for at most this long
SETTLE_S = 2.0
_SETTLE_STEP_S = 0.2


def counter_value(
    text: str, names: tuple[str, ...] = GENERATION_COUNTERS
) -> tuple[str, float] | None:
    """The first of ``names`` present in a Prometheus exposition, summed over its labels."""
    from prometheus_client.parser import text_string_to_metric_families

    found: dict[str, float] = {}
    try:
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                if s.name in names and not math.isnan(s.value):
                    found[s.name] = found.get(s.name, 0.0) + float(s.value)
    except ValueError:
        return None
    for name in names:
        if name in found:
            return name, found[name]
    return None


async def read_counter(url: str, timeout_s: float = 5.0) -> tuple[str, float] | None:
    """``(name, value)`` of the engine's generated-token counter; None when unreadable."""
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session, session.get(url) as resp:
            if resp.status != 200:
                return None
            return counter_value(await resp.text())
    except (aiohttp.ClientError, OSError, TimeoutError, UnicodeDecodeError):
        return None


async def counter_after(
    url: str, before: tuple[str, float], enough: float, settle_s: float = SETTLE_S
) -> float | None:
    """Read the counter again after the level. While its rise is below ``enough`` (the
    total the responses report, less the tolerance), read again every 0.2 s until two
    reads agree (the engine has caught up) or ``settle_s`` has passed. Returns the value
    read (None when it could not be read)."""
    name, start = before
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settle_s
    last: float | None = None
    while True:
        got = await read_counter(url)
        value = got[1] if got is not None and got[0] == name else None
        if value is not None and (value - start >= enough or value == last):
            return value
        if value is not None:
            last = value
        if loop.time() >= deadline:
            return last
        await asyncio.sleep(_SETTLE_STEP_S)
