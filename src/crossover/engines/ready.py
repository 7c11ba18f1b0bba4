"""How long an engine took to start, read back from its log: ``ready_after``.

A sweep times each start itself (``crossover.sweep.level``: launch to healthy, kept in
the database as ``engine_starts``). Logs from before that, or from elsewhere, still say
it: crossover's launch header gives the launch (UTC, to the second), and the engine's
own line that says it serves gives the end, stamped by the engine's clock
(``ReadyClock``, declared in each engine's spec):

* ``wall``: the engine stamps lines with its machine's local date and time (vLLM
  ``INFO 12-02 15:36:14``, SGLang ``[2026-12-02 15:52:55]``, Triton's glog
  ``I1204 18:59:30.035768``). A line without a stamp (vLLM's uvicorn
  ``Application startup complete.``) takes the last stamp before it. A year the stamp
  leaves out is the header's. Local time is not UTC everywhere: the first stamp's
  distance from the header, rounded to a quarter hour (every time zone is a whole
  number of those), is taken as the zone's offset, so a start shorter than 7.5 minutes
  before its first line is read right in any zone.
* ``elapsed``: the engine stamps seconds since it started (llama.cpp's
  ``0.06.559.466``: minutes, seconds, milliseconds, microseconds); the header is not
  needed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from crossover.engines.launchrec import read_header

#: a wall clock's offset from UTC is a whole number of these (seconds)
ZONE_STEP_S = 900.0
#: a start read longer than this is a misread (a log appended to, a clock gone wrong)
MAX_READY_S = 6 * 3600.0


def log_lines(text: str) -> list[str]:
    """A log's lines numbered as grep and editors number them: progress bars redraw with
    a bare "\r" (vLLM's and SGLang's CUDA-graph capture), which ``splitlines()`` would
    count as lines."""
    return [ln.removesuffix("\r") for ln in text.split("\n")]


@dataclass(frozen=True)
class ReadyClock:
    """The line an engine's log says it serves with, and how its lines are stamped.

    ``stamp``'s named groups: ``wall`` takes ``month``, ``day``, ``hour``, ``minute``,
    ``second`` (``year`` and ``frac`` if the stamp has them); ``elapsed`` takes
    ``minutes``, ``seconds``, ``ms`` (``us`` if it has it)."""

    ready: str
    stamp: str
    kind: Literal["wall", "elapsed"]
    source: str  # where the lines were seen


@dataclass(frozen=True)
class ReadyTime:
    seconds: float
    line: int  # 1-based line of the ready line
    basis: str  # how it was read, for the user


def _wall(m: re.Match[str], year: int, month: int) -> datetime | None:
    g = m.groupdict()
    try:
        frac = g.get("frac") or ""
        if not g.get("year") and int(g["month"]) < month:
            year += 1  # launched in December, ready in January
        return datetime(
            int(g["year"]) if g.get("year") else year,
            int(g["month"]),
            int(g["day"]),
            int(g["hour"]),
            int(g["minute"]),
            int(g["second"]),
            int((frac + "000000")[:6]) if frac else 0,
            tzinfo=UTC,
        )
    except (KeyError, ValueError):
        return None


def _elapsed(m: re.Match[str]) -> float | None:
    g = m.groupdict()
    try:
        return (
            int(g["minutes"]) * 60
            + int(g["seconds"])
            + int(g["ms"]) / 1e3
            + int(g.get("us") or 0) / 1e6
        )
    except (KeyError, ValueError):
        return None


def ready_after(text: str, clock: ReadyClock) -> ReadyTime | None:
    """Seconds from the engine's launch to the line that says it serves, or ``None``
    when the log does not say (no ready line, no stamp before it, no launch header
    where the clock needs one, or a reading past ``MAX_READY_S``)."""
    ready = re.compile(clock.ready)
    stamp = re.compile(clock.stamp)
    lines = log_lines(text)
    at = next((i for i, line in enumerate(lines) if ready.search(line)), None)
    if at is None:
        return None
    said = f"'{lines[at].strip()[:80]}' (line {at + 1})"
    if clock.kind == "elapsed":
        for line in reversed(lines[: at + 1]):
            m = stamp.search(line)
            if m and (s := _elapsed(m)) is not None:
                if not 0 <= s <= MAX_READY_S:
                    return None
                return ReadyTime(s, at + 1, f"the engine's own elapsed stamp on {said}")
        return None
    launched = _launched(lines)
    if launched is None:
        return None
    first: datetime | None = None
    last: datetime | None = None
    for line in lines[: at + 1]:
        m = stamp.search(line)
        if m is None:
            continue
        t = _wall(m, launched.year, launched.month)
        if t is None:
            continue
        first = first or t
        last = t
    if first is None or last is None:
        return None
    zone = round((first - launched).total_seconds() / ZONE_STEP_S) * ZONE_STEP_S
    seconds = (last - launched).total_seconds() - zone
    if not 0 <= seconds <= MAX_READY_S:
        return None
    shift = f", its clock {zone / 3600:+g} h from UTC" if zone else ""
    return ReadyTime(
        seconds,
        at + 1,
        f"from the launch header (to the second) to the stamp at or before {said}{shift}",
    )


def _launched(lines: list[str]) -> datetime | None:
    """When crossover launched the engine, in UTC, from the log's launch header (its
    first lines); ``None`` without one or with a stamp it cannot read."""
    header = read_header("\n".join(lines[:3]))
    if header is None:
        return None
    try:
        return datetime.fromisoformat(header.started_at).astimezone(UTC)
    except ValueError:
        return None


def utc_stamps(lines: list[str], clock: ReadyClock) -> list[datetime | None] | None:
    """Each line's ``wall`` stamp as UTC, its zone read as ``ready_after`` reads it (the
    first stamp's distance from the launch header, rounded to a quarter hour); ``None``
    for a line without a stamp. ``None`` in all for an ``elapsed`` clock or a log without
    the launch header or a stamp. A stamp of whole seconds is the start of its second."""
    if clock.kind != "wall":
        return None
    launched = _launched(lines)
    if launched is None:
        return None
    stamp = re.compile(clock.stamp)
    walls: list[datetime | None] = []
    for line in lines:
        m = stamp.search(line)
        walls.append(_wall(m, launched.year, launched.month) if m else None)
    first = next((t for t in walls if t is not None), None)
    if first is None:
        return None
    zone = timedelta(seconds=round((first - launched).total_seconds() / ZONE_STEP_S) * ZONE_STEP_S)
    return [t - zone if t is not None else None for t in walls]
