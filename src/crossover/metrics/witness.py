"""Second witnesses: every count against another account of the same work.

Output tokens have up to four witnesses: the server's ``usage``, the token-carrying
chunks of the stream (a lower bound: a chunk carries one token or more), the streamed
text re-tokenized (when a tokenizer is at hand), and the engine's own generated-token
counter (when its metrics are read). Prompt tokens have two: ``usage`` and the tool's
own count of the prompt it built. A disagreement beyond the tolerances below is a
problem with its own code; docs/metrics.md ("Witnesses") says why each is an error
(``invalid``) or a warning that leaves the run ``unverified``.

Pure functions of the records (and the engine's counter readings).
"""

from __future__ import annotations

from collections.abc import Callable

from crossover.metrics.context import RunContext
from crossover.metrics.summary import (
    EngineCounter,
    EngineWitness,
    OutputWitnesses,
    Problem,
    PromptWitnesses,
    Witnesses,
    add_problem,
)
from crossover.records.model import RequestRecord

#: a stream witness (the token-carrying chunks, the re-tokenized text) may fall short of
#: usage by at most 1 token + 10%: a server holds back a token that ends inside a UTF-8
#: character and sends it with the next (254 chunks for 256 tokens, seen on llama.cpp),
#: re-encoding merges tokens across their boundaries (a run of single-newline tokens
#: re-encodes as one), and special tokens are left out of the text
STREAM_FEWER_TOKENS = 1
STREAM_FEWER_FRACTION = 0.10
#: the text may re-tokenize to more than usage by at most 2 tokens + 25%: a token holding
#: part of a UTF-8 character decodes to U+FFFD, which re-encodes to more tokens (+6% at
#: most on random-weight Llama-3 8B at 256 tokens; uniform random ids +31% at 16)
TEXT_MORE_TOKENS = 2
TEXT_MORE_FRACTION = 0.25
#: a server may count at most this many prompt tokens fewer than the prompt has
#: (tokenizers can differ at the first word's boundary); it may count more (BOS, template)
PROMPT_FEWER_TOKENS = 1
#: the engine's counter may differ from the claimed total by one token per request
#: (engines differ on counting the token sampled at prefill) plus this fraction
ENGINE_FRACTION = 0.01


def count_with_tokenizer(records: list[RequestRecord], encode: Callable[[str], list[int]]) -> None:
    """Fill missing completion counts from the kept text; mark them estimated."""
    for r in records:
        if r.ok and r.completion_tokens is None and r.text is not None:
            r.completion_tokens = len(encode(r.text))
            r.count_source = "tokenizer"


def retokenize(
    records: list[RequestRecord], encode: Callable[[str], list[int]], done: list[int]
) -> None:
    """Re-tokenize the streamed text where it is a witness: the succeeded requests whose
    chunks fall short of usage (once per request, after the level; elsewhere the chunks
    already agree, and a server's ``/tokenize`` costs a round trip per request). Appends
    to ``done`` the indices it set, so a caller knows them when ``encode`` raises."""
    for i, r in enumerate(records):
        if r.ok and r.text is not None and r.stream_tokens is None and chunks_fall_short(r):
            r.stream_tokens = len(encode(r.text))
            done.append(i)


def _short(claimed: int, witness: int) -> bool:
    """A stream witness falls short of the claimed count beyond the tolerance."""
    return claimed - witness > STREAM_FEWER_TOKENS + STREAM_FEWER_FRACTION * claimed


def chunks_fall_short(r: RequestRecord) -> bool:
    """Usage claims more tokens than the chunks carry at one each, beyond the tolerance:
    only another witness can tell several tokens per chunk from usage over-reporting.
    (A chunk count within the tolerance of usage already agrees with it.)"""
    n = r.completion_tokens
    return n is not None and r.count_source == "usage" and _short(n, len(r.chunk_arrival_ns))


def text_disagrees(r: RequestRecord) -> bool:
    """Where the chunks fall short of usage, the re-tokenized text does not make up the
    difference (or overshoots it) beyond the tolerance."""
    n, m = r.completion_tokens, r.stream_tokens
    if n is None or m is None or not chunks_fall_short(r):
        return False
    return _short(n, m) or m - n > TEXT_MORE_TOKENS + TEXT_MORE_FRACTION * n


def engine_claimed(all_records: list[RequestRecord]) -> int:
    """Output tokens the level's succeeded requests report in usage (warm-up included)."""
    return sum(r.completion_tokens or 0 for r in all_records if r.ok and r.count_source == "usage")


def engine_slack(all_records: list[RequestRecord], claimed: int) -> float:
    """How far the engine's counter may be from ``claimed``."""
    return len(all_records) + ENGINE_FRACTION * claimed


def engine_agrees(all_records: list[RequestRecord], counter: EngineCounter | None) -> bool:
    """The engine's counter matches the claimed total within the tolerance."""
    if counter is None or counter.generated < 0:
        return False
    claimed = engine_claimed(all_records)
    return abs(counter.generated - claimed) <= engine_slack(all_records, claimed)


def check_engine(
    problems: list[Problem], all_records: list[RequestRecord], counter: EngineCounter
) -> None:
    generated = counter.generated
    if generated < 0:
        return  # the counter went back: the engine restarted; nothing to compare
    claimed = engine_claimed(all_records)
    slack = engine_slack(all_records, claimed)
    if generated < claimed - slack:
        add_problem(
            problems,
            "engine_tokens_mismatch",
            "error",
            1,
            f"the engine's own counter ({counter.name}) rose by {generated:.0f} tokens over "
            f"the level while its responses claim {claimed}: usage over-reports the work",
        )
    elif generated > claimed + slack and all(
        r.ok and r.count_source == "usage" for r in all_records
    ):
        add_problem(
            problems,
            "engine_tokens_mismatch",
            "warning",
            1,
            f"the engine's own counter ({counter.name}) rose by {generated:.0f} tokens over "
            f"the level, {generated - claimed:.0f} more than its responses report: another "
            "client was using the server, or usage under-reports",
        )


def check_prompts(problems: list[Problem], ok: list[RequestRecord], ctx: RunContext) -> None:
    offsets = [
        r.prompt_tokens - r.expected_prompt_tokens
        for r in ok
        if r.prompt_tokens is not None and r.expected_prompt_tokens is not None
    ]
    if offsets:
        spread = max(offsets) - min(offsets)
        med = sorted(offsets)[len(offsets) // 2]
        fewer = [o for o in offsets if o < -PROMPT_FEWER_TOKENS]
        if fewer:
            add_problem(
                problems,
                "prompt_tokens_mismatch",
                "error",
                len(fewer),
                f"{len(fewer)} requests report fewer prompt tokens than their prompts have "
                f"(by {-max(fewer)} to {-min(fewer)}): the server truncated the prompts or "
                "under-counts them, and prompt throughput is under-stated",
            )
        elif spread > 1:
            add_problem(
                problems,
                "prompt_tokens_mismatch",
                "error",
                len(offsets),
                f"reported prompt tokens differ from the prompts' counts by {min(offsets)} "
                f"to {max(offsets)}: prompt lengths are not matched",
            )
        elif med > 3:
            add_problem(
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
            add_problem(
                problems,
                "prompt_tokens_mismatch",
                "warning",
                len(pts),
                f"reported prompt tokens range from {min(pts)} to {max(pts)}: "
                "give --tokenizer for exact prompt lengths",
            )


def check_output(problems: list[Problem], ok: list[RequestRecord], engine_ok: bool, n: int) -> None:
    """Output counts against the chunks and the re-tokenized text."""
    lying = [
        r
        for r in ok
        if r.completion_tokens is not None
        and r.count_source == "usage"
        and r.completion_tokens < len(r.chunk_arrival_ns)
    ]
    add_problem(
        problems,
        "usage_mismatch",
        "error",
        len(lying),
        f"{len(lying)} requests report fewer completion tokens than the token-carrying "
        "chunks they streamed",
    )
    contradicted = [r for r in ok if text_disagrees(r)]
    if contradicted:
        r0 = contradicted[0]
        add_problem(
            problems,
            "text_tokens_mismatch",
            "error",
            len(contradicted),
            f"{len(contradicted)} requests' streamed text re-tokenizes to a count usage does "
            f"not match (first: usage {r0.completion_tokens}, text {r0.stream_tokens} tokens "
            f"in {len(r0.chunk_arrival_ns)} chunks): the stream did not carry the work "
            "usage claims",
        )
    multi = [
        r
        for r in ok
        if r.completion_tokens is not None
        and r.completion_tokens > len(r.chunk_arrival_ns)
        and not text_disagrees(r)
    ]
    if not multi:
        return
    unconfirmed = [
        r for r in multi if chunks_fall_short(r) and r.stream_tokens is None and not engine_ok
    ]
    if not unconfirmed:
        add_problem(
            problems,
            "multi_token_chunks",
            "info",
            len(multi),
            f"{len(multi)} requests streamed several tokens per chunk (a second witness "
            "agrees); ITL divides each chunk gap over its tokens and chunk_gap_ms shows the "
            "raw gaps",
        )
    else:
        add_problem(
            problems,
            "multi_token_chunks",
            "warning",
            len(multi),
            f"{len(multi)} requests report more tokens than chunks, {len(unconfirmed)} with "
            "no second witness (no streamed text re-tokenized, no engine counter): several "
            "tokens per chunk cannot be told from usage over-reporting; give --tokenizer",
        )


def witnesses(
    records: list[RequestRecord], all_records: list[RequestRecord], engine: EngineCounter | None
) -> Witnesses:
    """Per-witness totals of the succeeded measured requests (and the engine's counter)."""
    ok = [r for r in records if r.ok]

    def total(values: list[int | None]) -> int | None:
        if not values or any(v is None for v in values):
            return None
        return sum(v for v in values if v is not None)

    asked = [r.stream_tokens for r in ok if r.stream_tokens is not None]
    usage = total([r.completion_tokens if r.count_source == "usage" else None for r in ok])
    out = OutputWitnesses(
        usage=usage,
        stream_chunks=sum(len(r.chunk_arrival_ns) for r in ok) if ok else None,
        stream_text=sum(asked) if asked else None,
        stream_text_requests=len(asked),
    )
    prompts = PromptWitnesses(
        usage=total([r.prompt_tokens for r in ok]),
        prompts=total([r.expected_prompt_tokens for r in ok]),
    )
    eng = None
    if engine is not None:
        eng = EngineWitness(
            counter=engine.name, generated=engine.generated, claimed=engine_claimed(all_records)
        )
    return Witnesses(output_tokens=out, prompt_tokens=prompts, engine=eng)
