"""The engine's own count of generated tokens, read from its Prometheus endpoint.

A witness for the output counts that does not come through the responses: read as a
series (before the level, every ``SCRAPE_S`` during it, and after it), the counter's
rise is what the engine says it generated (warm-up included; other clients of the same
server add to it). Each label set is its own series: the rise is summed per series,
over the series of the run's model (the ``model_name`` or ``model`` label, where the
engine labels them; another model served by the same server is not this run's work).
A series that goes down, or whose ``_created`` timestamp (prometheus_client exports one
beside each counter) changes, was reset: its value after the reset is counted as risen
from zero, and the reading is marked (``resets``): the tokens between the last scrape
and the reset are lost, so a reset counter is no witness, never a lie.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from dataclasses import dataclass, field

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
#: during a level the counter is read this often (each read parsed off the event loop)
SCRAPE_S = 1.0
#: the labels that name a series' model
MODEL_LABELS = ("model_name", "model")

#: one reading: each label set's (value, ``_created`` timestamp or None)
Series = dict[tuple[tuple[str, str], ...], tuple[float, float | None]]


def _created_name(name: str) -> str:
    return name.removesuffix("_total") + "_created"


def counter_series(
    text: str, names: tuple[str, ...] = GENERATION_COUNTERS, model: str | None = None
) -> tuple[str, Series] | None:
    """The first of ``names`` present in a Prometheus exposition, per label set, with
    each set's ``_created``; only the sets labelled ``model`` where any is (a model
    asked for by an alias matches none: then every set, as before series were told
    apart)."""
    from prometheus_client.parser import text_string_to_metric_families

    values: dict[str, Series] = {}
    created: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    wanted = {_created_name(n): n for n in names}
    try:
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                if math.isnan(s.value):
                    continue
                key = tuple(sorted(s.labels.items()))
                if s.name in names:
                    values.setdefault(s.name, {})[key] = (float(s.value), None)
                elif s.name in wanted:
                    created.setdefault(wanted[s.name], {})[key] = float(s.value)
    except ValueError:
        return None
    for name in names:
        if name not in values:
            continue
        stamps = created.get(name, {})
        series = {k: (v, stamps.get(k)) for k, (v, _) in values[name].items()}
        if model is not None:
            mine = {k: v for k, v in series.items() if _model_of(k) == model}
            if mine:  # none labelled so (an alias of the served name): every series
                series = mine
        return name, series
    return None


def _model_of(key: tuple[tuple[str, str], ...]) -> str | None:
    labels = dict(key)
    return next((labels[m] for m in MODEL_LABELS if m in labels), None)


def counter_value(
    text: str, names: tuple[str, ...] = GENERATION_COUNTERS, model: str | None = None
) -> tuple[str, float] | None:
    """The first of ``names`` present, summed over its label sets (of ``model``)."""
    got = counter_series(text, names, model)
    if got is None:
        return None
    return got[0], sum(v for v, _ in got[1].values())


@dataclass
class CounterTrack:
    """The counter read as a series: ``rise`` summed per label set between readings."""

    name: str
    last: Series
    before: float
    rise: float = 0.0
    resets: int = 0
    scrapes: int = 1
    reset_series: list[str] = field(default_factory=list)

    @property
    def after(self) -> float:
        return self.before + self.rise

    def add(self, series: Series) -> None:
        """One more reading: each series' rise since the last, a reset (the value went
        down, or ``_created`` changed) counted from zero, a new series from zero."""
        for key, (value, created) in series.items():
            prev = self.last.get(key)
            if prev is None:
                self.rise += value  # a series that appeared during the level began at 0
                continue
            was, was_created = prev
            if value < was or (
                created is not None and was_created is not None and created != was_created
            ):
                self.resets += 1
                self.reset_series.append(",".join(f"{k}={v}" for k, v in key) or "(no labels)")
                self.rise += value
            else:
                self.rise += value - was
        self.last = {**self.last, **series}
        self.scrapes += 1


async def read_series(
    url: str, model: str | None = None, timeout_s: float = 5.0
) -> tuple[str, Series] | None:
    """``(name, series)`` of the engine's generated-token counter (the exposition parsed
    in a thread: an engine's is ~100 kB); None when unreadable."""
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session, session.get(url) as resp:
            if resp.status != 200:
                return None
            text = await resp.text()
    except (aiohttp.ClientError, OSError, TimeoutError, UnicodeDecodeError):
        return None
    return await asyncio.to_thread(counter_series, text, GENERATION_COUNTERS, model)


async def read_counter(url: str, model: str | None = None) -> CounterTrack | None:
    """The first reading of a level's series; None when unreadable."""
    got = await read_series(url, model)
    if got is None:
        return None
    name, series = got
    return CounterTrack(name, series, sum(v for v, _ in series.values()))


async def _read_into(url: str, track: CounterTrack, model: str | None) -> bool:
    got = await read_series(url, model)
    if got is None or got[0] != track.name:
        return False
    track.add(got[1])
    return True


async def scrape(
    url: str, track: CounterTrack, model: str | None = None, every_s: float = SCRAPE_S
) -> None:
    """Read the counter into ``track`` every ``every_s`` until cancelled (the level's
    end): a reset between two readings is seen in the series."""
    while True:
        await asyncio.sleep(every_s)
        with contextlib.suppress(OSError):
            await _read_into(url, track, model)


async def counter_after(
    url: str,
    track: CounterTrack,
    enough: float,
    settle_s: float = SETTLE_S,
    model: str | None = None,
) -> CounterTrack | None:
    """Read the counter again after the level. While its rise is below ``enough`` (the
    total the responses report, less the tolerance), read again every 0.2 s until two
    reads agree (the engine has caught up) or ``settle_s`` has passed. Returns the track
    (None when it could not be read after the level)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settle_s
    read = False
    last: float | None = None
    while True:
        if await _read_into(url, track, model):
            read = True
            if track.rise >= enough or track.after == last:
                return track
            last = track.after
        if loop.time() >= deadline:
            return track if read else None
        await asyncio.sleep(_SETTLE_STEP_S)
