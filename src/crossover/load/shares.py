"""One run's load split over its client processes: each worker's ``Share``.

A closed loop gets ``C`` streams split as evenly as possible (and the measured requests in
proportion), an open loop ``rate / W`` with its own seed (independent Poisson processes
add up to one Poisson process at the full rate).

Sessions and traces are split by index instead (``plan_shares``), so the work is the one a
single process would send: sessions in a closed loop go to the workers in whole blocks of
sessions (in proportion to their streams), each session wholly in one worker so its turns
stay in order; an open loop of sessions or a trace is one schedule (the run's seed, the
trace's times) that every worker computes, worker ``k`` of ``W`` sending its entries
``k``, ``k + W``, ... against a start time the parent gives them all.

``crossover.load.workers`` and ``crossover.load.rayworkers`` run the shares;
``crossover.load.loop`` runs one.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from crossover import defaults
from crossover.load.looplag import probe_interval_s as lag_probe_interval

if TYPE_CHECKING:
    from crossover.spec.run import RunConfig


@dataclass(frozen=True, slots=True)
class Share:
    """One loop's part of a level's load: a worker's (``plan_shares``), or the whole level
    run in-process (``crossover.load.loop.whole_share``)."""

    worker: int
    concurrency: int | None
    rate_rps: float | None
    max_in_flight: int | None
    requests: int | None
    duration_s: float | None
    warmup: int
    warmup_concurrency: int
    prompt_offset: int
    warmup_offset: int
    seed: int
    #: the loop-lag probe's sleep, from the whole run's concurrency (looplag.probe_interval_s)
    probe_interval_s: float
    #: ``(k, W)``: this worker sends entries k, k + W, ... of the whole run's schedule (a
    #: trace, or an open loop of sessions); ``rate_rps``, ``requests`` and ``seed`` are then
    #: the whole run's, its indices are the run's own and ``prompt_offset`` is 0
    part: tuple[int, int] | None = None


def _split(total: int, parts: int) -> list[int]:
    """``total`` as ``parts`` integers differing by at most one, larger first."""
    base, extra = divmod(total, parts)
    return [base + (1 if k < extra else 0) for k in range(parts)]


def _weighted(total: int, weights: list[int]) -> list[int]:
    """``total`` split in proportion to ``weights`` (largest remainders), summing exactly."""
    w = sum(weights)
    raw = [total * x / w for x in weights]
    out = [int(r) for r in raw]
    for k in sorted(range(len(raw)), key=lambda k: raw[k] - out[k], reverse=True)[
        : total - sum(out)
    ]:
        out[k] += 1
    return out


def plan_shares(
    *,
    workers: int,
    concurrency: int | None,
    rate_rps: float | None,
    max_in_flight: int | None,
    requests: int | None,
    duration_s: float | None,
    warmup: int,
    seed: int,
    turns: int | None = None,
    trace: bool = False,
) -> list[Share]:
    """Split one run's load over ``workers`` processes (fewer when there is less to split).

    ``turns``: the requests are sessions of that many turns, split in whole sessions;
    ``trace``: the open loop replays a trace, split by line (``part``)."""
    by_part = concurrency is None and (turns is not None or trace)
    reqs: list[int | None]
    if concurrency is not None and turns is not None:
        assert requests is not None  # sessions count requests
        n_sessions = -(-requests // turns)
        w = max(1, min(workers, concurrency, n_sessions))
        conc = _split(concurrency, w)
        # whole sessions, in proportion to the streams; the last one may be cut short
        ends = list(itertools.accumulate(_weighted(n_sessions, conc)))
        reqs = [
            min(e * turns, requests) - min(b * turns, requests)
            for b, e in zip([0, *ends[:-1]], ends, strict=True)
        ]
    elif concurrency is not None:
        w = max(1, min(workers, concurrency))
        conc = _split(concurrency, w)
        reqs = list(_weighted(requests, conc)) if requests is not None else [None] * w
    elif by_part:
        units = None if requests is None else -(-requests // (turns or 1))
        w = max(1, workers if units is None else min(workers, units))
        conc = [0] * w
        reqs = [requests] * w  # each worker walks the whole schedule, sending its part
    else:
        assert rate_rps is not None
        w = max(1, workers if requests is None else min(workers, requests))
        conc = [0] * w
        reqs = list(_split(requests, w)) if requests is not None else [None] * w
    warm = _split(warmup, w)
    caps: list[int | None] = (
        list(_split(max_in_flight, w)) if max_in_flight is not None else [None] * w
    )
    shares = []
    offset = warm_offset = 0
    for k in range(w):
        c = conc[k] or None
        shares.append(
            Share(
                worker=k,
                concurrency=c,
                rate_rps=None if rate_rps is None else rate_rps / (1 if by_part else w),
                max_in_flight=None if (cap := caps[k]) is None else max(1, cap),
                requests=reqs[k],
                duration_s=duration_s,
                warmup=warm[k],
                warmup_concurrency=defaults.warmup_concurrency(c, warm[k]),
                prompt_offset=0 if by_part else offset,
                warmup_offset=warm_offset,
                # a shared schedule needs the run's own seed; independent ones their own
                seed=seed if by_part else seed * 1009 + k,
                probe_interval_s=lag_probe_interval(concurrency),
                part=(k, w) if by_part else None,
            )
        )
        offset += reqs[k] or 0
        warm_offset += warm[k]
    return shares


def shares_of(config: RunConfig) -> list[Share]:
    """``plan_shares`` for a run's config (``config.workers`` of its load)."""
    return plan_shares(
        workers=config.workers,
        concurrency=config.concurrency,
        rate_rps=config.rate_rps,
        max_in_flight=config.max_in_flight,
        requests=config.requests,
        duration_s=config.duration_s,
        warmup=config.warmup,
        seed=config.arrivals_seed,
        turns=config.sessions.turns if config.sessions else None,
        trace=config.trace is not None,
    )
