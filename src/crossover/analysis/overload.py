"""An open-loop level past the server's capacity, told from its run summary.

Under a rate the server sustains, requests finish as fast as they arrive: the completions
follow the arrivals, shifted by about one request time. Past its capacity they come at the
server's own pace, slower than the arrivals, and the requests in flight keep growing for as
long as the level lasts (the rule ``crossover capacity`` applies while a level runs,
``crossover.capacity.overload``). After the level the summary tells the same: the requests
that arrived over the sending window (first to last send) against those served over the
open loop's steady window (from the first completion to the last: the window its
throughputs and goodput are counted in, so "served" and goodput are one count, equal
when every request met the SLO). A summary stored before that window, and a level too
short for a steady state (``crossover.analysis.short``: its window caught ramp-up and
drain), count the served ones from the first possible completion (the level's start plus
the fastest request) to the last one. A level is overloaded when it served less than
``SERVED_SHARE`` of the arrival rate. Its throughput is then the server's capacity and its
latencies grow with the level's length: a sweep flags such a level wherever it shows it.

The other side of that line: a level **kept up** when its steady window served at least
``KEPT_UP_SHARE`` of the arrival rate (:func:`kept_up`). Below its capacity a server's
throughput is the arrivals', not its own: two servers given the same seeded arrivals
that both kept up served the same requests, and what their windows count differs only by
the window's own noise (where its first and last completions fall: 0.91-1.10 of the
arrivals on the committed H100 open-loop levels that kept up, with no request waiting).
A throughput comparison there is a tie by construction
(``crossover.analysis.crossovers``, ``MetricSpec.arrival_bound``).
"""

from __future__ import annotations

from dataclasses import dataclass

from crossover.analysis.short import short_open_loop
from crossover.metrics.summary import RunSummary
from crossover.metrics.window import SERVED_OVER_ARRIVING

#: served / arriving below this: the queue grew through the level
SERVED_SHARE = 0.8
#: fewer sent requests than this say too little to judge
MIN_REQUESTS = 8
#: served / arriving at or above this in a steady window: the server kept up. The band
#: is the one a steady window's noise is allowed above the arrivals
#: (``SERVED_OVER_ARRIVING``, 10%), mirrored below: where the first and last completions
#: fall moves the count either way
KEPT_UP_SHARE = 2.0 - SERVED_OVER_ARRIVING


@dataclass(frozen=True)
class Overload:
    """Arrivals against completions of one open-loop level."""

    arriving_rps: float
    served_rps: float
    #: counted over the open loop's steady window (first completion to last, a level
    #: long enough for one); False: from the first possible completion, a stored summary
    #: without that window or a level too short for a steady state
    steady: bool = False

    @property
    def share(self) -> float:
        return self.served_rps / self.arriving_rps if self.arriving_rps > 0 else 1.0

    @property
    def overloaded(self) -> bool:
        return self.share < SERVED_SHARE

    def describe(self) -> str:
        return (
            f"served {self.served_rps:.3g} of the {self.arriving_rps:.3g} requests/s that "
            f"arrived ({self.share:.0%})"
        )


def open_loop_load(summary: RunSummary) -> Overload | None:
    """Arrival and service rates of an open-loop run; ``None`` for a closed loop or a run
    too small or too broken to judge."""
    if summary.load.mode != "rate":
        return None
    sent = summary.requests.sent
    window = summary.window.duration_s
    if sent < MIN_REQUESTS or not window or window <= 0:
        return None
    arriving = summary.load.arriving_rps
    if arriving is None:  # stored before it was: the window ran from first to last send
        arriving = (sent - 1) / window  # first to last send: sent - 1 gaps
    served_in_window = summary.throughput.requests_per_s
    # a level too short for a steady state (``crossover.analysis.short``) counts its window
    # in ramp-up and drain (served 29.3 of 21.4 req/s): it takes the path below, every
    # request served from the first possible completion to the last
    if (
        summary.window.opened_by == "first_completion"
        and summary.window.steady
        and served_in_window is not None
        and short_open_loop(summary) is None
    ):
        return Overload(arriving_rps=arriving, served_rps=served_in_window, steady=True)
    fastest_s = (summary.e2e_ms.min or 0.0) / 1000.0
    serving_s = (summary.duration_s or 0.0) - fastest_s
    ok = summary.requests.succeeded
    # ok - 1 gaps between the first completion and the last, as sends count theirs
    served = max(ok - 1, 0) / serving_s if serving_s > 0 else 0.0
    return Overload(arriving_rps=arriving, served_rps=served)


def kept_up(summary: RunSummary) -> bool | None:
    """Whether an open-loop level's server kept up with its arrivals: a steady window
    (not too short for one, ``crossover.analysis.short``) that served at least
    ``KEPT_UP_SHARE`` of the arrival rate. ``None`` for a closed loop, or a run too small
    or too short to tell (no steady window): such a level is compared as measured."""
    found = open_loop_load(summary)
    if found is None or not found.steady:
        return None
    return found.share >= KEPT_UP_SHARE


def is_overloaded(summary: RunSummary) -> bool:
    found = open_loop_load(summary)
    return found is not None and found.overloaded
