"""Run metrics, matched-work verification, problems and the verdict.

Everything here is a pure function of the raw records and the run's context, so
``crossover summarize DB`` recomputes exactly what ``crossover run`` printed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
from pydantic import BaseModel, Field

from crossover.metrics import requests as rq
from crossover.metrics.summary import (
    ClientFloor,
    EngineInfo,
    Goodput,
    Load,
    Problem,
    RequestCounts,
    RunSummary,
    Severity,
    Stats,
    Throughput,
    Verdict,
    Window,
    WorkloadInfo,
)
from crossover.metrics.window import steady_window
from crossover.records.model import RequestRecord

_ERROR_CODES = {
    "http_error": "http_error",
    "timeout": "timeout",
    "connection_error": "connection_error",
    "stream_truncated": "stream_truncated",
    "malformed": "malformed_event",
}


class RunContext(BaseModel):
    """What the run asked for; stored beside the records."""

    model_config = {"frozen": True}

    mode: str
    output_tokens: int
    endpoint: str
    engine: EngineInfo
    started_at: str
    concurrency: int | None = None
    rate_rps: float | None = None
    input_tokens: int | None = None
    prompts: str = "synthetic"
    seed: int = 0
    tokenizer: str | None = None
    #: the dialect reports a finish reason (Triton's stream does not)
    expects_finish_reason: bool = True
    allowed_failures: int = 0
    slo: dict[str, float] = Field(default_factory=dict)
    client_floor: ClientFloor | None = None
    #: flag latency percentiles within this multiple of the client floor
    floor_multiple: float = 3.0
    workers: int = 1


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


def _problem(out: list[Problem], code: str, severity: Severity, count: int, message: str) -> None:
    if count:
        out.append(Problem(code=code, severity=severity, count=count, message=message))


def count_with_tokenizer(records: list[RequestRecord], encode: Callable[[str], list[int]]) -> None:
    """Fill missing completion counts from the kept text; mark them estimated."""
    for r in records:
        if r.ok and r.completion_tokens is None and r.text is not None:
            r.completion_tokens = len(encode(r.text))
            r.count_source = "tokenizer"


def verify(records: list[RequestRecord], ctx: RunContext) -> tuple[list[Problem], int]:
    """Matched-work checks. Returns the problems and the number of matched requests."""
    n = ctx.output_tokens
    ok = [r for r in records if r.ok]
    problems: list[Problem] = []
    short = [r for r in ok if r.completion_tokens is not None and r.completion_tokens < n]
    long_ = [r for r in ok if r.completion_tokens is not None and r.completion_tokens > n]
    if short:
        got = sorted(r.completion_tokens or 0 for r in short)
        _problem(
            problems,
            "short_completion",
            "error",
            len(short),
            f"{len(short)} requests generated fewer than {n} tokens "
            f"(min {got[0]}, median {got[len(got) // 2]}): the engine ignored the "
            "matched-work fields or stopped at EOS",
        )
    if long_:
        _problem(
            problems,
            "long_completion",
            "error",
            len(long_),
            f"{len(long_)} requests generated more than {n} tokens",
        )
    if ctx.expects_finish_reason:
        bad = [r for r in ok if r.finish_reason != "length"]
        reasons = sorted({str(r.finish_reason) for r in bad})
        _problem(
            problems,
            "finish_reason",
            "error",
            len(bad),
            f"{len(bad)} requests ended with finish_reason {', '.join(reasons)} "
            "instead of 'length'",
        )
    no_usage = [r for r in ok if r.count_source != "usage"]
    if no_usage:
        how = (
            "counted with the tokenizer (estimated)"
            if any(r.count_source == "tokenizer" for r in no_usage)
            else "not counted: no tokenizer"
        )
        _problem(
            problems,
            "usage_missing",
            "warning",
            len(no_usage),
            f"{len(no_usage)} requests had no usage from the server; tokens {how}",
        )
    lying = [
        r
        for r in ok
        if r.completion_tokens is not None
        and r.count_source == "usage"
        and r.completion_tokens < len(r.chunk_arrival_ns)
    ]
    _problem(
        problems,
        "usage_mismatch",
        "error",
        len(lying),
        f"{len(lying)} requests report fewer completion tokens than the token-carrying "
        "chunks they streamed",
    )
    offsets = [
        r.prompt_tokens - r.expected_prompt_tokens
        for r in ok
        if r.prompt_tokens is not None and r.expected_prompt_tokens is not None
    ]
    if offsets:
        spread = max(offsets) - min(offsets)
        med = sorted(offsets)[len(offsets) // 2]
        if spread > 1:
            _problem(
                problems,
                "prompt_tokens_mismatch",
                "error",
                len(offsets),
                f"reported prompt tokens differ from the prompts' counts by {min(offsets)} "
                f"to {max(offsets)}: prompt lengths are not matched",
            )
        elif med > 3:
            _problem(
                problems,
                "prompt_tokens_mismatch",
                "warning",
                len(offsets),
                f"the server counts {med} more prompt tokens than each prompt has "
                "(a chat template or special tokens): compare engines on the same endpoint",
            )
    else:
        pts = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
        if pts and ctx.input_tokens is not None and max(pts) - min(pts) > 2:
            _problem(
                problems,
                "prompt_tokens_mismatch",
                "warning",
                len(pts),
                f"reported prompt tokens range from {min(pts)} to {max(pts)}: "
                "give --tokenizer for exact prompt lengths",
            )
    multi = [
        r
        for r in ok
        if r.completion_tokens is not None and r.completion_tokens > len(r.chunk_arrival_ns)
    ]
    _problem(
        problems,
        "multi_token_chunks",
        "info",
        len(multi),
        f"{len(multi)} requests streamed several tokens per chunk; ITL divides each "
        "chunk gap over its tokens and chunk_gap_ms shows the raw gaps",
    )
    failed: dict[str, list[RequestRecord]] = {}
    for r in records:
        if r.error_kind is not None:
            failed.setdefault(_ERROR_CODES[r.error_kind], []).append(r)
    n_failed = sum(len(v) for v in failed.values())
    sev: Severity = "error" if n_failed > ctx.allowed_failures else "warning"
    for code, rs in sorted(failed.items()):
        sample = rs[0].error or code
        _problem(problems, code, sev, len(rs), f"{len(rs)} requests failed; first: {sample}")
    matched = sum(
        1
        for r in ok
        if r.completion_tokens == n
        and (r.finish_reason == "length" or not ctx.expects_finish_reason)
    )
    return problems, matched


def _verdict(problems: list[Problem], succeeded: int) -> Verdict:
    if succeeded == 0 or any(p.severity == "error" for p in problems):
        return "invalid"
    if any(p.code == "usage_missing" for p in problems):
        return "unverified"
    return "valid"


def summarize(all_records: list[RequestRecord], ctx: RunContext) -> RunSummary:
    records = sorted((r for r in all_records if not r.warmup), key=lambda r: r.t_send_ns)
    ok = [r for r in records if r.ok]
    problems, matched = verify(records, ctx)

    target = None
    if ctx.mode == "concurrency" and ctx.concurrency:
        target = min(ctx.concurrency, max(1, len(records)))
    span = steady_window(records, target)
    t0 = records[0].t_send_ns if records else 0

    def throughput(start: int, end: int) -> Throughput:
        dur_s = (end - start) / 1e9
        if dur_s <= 0:
            return Throughput()
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

    if span is not None:
        tp = throughput(span.start_ns, span.end_ns)
        ends = [r.t_done_ns for r in records if r.t_done_ns is not None]
        whole = throughput(t0, max(ends)) if ends else Throughput()
        window = Window(
            start_s=(span.start_ns - t0) / 1e9,
            end_s=(span.end_ns - t0) / 1e9,
            duration_s=span.duration_ns / 1e9,
            steady=span.steady,
        )
        achieved = span.achieved_concurrency
    else:
        tp, whole, window, achieved = Throughput(), Throughput(), Window(), None

    ttft = stats(rq.ttft_ms(r) for r in ok)
    tpot = stats(rq.tpot_ms(r) for r in ok)
    itl_all = [v for r in ok for v in rq.itl_ms(r)]
    itl = stats(itl_all)
    gaps = stats(v for r in ok for v in rq.chunk_gaps_ms(r))
    e2e = stats(rq.e2e_ms(r) for r in ok)
    queue = stats(rq.queue_ms(r) for r in records)

    goodput = None
    if ctx.slo and window.duration_s:

        def meets(r: RequestRecord) -> bool:
            checks = {"ttft_ms": rq.ttft_ms(r), "tpot_ms": rq.tpot_ms(r), "e2e_ms": rq.e2e_ms(r)}
            return all(
                checks.get(k) is not None and (checks[k] or 0.0) <= v for k, v in ctx.slo.items()
            )

        good = [r for r in ok if meets(r)]
        in_window = [
            r
            for r in good
            if r.t_done_ns is not None
            and span is not None
            and span.start_ns <= r.t_done_ns <= span.end_ns
        ]
        goodput = Goodput(
            slo=ctx.slo,
            requests_per_s=len(in_window) / window.duration_s,
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
            _problem(
                problems,
                "client_floor",
                "warning",
                len(flagged),
                f"{', '.join(flagged)} p50 within {ctx.floor_multiple:g}x the client's own "
                f"delivery delay ({floor.delivery_p50_ms:.3f} ms): not the engine's figure",
            )

    ends_all = [r.t_done_ns for r in records if r.t_done_ns is not None]
    duration = (max(ends_all) - t0) / 1e9 if ends_all else 0.0
    return RunSummary(
        verdict=_verdict(problems, len(ok)),
        problems=problems,
        requests=RequestCounts(
            sent=len(records),
            succeeded=len(ok),
            failed=len(records) - len(ok),
            matched=matched,
            warmup=len(all_records) - len(records),
        ),
        load=Load(
            mode="rate" if ctx.mode == "rate" else "concurrency",
            concurrency=ctx.concurrency,
            rate_rps=ctx.rate_rps,
            achieved_concurrency=achieved,
            workers=ctx.workers,
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
        client_floor=floor,
        prompt_tokens=stats(float(r.prompt_tokens) for r in ok if r.prompt_tokens is not None),
        engine=ctx.engine,
        workload=WorkloadInfo(
            input_tokens=ctx.input_tokens,
            output_tokens=ctx.output_tokens,
            endpoint="chat" if ctx.endpoint == "chat" else "completions",
            prompts=ctx.prompts,
            seed=ctx.seed,
            tokenizer=ctx.tokenizer,
        ),
        started_at=ctx.started_at,
        duration_s=duration,
    )
