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

That open-loop window assumes every request takes about as long as the others and that
the arrivals last many request times. A level whose arrivals last only a few request
times has no steady state at all: its first requests meet a filling batch and take
longest, its last ones drain an emptying batch and finish fastest, so the completions
come squeezed into a shorter span than the sends and "served" reads more than arrived
(docs/results/h100/moe-open: SGLang at 20 req/s for 16 s, E2E p50 10 s, served 29.3 of
21.4 req/s). :func:`short_level` tells such a level from its own numbers; its window is
then not steady and says why.
"""

from __future__ import annotations

from dataclasses import dataclass

from crossover.metrics.summary import ShortLevel
from crossover.records.model import RequestRecord

#: the arrivals of an open-loop level must last at least this many request times (E2E
#: p50) for a steady state: the ramp-up (until the first requests complete) and the drain
#: (after the last send) take about one request time each, so they are then at most a
#: third of the level, and completions between them come at the rate they would keep. At
#: 2 request times they are half of it (the moe-open levels above: a 28% lead that was
#: ramp-up and drain)
SHORT_LEVEL_REQUEST_TIMES = 3.0
#: served / arriving above this is impossible in a steady state (a server cannot finish
#: more than arrives for long): the window caught ramp-up and drain; 10% leaves room for
#: Poisson noise in a short window
SERVED_OVER_ARRIVING = 1.10
#: the served / arriving share a longer level is sized to stay under
#: (:func:`needed_sending_s`): half the excess ``SERVED_OVER_ARRIVING`` allows, the other
#: half left for Poisson noise in the window's count
SERVED_AIM = 1.0 + (SERVED_OVER_ARRIVING - 1.0) / 2.0


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


def sending_span_s(records: list[RequestRecord]) -> float | None:
    """Seconds from the first send to the last (``records`` on one clock); None for
    fewer than two."""
    sends = [r.t_send_ns for r in records]
    if len(sends) < 2:
        return None
    return (max(sends) - min(sends)) / 1e9


def short_level(
    sending_s: float | None,
    e2e_p50_s: float | None,
    served_rps: float | None = None,
    arriving_rps: float | None = None,
) -> ShortLevel | None:
    """Why an open-loop level had no steady state, or None when it may have had one:
    its arrivals (``sending_s``, first to last send) lasted under
    ``SHORT_LEVEL_REQUEST_TIMES`` times its request time (``e2e_p50_s``), or its window
    served (``served_rps``) more than ``SERVED_OVER_ARRIVING`` times the arrival rate."""
    if sending_s is None:
        return None
    reasons = []
    needed = SHORT_LEVEL_REQUEST_TIMES * e2e_p50_s if e2e_p50_s else None
    if needed is not None and sending_s < needed:
        reasons.append(
            f"arrivals lasted {sending_s:.1f} s, under {SHORT_LEVEL_REQUEST_TIMES:g}x the "
            f"request time (E2E p50 {e2e_p50_s:.1f} s)"
        )
    share = served_rps / arriving_rps if served_rps is not None and arriving_rps else None
    if share is not None and share > SERVED_OVER_ARRIVING:
        reasons.append(
            f"its window counted {served_rps:.3g} requests/s done of {arriving_rps:.3g} "
            f"arriving ({share:.0%})"
        )
    if not reasons:
        return None
    return ShortLevel(
        sending_s=sending_s,
        e2e_p50_s=e2e_p50_s,
        served_share=share,
        needed_s=needed,
        reason="; ".join(reasons),
    )


def under_request_times(short: ShortLevel) -> bool:
    """Whether ``short``'s arrivals lasted under ``SHORT_LEVEL_REQUEST_TIMES`` request
    times (from its own fields: a stored summary's ``needed_s`` is that bound too)."""
    if short.e2e_p50_s:
        return short.sending_s < SHORT_LEVEL_REQUEST_TIMES * short.e2e_p50_s
    return short.needed_s is not None and short.sending_s < short.needed_s


def served_over(short: ShortLevel) -> bool:
    """Whether ``short``'s window served more than ``SERVED_OVER_ARRIVING`` times what
    arrived."""
    return short.served_share is not None and short.served_share > SERVED_OVER_ARRIVING


def needed_sending_s(short: ShortLevel) -> float | None:
    """How long a level like ``short`` should send (first to last arrival) for a steady
    state: the longer of ``SHORT_LEVEL_REQUEST_TIMES`` x its E2E p50 and, where its window
    served more than ``SERVED_OVER_ARRIVING`` times what arrived, a length sized on that
    share; None where neither can be told. Computed from the fields, not the stored
    ``needed_s`` (summaries stored before this hold the request times' bound alone).

    The share's model: the open-loop window (first completion to last) spans the sending
    span S less a gap D, since the first requests meet a filling batch and take longer
    than the last ones, which drain an emptying one; the completions of S's arrivals then
    come in S - D, so served / arriving = S / (S - D), and D = S (1 - 1 / share). Taking D
    as the same at a longer level, a sending span L keeps the share at L / (L - D), under
    ``SERVED_AIM`` for L >= D x aim / (aim - 1). SGLang at 20 requests/s, 40.0 s of
    arrivals, served 111% of them (docs/results/h100/moe-open-decide-freeze, rate 20
    repeat 1): D = 3.95 s, L = 83.0 s, where its E2E p50 (11.2 s) asks for 33.6 s alone."""
    by_times = SHORT_LEVEL_REQUEST_TIMES * short.e2e_p50_s if short.e2e_p50_s else short.needed_s
    by_share = None
    if short.served_share is not None and served_over(short):
        gap = short.sending_s * (1.0 - 1.0 / short.served_share)
        by_share = gap * SERVED_AIM / (SERVED_AIM - 1.0)
    found = [x for x in (by_times, by_share) if x is not None and x > 0.0]
    return max(found) if found else None
