"""The steady window: when the load was in its steady state.

Closed loop: from the first moment ``target`` requests are in flight to the last moment
they still are; ramp-up and drain fall outside. Open loop (no target): from the first
completion to the last. Completions follow the arrivals about one request time later,
so between the first and the last they come at the rate the server kept up (the
arrival rate when it keeps up, its own pace when it falls behind): n completions there
are n - 1 intervals, as n sends are from the first send to the last. Before the first
completion nothing had had time to finish (the ramp-up). A window from the first send
to the last instead left out about one request time's completions (biased low by
E2E / window: "served 10.3 of 10.3 req/s, goodput 9.22"). Also the time-averaged
in-flight count.
"""

from __future__ import annotations

from dataclasses import dataclass

from crossover.records.model import RequestRecord


@dataclass(frozen=True, slots=True)
class WindowSpan:
    start_ns: int
    end_ns: int
    steady: bool
    achieved_concurrency: float | None
    #: what opened the window: ``target_in_flight`` (closed loop), ``first_completion``
    #: (open loop), ``first_send`` (the whole run, when no steady window was found)
    opened_by: str = "target_in_flight"

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


def _events(records: list[RequestRecord]) -> list[tuple[int, int]]:
    ev: list[tuple[int, int]] = []
    for r in records:
        if r.t_done_ns is None:
            continue
        ev.append((r.t_send_ns, 1))
        ev.append((r.t_done_ns, -1))
    # at equal times, ends before starts: a slot freed and refilled is not "C+1"
    ev.sort()
    return ev


def average_in_flight(records: list[RequestRecord], start_ns: int, end_ns: int) -> float | None:
    if end_ns <= start_ns:
        return None
    area = 0
    level = 0
    prev = start_ns
    for t, d in _events(records):
        tc = min(max(t, start_ns), end_ns)
        area += level * (tc - prev)
        prev = tc
        level += d
    area += level * (end_ns - prev)
    return area / (end_ns - start_ns)


def steady_window(records: list[RequestRecord], target: int | None) -> WindowSpan | None:
    """``target`` None (open loop): from the first completion of a succeeded request to
    the last."""
    ev = _events(records)
    if not ev:
        return None
    first = ev[0][0]
    last = max(t for t, _ in ev)
    start = end = None
    opened_by = "target_in_flight"
    if target is None:
        opened_by = "first_completion"
        done = [r.t_done_ns for r in records if r.ok and r.t_done_ns is not None]
        if done:
            start, end = min(done), max(done)
    else:
        level = 0
        for t, d in ev:
            before = level
            level += d
            if before < target <= level and start is None:
                start = t
            if before >= target > level:
                end = t
    if start is None or end is None or end <= start:
        return WindowSpan(first, last, False, average_in_flight(records, first, last), "first_send")
    return WindowSpan(start, end, True, average_in_flight(records, start, end), opened_by)
