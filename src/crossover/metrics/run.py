"""Run metrics: the steady window, throughput, percentiles, goodput, the client floor.

Verification of the counts and the verdict are in ``crossover.metrics.verify``.
Everything here is a pure function of the raw records and the run's context, so
``crossover summarize DB`` recomputes exactly what ``crossover run`` printed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from crossover.metrics import requests as rq
from crossover.metrics.context import RunContext
from crossover.metrics.prompts import prompt_checks, prompt_witnesses
from crossover.metrics.summary import (
    EngineCounter,
    EngineWitness,
    Goodput,
    Load,
    LoopLag,
    PrefixCache,
    RequestCounts,
    RunSummary,
    Stats,
    Throughput,
    TurnStats,
    Waves,
    Window,
    WitnessCheck,
    Witnesses,
    WorkloadInfo,
    add_problem,
)
from crossover.metrics.timing import check_client_made, check_grouped, client_made, delivery
from crossover.metrics.verify import is_warmup, verdict, verify
from crossover.metrics.window import WindowSpan, sending_span_s, short_level, steady_window
from crossover.metrics.witness import (
    count_with_tokenizer,
    engine_claimed,
    output_checks,
    output_witnesses,
)
from crossover.records.model import RequestRecord

__all__ = ["RunContext", "count_with_tokenizer", "stats", "summarize", "ttft_by_wave", "verify"]


def stats(values: Iterable[float | None]) -> Stats:
    arr = np.fromiter((v for v in values if v is not None), dtype=np.float64)
    if arr.size == 0:
        return Stats()
    p50, p90, p95, p99 = np.percentile(arr, [50, 90, 95, 99])
    return Stats(
        mean=float(arr.mean()),
        p50=float(p50),
        p90=float(p90),
        p95=float(p95),
        p99=float(p99),
        min=float(arr.min()),
        max=float(arr.max()),
        count=int(arr.size),
    )


def by_clock(records: list[RequestRecord]) -> dict[str | None, list[RequestRecord]]:
    """Records by the clock that stamped them: one group, unless load workers ran on
    several Ray nodes (``record.node``)."""
    groups: dict[str | None, list[RequestRecord]] = {}
    for r in records:
        groups.setdefault(r.node, []).append(r)
    return groups if len(groups) > 1 else {None: records}


def _share(target: int | None, part: int, whole: int) -> int | None:
    """A node's part of the target concurrency, by its share of the requests."""
    if target is None:
        return None
    return max(1, round(target * part / whole))


def _sum(parts: list[Throughput]) -> Throughput:
    def add(name: str) -> float | None:
        vals = [getattr(p, name) for p in parts]
        return None if any(v is None for v in vals) else float(sum(vals))

    return Throughput(
        total_tokens_per_s=add("total_tokens_per_s"),
        output_tokens_per_s=add("output_tokens_per_s"),
        requests_per_s=add("requests_per_s"),
    )


def opens_on_completion(span: WindowSpan) -> bool:
    """An open loop's window: from the first completion to the last."""
    return span.opened_by == "first_completion"


def done_in(r: RequestRecord, span: WindowSpan) -> bool:
    """``r`` completed inside the window. The open loop's window runs from one completion
    to another: the first is its edge, and the n completions there are n - 1 intervals
    (as n sends from the first to the last are), so it counts the ones after it."""
    t = r.t_done_ns
    if t is None:
        return False
    if opens_on_completion(span):
        return span.start_ns < t <= span.end_ns
    return span.start_ns <= t <= span.end_ns


def served(ok: list[RequestRecord], start: int, end: int) -> Throughput:
    """An open loop's throughputs: the requests completed after ``start`` up to ``end``
    (the window from the first completion to the last) and their tokens, whole. Every
    request's tokens count where it completed, so with every request served, output
    tokens/s is requests/s times the output length: the work done, at the rate done."""
    dur_s = (end - start) / 1e9
    out_tok = prompt_tok = done = 0
    for r in ok:
        if r.t_done_ns is None or not start < r.t_done_ns <= end:
            continue
        done += 1
        counts = rq.tokens_per_chunk(r)
        if counts is not None:
            out_tok += sum(counts)
        if r.prompt_tokens is not None and r.t_first_ns is not None:
            prompt_tok += r.prompt_tokens
    return Throughput(
        total_tokens_per_s=(out_tok + prompt_tok) / dur_s,
        output_tokens_per_s=out_tok / dur_s,
        requests_per_s=done / dur_s,
    )


@dataclass
class _Timeline:
    """One clock's window and throughputs."""

    span: WindowSpan | None
    throughput: Throughput
    whole: Throughput
    window: Window
    achieved: float | None
    duration_s: float


def _timeline(records: list[RequestRecord], target: int | None) -> _Timeline:
    """The steady window, throughputs and duration of ``records`` (sorted by send time,
    warm-up left out), all stamped by one clock."""
    ok = [r for r in records if r.ok]
    span = steady_window(records, target)
    t0 = records[0].t_send_ns if records else 0

    def throughput(start: int, end: int, by_request: bool = False) -> Throughput:
        dur_s = (end - start) / 1e9
        if dur_s <= 0:
            return Throughput()
        if by_request:
            return served(ok, start, end)
        out_tok = prompt_tok = done = 0
        for r in ok:
            counts = rq.tokens_per_chunk(r)
            if counts is not None:
                out_tok += sum(
                    k for t, k in zip(r.chunk_arrival_ns, counts, strict=True) if start <= t <= end
                )
            if (
                r.prompt_tokens is not None
                and r.t_first_ns is not None
                and (start <= r.t_first_ns <= end)
            ):
                prompt_tok += r.prompt_tokens
            if r.t_done_ns is not None and start <= r.t_done_ns <= end:
                done += 1
        return Throughput(
            total_tokens_per_s=(out_tok + prompt_tok) / dur_s,
            output_tokens_per_s=out_tok / dur_s,
            requests_per_s=done / dur_s,
        )

    ends = [r.t_done_ns for r in records if r.t_done_ns is not None]
    duration = (max(ends) - t0) / 1e9 if ends else 0.0
    if span is None:
        return _Timeline(None, Throughput(), Throughput(), Window(), None, duration)
    return _Timeline(
        span,
        throughput(span.start_ns, span.end_ns, opens_on_completion(span)),
        throughput(t0, max(ends)) if ends else Throughput(),
        Window(
            start_s=(span.start_ns - t0) / 1e9,
            end_s=(span.end_ns - t0) / 1e9,
            duration_s=span.duration_ns / 1e9,
            steady=span.steady,
            opened_by=span.opened_by,
        ),
        span.achieved_concurrency,
        duration,
    )


def mark_short(
    window: Window,
    clocks: dict[str | None, list[RequestRecord]],
    e2e: Stats,
    tp: Throughput,
    arriving: float | None,
) -> Window:
    """An open-loop run's window, not steady and saying why where the level was too short
    for a steady state (``crossover.metrics.window.short_level``; the longest clock's
    sending span when load workers ran on several nodes). Its throughputs stay as they
    were counted: marked, not replaced."""
    spans = [x for x in (sending_span_s(g) for g in clocks.values()) if x is not None]
    served = tp.requests_per_s if window.opened_by == "first_completion" else None
    e2e_s = e2e.p50 / 1000.0 if e2e.p50 is not None else None
    short = short_level(max(spans, default=None), e2e_s, served, arriving)
    if short is None:
        return window
    return window.model_copy(update={"steady": False, "short": short})


def sending_rate(records: list[RequestRecord]) -> float | None:
    """Requests sent per second from the first send to the last (``records`` on one
    clock): n sends are n - 1 gaps. None for fewer than two."""
    sends = [r.t_send_ns for r in records]
    if len(sends) < 2 or max(sends) <= min(sends):
        return None
    return (len(sends) - 1) / ((max(sends) - min(sends)) / 1e9)


def ttft_by_wave(records: list[RequestRecord], target: int | None) -> Waves | None:
    """TTFT of the first ``target`` sends (sent together) and of the later ones, for a
    closed-loop run with a later wave; ``records``: the measured ones (no warm-up) sorted
    by send time, on one clock."""
    if target is None or len(records) <= target:
        return None
    first, later = records[:target], records[target:]
    return Waves(
        first_ttft_ms=stats(rq.ttft_ms(r) for r in first if r.ok),
        later_ttft_ms=stats(rq.ttft_ms(r) for r in later if r.ok),
        first_requests=len(first),
        later_requests=len(later),
        later_sent_over_s=(later[-1].t_send_ns - later[0].t_send_ns) / 1e9,
    )


def witnesses(
    records: list[RequestRecord],
    all_records: list[RequestRecord],
    engine: EngineCounter | None,
    ctx: RunContext,
) -> Witnesses:
    """Per-witness totals of the succeeded measured requests (and the engine's counter),
    and every witness asked with what it said."""
    ok = [r for r in records if r.ok]
    eng = None
    if engine is not None:
        eng = EngineWitness(
            counter=engine.name, generated=engine.generated, claimed=engine_claimed(all_records)
        )
    checks = output_checks(ok, all_records, engine) + prompt_checks(ok, ctx)
    return Witnesses(
        output_tokens=output_witnesses(ok),
        prompt_tokens=prompt_witnesses(ok),
        engine=eng,
        checks=checks,
        server_word=server_word(ok, checks),
    )


#: witnesses independent of the server's usage (the chunk count is only a lower bound)
INDEPENDENT = {
    "output_tokens": ("stream_text", "logprobs", "engine_counter"),
    "prompt_tokens": ("prompts",),
}


def server_word(ok: list[RequestRecord], checks: list[WitnessCheck]) -> list[str]:
    """The counts usage reported that no independent witness was asked about: the run's
    figures rest on the server's word for them (no tokenizer, no logprobs, no counter)."""
    out = []
    for count, reported in (
        ("output_tokens", any(r.count_source == "usage" for r in ok)),
        ("prompt_tokens", any(r.prompt_tokens is not None for r in ok)),
    ):
        asked = any(
            c.count == count and c.witness in INDEPENDENT[count] and c.asked for c in checks
        )
        if reported and not asked:
            out.append(count.replace("_", " "))
    return out


def summarize(
    all_records: list[RequestRecord],
    ctx: RunContext,
    engine: EngineCounter | None = None,
    loop: LoopLag | None = None,
) -> RunSummary:
    """The run summary; ``engine`` is the engine's token counter around the level, if
    read; ``loop`` the client event loop's lag during it, if measured."""
    records = sorted((r for r in all_records if not r.warmup), key=lambda r: r.t_send_ns)
    ok = [r for r in records if r.ok]
    problems, matched = verify(records, ctx, engine, all_records)

    target = None
    if ctx.mode == "concurrency" and ctx.concurrency:
        target = min(ctx.concurrency, max(1, len(records)))
    clocks = by_clock(records)
    lines: dict[str | None, _Timeline]
    if len(clocks) == 1:
        line = _timeline(records, target)
        tp, whole, window, achieved, duration = (
            line.throughput, line.whole, line.window, line.achieved, line.duration_s,
        )  # fmt: skip
        lines = {None: line}
    else:
        # load workers on several Ray nodes: each node's stamps are its own clock, so each
        # node gets its own window (its share of the target in flight) and the
        # throughputs add up; no time is compared across nodes
        lines = {
            node: _timeline(group, _share(target, len(group), len(records)))
            for node, group in clocks.items()
        }
        tp, whole = (
            _sum([x.throughput for x in lines.values()]),
            _sum([x.whole for x in lines.values()]),
        )
        windows = [x.window for x in lines.values()]
        shortest = min(windows, key=lambda w: w.duration_s or 0.0)
        window = shortest.model_copy(update={"steady": all(w.steady for w in windows)})
        parts = [x.achieved for x in lines.values()]
        achieved = sum(p for p in parts if p is not None) if any(parts) else None
        duration = max(x.duration_s for x in lines.values())

    ttft = stats(rq.ttft_ms(r) for r in ok)
    tpot = stats(rq.tpot_ms(r) for r in ok)
    itl_all = [v for r in ok for v in rq.itl_ms(r)]
    itl = stats(itl_all)
    gaps = stats(v for r in ok for v in rq.chunk_gaps_ms(r))
    e2e = stats(rq.e2e_ms(r) for r in ok)
    queue = stats(rq.queue_ms(r) for r in records)

    waves = ttft_by_wave(records, target) if len(clocks) == 1 else None
    arriving = None
    if ctx.mode == "rate":
        rates = [sending_rate(group) for group in clocks.values()]
        arriving = None if any(x is None for x in rates) else sum(x or 0.0 for x in rates)
        window = mark_short(window, clocks, e2e, tp, arriving)

    goodput = None
    if ctx.slo and window.duration_s:
        limits = ctx.slo.per_request()

        def meets(r: RequestRecord) -> bool:
            checks = {"ttft_ms": rq.ttft_ms(r), "tpot_ms": rq.tpot_ms(r), "e2e_ms": rq.e2e_ms(r)}
            return all(t.holds(checks.get(t.metric)) for t in limits)

        good = [r for r in ok if meets(r)]
        rate = 0.0  # per clock: the good requests done in its window over its duration
        for node, line in lines.items():
            sp, dur = line.span, line.window.duration_s
            if sp is None or not dur:
                continue
            n = sum(1 for r in good if (node is None or r.node == node) and done_in(r, sp))
            rate += n / dur
        goodput = Goodput(
            slo=ctx.slo,
            requests_per_s=rate,
            fraction=len(good) / len(records) if records else None,
        )

    floor = ctx.client_floor
    if floor is not None and floor.delivery_p50_ms is not None:
        limit = ctx.floor_multiple * floor.delivery_p50_ms
        flagged = [
            name
            for name, s in (("itl_ms", itl), ("tpot_ms", tpot))
            if s.p50 is not None and s.p50 < limit
        ]
        if flagged:
            add_problem(
                problems,
                "client_floor",
                "warning",
                len(flagged),
                f"{', '.join(flagged)} p50 within {ctx.floor_multiple:g}x the client's own "
                f"delivery delay ({floor.delivery_p50_ms:.3f} ms): not the engine's figure",
            )

    delivered = delivery(ok)
    check_grouped(problems, delivered, loop, itl)
    figures = {"ttft_ms": ttft, "itl_ms": itl, "tpot_ms": tpot, "e2e_ms": e2e, "chunk_gap_ms": gaps}
    made = client_made(figures, loop, ctx.output_tokens)
    check_client_made(problems, made, loop, ctx.workers)

    return RunSummary(
        verdict=verdict(problems, len(ok)),
        problems=problems,
        requests=RequestCounts(
            sent=len(records),
            succeeded=len(ok),
            failed=len(records) - len(ok),
            matched=matched,
            warmup=sum(1 for r in all_records if is_warmup(r)),
            warmup_failed=sum(1 for r in all_records if is_warmup(r) and not r.ok),
            retries=sum(r.retries for r in records),
        ),
        load=Load(
            mode="rate" if ctx.mode == "rate" else "concurrency",
            concurrency=ctx.concurrency,
            rate_rps=ctx.rate_rps,
            arriving_rps=arriving,
            arrival_seed=ctx.arrival_seed if ctx.mode == "rate" else None,
            achieved_concurrency=achieved,
            workers=ctx.workers,
            transport=ctx.transport,
        ),
        throughput=tp,
        whole_run=whole,
        window=window,
        ttft_ms=ttft,
        tpot_ms=tpot,
        itl_ms=itl,
        chunk_gap_ms=gaps,
        e2e_ms=e2e,
        queue_ms=queue,
        goodput=goodput,
        waves=waves,
        client_floor=floor,
        prompt_tokens=stats(float(r.prompt_tokens) for r in ok if r.prompt_tokens is not None),
        expected_output_tokens=stats(float(r.expected_output_tokens) for r in records),
        prefix_cache=prefix_cache(ok),
        turns=turn_stats(ok, ctx.turns),
        witnesses=witnesses(records, all_records, engine, ctx),
        client_loop=loop,
        client_made=made,
        delivery=delivered,
        engine=ctx.engine,
        workload=WorkloadInfo(
            input_tokens=ctx.input_tokens,
            output_tokens=ctx.output_tokens,
            endpoint="chat" if ctx.endpoint == "chat" else "completions",
            prompts=ctx.prompts,
            seed=ctx.seed,
            tokenizer=ctx.tokenizer,
            shape=ctx.shape,
        ),
        started_at=ctx.started_at,
        duration_s=duration,
    )


def prefix_cache(ok: Sequence[RequestRecord]) -> PrefixCache | None:
    """What the engine said about its prefix cache; None when no request said anything."""
    said = [r for r in ok if r.cached_prompt_tokens is not None]
    if not said:
        return None
    both = [r for r in said if r.prompt_tokens]
    cached = sum(r.cached_prompt_tokens or 0 for r in both)
    prompt = sum(r.prompt_tokens or 0 for r in both)
    return PrefixCache(
        requests_reporting=len(said),
        cached_tokens=sum(r.cached_prompt_tokens or 0 for r in said),
        prompt_tokens=prompt,
        hit_fraction=cached / prompt if prompt else None,
    )


def turn_stats(ok: Sequence[RequestRecord], turns: int | None) -> list[TurnStats]:
    """TTFT and prompt length per turn of multi-turn sessions (request i: turn i mod T).
    The request's place is its prompt's: workers renumber records as they arrive."""
    if not turns or turns < 2:
        return []
    out = []
    for t in range(turns):
        mine = [r for r in ok if (r.index if r.prompt_id is None else r.prompt_id) % turns == t]
        out.append(
            TurnStats(
                turn=t + 1,
                ttft_ms=stats(rq.ttft_ms(r) for r in mine),
                prompt_tokens=stats(
                    float(r.expected_prompt_tokens or r.prompt_tokens or 0) for r in mine
                ),
            )
        )
    return out
