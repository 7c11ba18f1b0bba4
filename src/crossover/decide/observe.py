"""From a level's per-request records to an :class:`Observation` the policy reads.

A whole level is reduced by its stored summary (the sweep's own, verification included).
A level stopped after ``budget_s`` seconds (sequential measurement within it) is reduced
from how far each request had got by then, on the records' own stamps:

* throughput: the tokens received in the measured part (each token-carrying chunk that
  arrived by the cut, a prompt's tokens when its first token did), over its duration, as
  ``crossover.metrics`` counts tokens;
* TTFT p50: a lower bound of the whole level's, over every request it would have sent, one
  still waiting for its first token counted as the time it had waited and one not yet sent
  as 0 ms (the first wave's TTFT is not the later waves', so the requests seen so far are
  not a sample of the level: only the bound holds);
* TPOT and ITL p50 from the requests that finished by the cut.

Its verdict is the level's own (an engine counter read around the whole level cannot
witness a part of it). The budget runs from the first measured request's send; the
measuring time of (a part of) a level from its first request sent (warm-up included) to
the cut, or to the last request's end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from pydantic import ValidationError

from crossover.analysis.crossovers import METRICS
from crossover.analysis.overload import is_overloaded, kept_up
from crossover.analysis.schema import summary_value
from crossover.analysis.short import short_open_loop
from crossover.decide.model import LevelNum, Observation
from crossover.metrics import requests as rq
from crossover.metrics.summary import RunSummary
from crossover.metrics.window import needed_sending_s, served_over, under_request_times
from crossover.records.model import RequestRecord


def metric_values(summary: RunSummary | Mapping[str, Any]) -> dict[str, float | None]:
    """Every compared metric of a run summary, by its key."""
    return {spec.key: summary_value(summary, spec.path) for spec in METRICS}


class OpenLoop(NamedTuple):
    """What the analysis says of an open-loop level's summary, read once: whether it fell
    behind its arrivals (:func:`crossover.analysis.overload.is_overloaded`), whether it was
    too short for a steady state and did not fall behind
    (:func:`crossover.analysis.short.short_open_loop`), how long such a level should
    have sent (:func:`crossover.metrics.window.needed_sending_s`), and why it was short
    (arrivals under ``SHORT_LEVEL_REQUEST_TIMES`` request times; a window that served
    more than ``SERVED_OVER_ARRIVING`` times what arrived, its share). ``None`` each for a
    closed-loop level or a summary that cannot be read; the ``short_`` fields also where
    it was not short. ``kept_up``: its steady window served its arrivals
    (:func:`crossover.analysis.overload.kept_up`)."""

    overloaded: bool | None = None
    short: bool | None = None
    short_needed_s: float | None = None
    short_by_request_times: bool | None = None
    short_served_share: float | None = None
    kept_up: bool | None = None


def open_loop(summary: Mapping[str, Any] | None) -> OpenLoop:
    """:class:`OpenLoop` of ``summary``, parsed once."""
    if summary is None or (summary.get("load") or {}).get("mode") != "rate":
        return OpenLoop()
    try:
        parsed = RunSummary.model_validate(summary)
    except ValidationError:
        return OpenLoop()
    over = is_overloaded(parsed)
    found = short_open_loop(parsed)
    if found is None or over:
        return OpenLoop(over, False, kept_up=kept_up(parsed))
    share = found.served_share if served_over(found) else None
    return OpenLoop(over, True, needed_sending_s(found), under_request_times(found), share)


def end_ns(r: RequestRecord) -> int:
    return max(e for e in (r.t_done_ns, r.t_last_ns, r.t_first_ns, r.t_send_ns) if e)


def span_s(records: Sequence[RequestRecord]) -> float:
    """Seconds from the first request sent to the last one's end, on their one clock."""
    if not records:
        return 0.0
    return max(0.0, (max(end_ns(r) for r in records) - min(r.t_send_ns for r in records)) / 1e9)


def _p50(values: list[float]) -> float | None:
    return float(np.percentile(values, 50)) if values else None


def cut_values(measured: Sequence[RequestRecord], cut_ns: int) -> dict[str, float | None]:
    """The metrics of a level's measured requests as they stood at ``cut_ns``."""
    out: dict[str, float | None] = {spec.key: None for spec in METRICS}
    sent = [r for r in measured if r.t_send_ns <= cut_ns]
    if not sent:
        return out
    start = min(r.t_send_ns for r in sent)
    dur_s = (cut_ns - start) / 1e9
    out_tok = prompt_tok = 0
    ttft: list[float] = []
    for r in sent:
        counts = rq.tokens_per_chunk(r) if r.ok else None
        if counts is not None:
            out_tok += sum(
                k for t, k in zip(r.chunk_arrival_ns, counts, strict=True) if t <= cut_ns
            )
        if r.t_first_ns is not None and r.t_first_ns <= cut_ns:
            prompt_tok += r.prompt_tokens or 0
            ttft.append((r.t_first_ns - r.t_send_ns) / 1e6)
        else:
            ttft.append((cut_ns - r.t_send_ns) / 1e6)
    done = [r for r in sent if r.t_done_ns is not None and r.t_done_ns <= cut_ns and r.ok]
    if dur_s > 0:
        out["total_tokens_per_s"] = (out_tok + prompt_tok) / dur_s
        out["output_tokens_per_s"] = out_tok / dur_s
    # the level's TTFT p50 is at least this: requests not yet sent count as 0 ms (a later
    # wave can be quicker than the first: only a bound over every planned request holds)
    ttft += [0.0] * (len(measured) - len(sent))
    out["ttft_ms.p50"] = _p50(ttft)
    out["tpot_ms.p50"] = _p50([v for r in done if (v := rq.tpot_ms(r)) is not None])
    out["itl_ms.p50"] = _p50([v for r in done for v in rq.itl_ms(r)])
    return out


class Finished:
    """A level's measured requests as they finish, and their metrics so far, as a
    sequential level sees them while it runs (a request is seen when it ends): throughput
    the tokens of those finished over the time from the first one's send to the last one's
    end, latencies their p50s. Read at a wave's end of a closed loop (every stream's
    request finished once), the requests in flight then have barely started, so the
    throughput is about the level's (a little under it). Adding is O(1) per request."""

    def __init__(self) -> None:
        self.count = 0
        self.start: int | None = None
        self.end = 0
        self.out_tok = 0
        self.prompt_tok = 0
        self.ttft: list[float] = []
        self.tpot: list[float] = []
        self.itl: list[float] = []

    def add(self, r: RequestRecord) -> None:
        if r.warmup:
            return
        self.count += 1
        if not r.ok:
            return
        self.start = r.t_send_ns if self.start is None else min(self.start, r.t_send_ns)
        self.end = max(self.end, end_ns(r))
        counts = rq.tokens_per_chunk(r)
        self.out_tok += sum(counts) if counts is not None else (r.completion_tokens or 0)
        self.prompt_tok += r.prompt_tokens or 0
        if r.t_first_ns is not None:
            self.ttft.append((r.t_first_ns - r.t_send_ns) / 1e6)
        if (v := rq.tpot_ms(r)) is not None:
            self.tpot.append(v)
        self.itl += rq.itl_ms(r)

    def values(self) -> dict[str, float | None]:
        out: dict[str, float | None] = {spec.key: None for spec in METRICS}
        if self.start is None:
            return out
        dur_s = (self.end - self.start) / 1e9
        if dur_s > 0:
            out["total_tokens_per_s"] = (self.out_tok + self.prompt_tok) / dur_s
            out["output_tokens_per_s"] = self.out_tok / dur_s
        out["ttft_ms.p50"] = _p50(self.ttft)
        out["tpot_ms.p50"] = _p50(self.tpot)
        out["itl_ms.p50"] = _p50(self.itl)
        return out


def completed_values(done: Sequence[RequestRecord]) -> dict[str, float | None]:
    """The metrics of the finished measured requests ``done`` (:class:`Finished`)."""
    f = Finished()
    for r in done:
        f.add(r)
    return f.values()


def observe(
    target: str,
    level: LevelNum,
    repeat: int,
    records: Sequence[RequestRecord],
    summary: Mapping[str, Any] | None,
    budget_s: float | None = None,
    planned: int | None = None,
) -> Observation:
    """The observation of a level's records, whole (``budget_s`` ``None``, or the level
    finished within it) or as they stood ``budget_s`` seconds after its first measured
    request was sent (the warm-up before it is spent time, not budget). ``planned``: the
    requests the level was planned with, where it was stopped before them (a sequential
    level, live: its summary over the requests it sent, ``complete`` false)."""
    measured = [r for r in records if not r.warmup]
    if planned is not None and budget_s is None and len(measured) < planned:
        values = metric_values(summary) if summary is not None else {}
        valid = (summary or {}).get("verdict") == "valid"
        return Observation(
            target, level, repeat, values, len(measured), planned, span_s(records), valid
        )
    planned = len(measured)
    valid = (summary or {}).get("verdict") == "valid"
    whole = span_s(records)
    if budget_s is None or not measured:
        values = metric_values(summary) if summary is not None else {}
        return Observation(
            target, level, repeat, values, planned, planned, whole, valid,
            **open_loop(summary)._asdict(),
        )  # fmt: skip
    start = min(r.t_send_ns for r in measured)
    cut = start + int(budget_s * 1e9)
    if cut >= max(end_ns(r) for r in records):
        values = metric_values(summary) if summary is not None else {}
        return Observation(
            target, level, repeat, values, planned, planned, whole, valid,
            **open_loop(summary)._asdict(),
        )  # fmt: skip
    finished = sum(1 for r in measured if r.t_done_ns is not None and r.t_done_ns <= cut)
    values = cut_values(measured, cut)
    spent = (cut - min(r.t_send_ns for r in records)) / 1e9
    return Observation(
        target, level, repeat, values, finished, planned, spent, valid, budget_cut=True
    )
