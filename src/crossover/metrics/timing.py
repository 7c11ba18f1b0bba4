"""Timing that may not be the engine's: grouped delivery, and percentiles the client's
own event loop could have made.

* **Grouped delivery.** A buffering server or proxy delivers tokens in bursts; the client
  then sees several events at one moment and cannot tell when each was generated. ITL
  spreads each delivery's gap over its tokens (``crossover.metrics.requests``), so the
  figure stays an estimate of the engine's pace rather than 0.00; a run where most
  events came grouped is flagged (``grouped_delivery``), unless the client's own loop
  lag explains the grouping (then its percentiles are flagged as the client's instead).
* **Client-made percentiles.** A chunk that arrives while the client's event loop is busy
  is stamped when the loop gets to it. The probe's lag at a percentile (less the 1 ms
  the timer's own resolution adds) bounds how much the client can have added to a
  figure at the same percentile: where that is a tenth of the figure or more, the
  percentile is the client's as much as the engine's (``client_made_percentiles``, and
  ``client_made`` in the summary). TPOT spreads the lag over the request's tokens, so it
  is rarely touched; ITL tails are.

Pure functions of the records, their figures and the measured loop lag.
"""

from __future__ import annotations

from crossover.metrics import requests as rq
from crossover.metrics.summary import Delivery, LoopLag, Problem, Stats, add_problem
from crossover.records.model import RequestRecord

#: a run whose token-carrying events came grouped more often than this is flagged
GROUPED_FRACTION = 0.5
#: a percentile is the client's when its loop lag there is this fraction of it or more
CLIENT_LAG_FRACTION = 0.10
#: what the loop-lag probe reads late on an idle loop: epoll waits in whole ms
LAG_RESOLUTION_MS = 1.0
PERCENTILES = (50, 90, 95, 99)


def delivery(ok: list[RequestRecord]) -> Delivery:
    events = sum(max(0, len(r.chunk_arrival_ns) - 1) for r in ok)
    grouped = sum(rq.grouped_events(r) for r in ok)
    return Delivery(
        events=events, grouped=grouped, grouped_fraction=grouped / events if events else None
    )


def _lag(loop: LoopLag | None, p: int) -> float | None:
    """The loop's lag at percentile ``p`` beyond the timer's resolution (ms)."""
    if loop is None or not loop.samples:
        return None
    value: float | None = getattr(loop, f"p{p}_ms", None)
    return None if value is None else max(0.0, value - LAG_RESOLUTION_MS)


def client_grouped(loop: LoopLag | None, itl: Stats) -> bool:
    """The client's loop was late by half a token gap or more at the median: it read
    several events at once because it came to the socket late."""
    lag = _lag(loop, 50)
    return lag is not None and itl.p50 is not None and lag >= 0.5 * itl.p50


def check_grouped(problems: list[Problem], d: Delivery, loop: LoopLag | None, itl: Stats) -> None:
    frac = d.grouped_fraction
    if frac is None or frac <= GROUPED_FRACTION or client_grouped(loop, itl):
        return
    add_problem(
        problems,
        "grouped_delivery",
        "warning",
        d.grouped,
        f"{100 * frac:.0f}% of the token-carrying events arrived together with the one "
        "before (the server or a proxy between delivers tokens in bursts): their gaps are "
        "the delivery's, not the engine's. ITL spreads each delivery's gap over its tokens "
        "(an estimate of the engine's pace); chunk_gap_ms shows the raw gaps",
    )


def client_made(figures: dict[str, Stats], loop: LoopLag | None, output_tokens: int) -> list[str]:
    """``name.pNN`` of each percentile within reach of the client's loop lag."""
    out = []
    for name, st in figures.items():
        for p in PERCENTILES:
            lag = _lag(loop, p)
            value: float | None = getattr(st, f"p{p}")
            if not lag or value is None:
                continue
            bound = lag / max(1, output_tokens - 1) if name == "tpot_ms" else lag
            if bound >= CLIENT_LAG_FRACTION * value:
                out.append(f"{name}.p{p}")
    return out


def check_client_made(
    problems: list[Problem], flagged: list[str], loop: LoopLag | None, workers: int
) -> None:
    if not flagged or loop is None:
        return
    names: dict[str, list[str]] = {}
    for f in flagged:
        name, p = f.split(".")
        names.setdefault(name, []).append(p)
    which = "; ".join(f"{n} {', '.join(ps)}" for n, ps in names.items())
    lags = " / ".join(
        f"p{p} {v:.1f}" for p in PERCENTILES if (v := getattr(loop, f"p{p}_ms")) is not None
    )
    fix = (
        f"spread the load over more client processes than {workers} (--workers N)"
        if workers > 1
        else "spread the load over client processes (--workers N, or --workers auto)"
    )
    add_problem(
        problems,
        "client_made_percentiles",
        "warning",
        len(flagged),
        f"{which}: within reach of the client's own event-loop lag ({lags} ms): a chunk "
        "that arrives while the loop is busy is stamped late, so these percentiles could "
        f"be the client's, not the engine's; {fix} and compare",
    )
