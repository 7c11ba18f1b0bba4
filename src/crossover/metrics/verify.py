"""Matched-work verification: the requested length, the finish reason, every count
against its witnesses (``crossover.metrics.witness``), protocol deviations, failures
(within ``--allowed-failures``), failed warm-up requests; and the verdict.

Pure functions of the records and the run's context.
"""

from __future__ import annotations

from collections import Counter

from crossover.metrics.context import RunContext
from crossover.metrics.prompts import check_prompts, check_usage_total, total_disagrees
from crossover.metrics.summary import (
    EngineCounter,
    Problem,
    ProblemCode,
    Severity,
    Verdict,
    add_problem,
)
from crossover.metrics.witness import (
    check_engine,
    check_output,
    engine_agrees,
    output_disagrees,
)
from crossover.records.model import ErrorKind, RequestRecord
from crossover.transport.reuse import STALE_IDLE_S
from crossover.words import plural

#: warnings with these codes make a run ``unverified`` (a count has no second witness
#: that agrees); any ``error`` makes it ``invalid``
UNVERIFIED_CODES = frozenset({"usage_missing", "multi_token_chunks", "engine_tokens_mismatch"})

_ERROR_CODES: dict[ErrorKind, ProblemCode] = {
    "http_error": "http_error",
    "timeout": "timeout",
    "connection_error": "connection_error",
    "stream_truncated": "stream_truncated",
    "malformed": "malformed_event",
    "not_streamed": "not_streamed",
    "content_type": "content_type",
    "error_event": "error_event",
    "undecodable": "undecodable",
    "event_too_large": "event_too_large",
}


def error_code(r: RequestRecord) -> ProblemCode:
    """The problem code of a failed request."""
    assert r.error_kind is not None
    return _ERROR_CODES[r.error_kind]


def verify(
    records: list[RequestRecord], ctx: RunContext, engine: EngineCounter | None = None,
    all_records: list[RequestRecord] | None = None,
) -> tuple[list[Problem], int]:  # fmt: skip
    """Matched-work checks of the measured ``records``; ``all_records`` adds the warm-up
    (the engine's counter covers it). Returns the problems and the matched count."""
    # each request against its own N (a workload shape draws one per request; else all
    # equal ctx.output_tokens)
    every = all_records if all_records is not None else records
    ok = [r for r in records if r.ok]
    problems: list[Problem] = []
    counted = [r for r in ok if r.completion_tokens is not None]
    short = [r for r in counted if (r.completion_tokens or 0) < r.expected_output_tokens]
    long_ = [r for r in counted if (r.completion_tokens or 0) > r.expected_output_tokens]
    ns = {r.expected_output_tokens for r in records} or {ctx.output_tokens}
    what = plural(next(iter(ns)), "token") if len(ns) == 1 else "their own output length"
    if short:
        got = sorted(r.completion_tokens or 0 for r in short)
        gap = sorted(r.expected_output_tokens - (r.completion_tokens or 0) for r in short)
        detail = (
            f"(min {got[0]}, median {got[len(got) // 2]})"
            if len(ns) == 1
            else f"(short by {plural(gap[0], 'token')})"
            if gap[0] == gap[-1]
            else f"(short by {gap[0]} to {gap[-1]} tokens)"
        )
        add_problem(
            problems,
            "short_completion",
            "error",
            len(short),
            f"{plural(len(short), 'request')} generated fewer than {what} {detail}: the engine "
            "ignored the matched-work fields or stopped at EOS",
        )
    add_problem(
        problems,
        "long_completion",
        "error",
        len(long_),
        f"{plural(len(long_), 'request')} generated more than {what}",
    )
    reused = [r for r in records if r.prompt_reused]
    add_problem(
        problems,
        "prompts_reused",
        "warning",
        len(reused),
        f"{plural(len(reused), 'measured request')} sent a prompt the run had sent before (the run "
        "outran the prompts it could build): a prefix-caching engine serves it from its "
        "cache, and their TTFT reads low",
    )
    retried = [r for r in records if r.retries]
    if retried:
        reasons = sorted({why for r in retried for why in r.retry_reasons})
        add_problem(
            problems,
            "requests_retried",
            "info",
            sum(r.retries for r in retried),
            f"{plural(sum(r.retries for r in retried), 'retry', 'retries')} of "
            f"{plural(len(retried), 'request')}, each "
            "after a reused connection closed before a response, the server having closed "
            f"it before the request was written or after it idled {STALE_IDLE_S:g} s or "
            f"more ({'; '.join(reasons)}): a keep-alive connection the server had closed; "
            "each request's figures are its served attempt's",
        )
    closing = [r for r in records if r.connection_close]
    add_problem(
        problems,
        "server_closes_connections",
        "info",
        len(closing),
        "the server closed its connection after each streamed response though it kept it "
        f"alive by its headers: {plural(len(closing), 'request')} went with Connection: close, "
        "each on a connection of its own (none was reused into that close; a TCP connect "
        "is in their TTFT, as it would be after any close)",
    )
    if ctx.expects_finish_reason:
        bad = [r for r in ok if r.finish_reason != "length"]
        reasons = sorted({str(r.finish_reason) for r in bad})
        add_problem(
            problems,
            "finish_reason",
            "error",
            len(bad),
            f"{plural(len(bad), 'request')} ended with finish_reason {', '.join(reasons)} "
            "instead of 'length'",
        )
    no_prompt = [r for r in ok if r.count_source == "usage" and r.prompt_tokens is None]
    whose = plural(len(no_prompt), "request's", "requests'")
    add_problem(
        problems,
        "usage_missing",
        "warning",
        len(no_prompt),
        f"{whose} usage has no prompt_tokens: total tok/s counts no prompt tokens for "
        "them, and the prompt count has no witness",
    )
    no_usage = [r for r in ok if r.count_source != "usage"]
    if no_usage:
        how = (
            "counted with the tokenizer (estimated)"
            if any(r.count_source == "tokenizer" for r in no_usage)
            else "not counted: no tokenizer"
        )
        add_problem(
            problems,
            "usage_missing",
            "warning",
            len(no_usage),
            f"{plural(len(no_usage), 'request')} had no usage from the server; tokens {how}",
        )
    engine_ok = engine_agrees(every, engine)
    check_output(problems, ok, engine, engine_ok)
    if engine is not None:
        check_engine(problems, every, engine)
    check_prompts(problems, ok, ctx, [r for r in every if r.warmup])
    check_usage_total(problems, ok)
    extra = [r for r in ok if r.other_choice_events]
    add_problem(
        problems,
        "extra_choices",
        "error",
        len(extra),
        f"{plural(len(extra), 'response')} streamed choices that were never asked for (an "
        f"index other than 0, in {plural(sum(r.other_choice_events for r in extra), 'event')}): "
        "the server did other work beside the one completion asked for, and its usage may count it",
    )
    finished = [r for r in ok if r.after_finish_chunks]
    add_problem(
        problems,
        "data_after_finish",
        "error",
        len(finished),
        f"{plural(len(finished), 'response')} streamed tokens after their choice's finish "
        f"reason ({plural(sum(r.after_finish_chunks for r in finished), 'chunk')}): the "
        "completion had ended where the server said it did, and went on",
    )
    late = [r for r in ok if r.after_done_events]
    add_problem(
        problems,
        "data_after_done",
        "error",
        len(late),
        f"{plural(len(late), 'response')} went on after [DONE] "
        f"({plural(sum(r.after_done_events for r in late), 'event')}): their figures stop at "
        "[DONE], what came after was not read",
    )
    failed: dict[ProblemCode, list[RequestRecord]] = {}
    for r in records:
        if r.error_kind is not None:
            failed.setdefault(error_code(r), []).append(r)
    n_failed = sum(len(v) for v in failed.values())
    sev: Severity = "error" if n_failed > ctx.allowed_failures else "warning"
    for code, rs in sorted(failed.items()):
        sample = rs[0].error or code
        failed_n = f"{plural(len(rs), 'request')} failed"
        add_problem(problems, code, sev, len(rs), f"{failed_n}; first: {sample}")
    _verify_warmup(problems, every)
    matched = sum(
        1
        for r in ok
        if r.completion_tokens == r.expected_output_tokens
        and (r.finish_reason == "length" or not ctx.expects_finish_reason)
        and not output_disagrees(r)
        and not total_disagrees(r)
        and not r.other_choice_events
        and not r.after_finish_chunks
        and not r.after_done_events
    )
    return problems, matched


def is_warmup(r: RequestRecord) -> bool:
    """A warm-up request the user asked for (the prompt probe, index < 0, is not one: it
    failing only means there is no probe)."""
    return r.warmup and r.index >= 0


def _verify_warmup(problems: list[Problem], all_records: list[RequestRecord]) -> None:
    warm = [r for r in all_records if is_warmup(r)]
    failed = [r for r in warm if not r.ok]
    if not failed:
        return
    kinds = Counter(error_code(r) for r in failed)
    breakdown = ", ".join(f"{code} {k}" for code, k in sorted(kinds.items()))
    add_problem(
        problems,
        "warmup_failed",
        "warning",
        len(failed),
        f"{len(failed)} of {len(warm)} warm-up requests failed ({breakdown}); first: "
        f"{failed[0].error}: the server may not have been warm when measurement began",
    )


def verdict(problems: list[Problem], succeeded: int) -> Verdict:
    """``invalid`` on any error (or nothing succeeded); ``unverified`` when a count has no
    agreeing second witness (a warning in ``UNVERIFIED_CODES``); else ``valid``."""
    if succeeded == 0 or any(p.severity == "error" for p in problems):
        return "invalid"
    if any(p.severity == "warning" and p.code in UNVERIFIED_CODES for p in problems):
        return "unverified"
    return "valid"
