"""Second witnesses of the output count: every count against every other account of the
same work that the run has.

Output tokens have up to five witnesses: the server's ``usage``, the token-carrying
chunks of the stream (a lower bound: a chunk carries one token or more), the streamed
text re-tokenized (whenever a tokenizer is at hand: every request, every time), the
logprobs the server sent (when it sent them: never asked for), and the engine's own
generated-token counter (when its metrics are read). A disagreement beyond the
tolerances below is a problem with its own code; docs/metrics.md ("Witnesses") says why
each is an error (``invalid``) or a warning that leaves the run ``unverified``, and
every message names the witness that agreed or disagreed. Prompt tokens and usage's
own total are in ``crossover.metrics.prompts``.

Pure functions of the records (and the engine's counter readings).
"""

from __future__ import annotations

from collections.abc import Callable

from crossover.metrics.summary import (
    EngineCounter,
    OutputWitnesses,
    Problem,
    WitnessCheck,
    add_problem,
)
from crossover.records.model import RequestRecord
from crossover.words import plural, verb

#: the token-carrying chunks may fall short of usage by at most 1 token + 10%: a chunk is
#: a lower bound (a server holds back a token that ends inside a UTF-8 character and
#: sends it with the next: 254 chunks for 256 tokens, seen on llama.cpp; SGLang sends
#: several tokens per chunk). Within it the chunks alone are only ``info``, and the
#: verdict line says the output count rests on the server's word
STREAM_FEWER_TOKENS = 1
STREAM_FEWER_FRACTION = 0.10
#: the re-tokenized text (chunk by chunk where there are chunks) may fall short of usage
#: by 1 token (a special token left out of the text) + 0.5% (merges of tokens in a chunk
#: that carried several) + the tokens held back inside characters: at most one per UTF-8
#: continuation byte of the text's characters, and at most as many as usage exceeds the
#: chunks with text (vLLM sends ``""`` for a token holding a character's first bytes,
#: llama.cpp sends it with the next; re-encoded, the character is one token). Measured:
#: every
#: text of the H200 prefix sweep (vLLM, random-weight Llama-3 8B shape, 2,048 texts of
#: 128 tokens, down to 0.984 of usage as a whole) falls within 1 token + that
#: allowance; a 2% overstatement is caught from N = 64 (2 tokens > 1.33; at 100, 2 >
#: 1.51) on text with no held-back tokens
TEXT_FEWER_TOKENS = 1
TEXT_FEWER_FRACTION = 0.005
#: the text may re-tokenize to more than usage by at most 2 tokens + 25%, and 2 more per
#: U+FFFD in it: a token holding part of a UTF-8 character decodes to U+FFFD, which
#: re-encodes to more tokens (+6% at most on random-weight Llama-3 8B at 256 tokens;
#: uniform random ids +31% at 16)
TEXT_MORE_TOKENS = 2
TEXT_MORE_FRACTION = 0.25
TEXT_MORE_PER_REPLACEMENT = 2
#: each chunk's text is re-tokenized on its own wherever the stream has more than one
#: chunk (re-encoding a whole text merges tokens across chunk boundaries, a run of
#: single-newline tokens as one, or splits them: a random-weight model's tokens up to
#: +16% at 128 tokens on the H200's Llama-3-shape vLLM, and at most +2% chunk by chunk),
#: and that count is the witness. With a server's ``/tokenize`` (a round trip per chunk)
#: at most this many chunks per level; beyond it the whole text is the witness
CHUNK_ENCODES = 20_000
#: the engine's counter may fall short of the claimed total by at most 1 token + 0.5%:
#: on the H200 (vLLM and SGLang, 122 levels of the committed sweeps: vllm-a, vllm-b,
#: sglang-a, moe, prefix) it equalled the claim on every level, so a 2% overstatement
#: is caught at any N from 64 (at N = 64 one request's 2 tokens > 1.33)
ENGINE_FEWER_TOKENS = 1
ENGINE_FEWER_FRACTION = 0.005
#: it may exceed the claim by one token per request plus this fraction before that is a
#: warning (a failed request's tokens are in the counter and in no usage; another client)
ENGINE_FRACTION = 0.01


def count_with_tokenizer(records: list[RequestRecord], encode: Callable[[str], list[int]]) -> None:
    """Fill missing completion counts from the kept text; mark them estimated."""
    for r in records:
        if r.ok and r.completion_tokens is None and r.text is not None:
            r.completion_tokens = len(encode(r.text))
            r.count_source = "tokenizer"


def chunk_texts(r: RequestRecord) -> list[str]:
    """The text of each token-carrying chunk, cut from the kept text by their lengths."""
    text = r.text or ""
    out: list[str] = []
    pos = 0
    for n in r.chunk_chars:
        out.append(text[pos : pos + n])
        pos += n
    return out


def retokenize(
    records: list[RequestRecord],
    encode: Callable[[str], list[int]],
    done: list[int],
    chunk_budget: int | None = CHUNK_ENCODES,
    count_many: Callable[[list[str]], list[int]] | None = None,
) -> None:
    """Re-tokenize the streamed text of every succeeded request whose count came from
    usage (once per request, after the level), and where the stream has more than one
    chunk, each chunk's text on its own (``chunk_budget``: at most this many chunk
    encodes, None for no limit: a local tokenizer). Appends to ``done`` the indices it
    set, so a caller knows them when ``encode`` raises.

    ``count_many`` (a local tokenizer's ``len(encode(t))`` of many texts at once) counts
    every text of the level in one call instead, the same counts; where that call raises,
    each request is counted on its own with ``encode`` (:func:`_one_by_one`): those it
    counts keep their counts, only those it fails on lack them."""
    todo: list[tuple[int, RequestRecord, list[str] | None]] = []
    for i, r in enumerate(records):
        n = r.completion_tokens
        if not r.ok or r.text is None or r.stream_tokens is not None:
            continue
        if n is None or r.count_source != "usage":
            continue
        chunks = None
        n_chunks = len(r.chunk_chars)
        if n_chunks > 1 and (chunk_budget is None or n_chunks <= chunk_budget):
            if chunk_budget is not None:
                chunk_budget -= n_chunks
            chunks = [t for t in chunk_texts(r) if t]
        todo.append((i, r, chunks))
    if count_many is not None and todo:
        texts: list[str] = []
        for _, r, chunks in todo:
            texts.append(r.text or "")
            texts += chunks or []
        try:
            counts = iter(count_many(texts))
        except (OSError, ValueError):
            _one_by_one(todo, encode, done)
            return
        for i, r, chunks in todo:
            r.stream_tokens = next(counts)
            if chunks is not None:
                r.chunk_text_tokens = sum(next(counts) for _ in chunks)
            done.append(i)
        return
    for i, r, chunks in todo:
        r.stream_tokens = len(encode(r.text or ""))
        done.append(i)
        if chunks is not None:
            r.chunk_text_tokens = sum(len(encode(t)) for t in chunks)


def _one_by_one(
    todo: list[tuple[int, RequestRecord, list[str] | None]],
    encode: Callable[[str], list[int]],
    done: list[int],
) -> None:
    """A failed batch's requests counted each on its own (a local tokenizer: no round
    trip to wait for): one whose text or chunks ``encode`` refuses is left without the
    text witness and the rest are counted; the first refusal is raised at the end."""
    failed: OSError | ValueError | None = None
    for i, r, chunks in todo:
        try:
            whole = len(encode(r.text or ""))
            parts = None if chunks is None else sum(len(encode(t)) for t in chunks)
        except (OSError, ValueError) as exc:
            failed = failed or exc
            continue
        r.stream_tokens = whole
        if parts is not None:
            r.chunk_text_tokens = parts
        done.append(i)
    if failed is not None:
        raise failed


def _short(claimed: int, witness: int) -> bool:
    """The chunk count falls short of the claimed count beyond its tolerance."""
    return claimed - witness > STREAM_FEWER_TOKENS + STREAM_FEWER_FRACTION * claimed


def _claimed(r: RequestRecord) -> int | None:
    """The count usage claims (None: no usage, nothing for a witness to check)."""
    return r.completion_tokens if r.count_source == "usage" else None


def held_back(r: RequestRecord) -> int:
    """Tokens that may hide inside the text's characters: a token holding a character's
    first bytes is streamed with no text of its own (vLLM's ``""``) or with the next
    (llama.cpp), and the character re-encodes to fewer tokens. At most one per UTF-8
    continuation byte, and at most as many as usage exceeds the chunks with text."""
    n = _claimed(r)
    if n is None:
        return 0
    extra = n - (len(r.chunk_chars) - r.chunk_chars.count(0))  # no text re-encodes to 0
    if extra <= 0:
        return 0
    text = r.text or ""
    continuation = len(text.encode("utf-8")) - len(text)  # each character's bytes past one
    return min(extra, continuation)


def text_slack_below(r: RequestRecord) -> float:
    """How far the re-tokenized text may fall short of usage (``TEXT_FEWER_*``)."""
    n = _claimed(r) or 0
    return TEXT_FEWER_TOKENS + TEXT_FEWER_FRACTION * n + held_back(r)


def text_witness(r: RequestRecord) -> int | None:
    """The re-tokenized count that witnesses the request: chunk by chunk where it was
    taken (a chunk boundary is a token boundary), else the whole text."""
    return r.chunk_text_tokens if r.chunk_text_tokens is not None else r.stream_tokens


def chunks_fall_short(r: RequestRecord) -> bool:
    """Usage claims more tokens than the chunks carry at one each, beyond the tolerance:
    the chunks alone cannot tell several tokens per chunk from usage over-reporting."""
    n = _claimed(r)
    return n is not None and _short(n, len(r.chunk_arrival_ns))


def chunks_agree(r: RequestRecord) -> bool:
    """One token per chunk matches usage within the tolerance (never above it)."""
    n = _claimed(r)
    c = len(r.chunk_arrival_ns)
    return n is not None and c <= n and not _short(n, c)


def _over(r: RequestRecord, witness: int) -> bool:
    """``witness`` tokens are more than usage claims, beyond what re-encoding adds."""
    n = _claimed(r)
    if n is None:
        return False
    slack = TEXT_MORE_TOKENS + TEXT_MORE_FRACTION * n
    slack += TEXT_MORE_PER_REPLACEMENT * (r.text or "").count("\ufffd")
    return witness - n > slack


def text_over(r: RequestRecord) -> bool:
    """The re-tokenized text carries more tokens than usage claims, beyond what
    re-encoding adds (U+FFFD): chunk by chunk where it was taken (a server that streams
    more than it claims carries the extra tokens in its chunks too, while a chunk
    holding one token re-encodes to one), else as a whole."""
    m = text_witness(r)
    return m is not None and _over(r, m)


def text_short(r: RequestRecord) -> bool:
    """The re-tokenized text carries fewer tokens than usage claims, beyond
    ``text_slack_below``: chunk by chunk where it was taken, else as a whole."""
    n, m = _claimed(r), text_witness(r)
    return n is not None and m is not None and n - m > text_slack_below(r)


def text_disagrees(r: RequestRecord) -> bool:
    """The re-tokenized text contradicts usage, beyond the tolerance either way."""
    return text_short(r) or text_over(r)


def text_agrees(r: RequestRecord) -> bool:
    return r.stream_tokens is not None and _claimed(r) is not None and not text_disagrees(r)


def logprobs_disagree(r: RequestRecord) -> bool:
    """The logprobs (or token ids) the server sent account for a count other than
    usage's: entries are tokens, one per generated token (vLLM and SGLang send one for a
    token with no text too), so they must equal it exactly."""
    n, lp = _claimed(r), r.logprob_tokens
    return n is not None and lp is not None and lp != n


def logprobs_agree(r: RequestRecord) -> bool:
    return r.logprob_tokens is not None and _claimed(r) is not None and not logprobs_disagree(r)


def engine_claimed(all_records: list[RequestRecord]) -> int:
    """Output tokens the level's succeeded requests report in usage (warm-up included)."""
    return sum(r.completion_tokens or 0 for r in all_records if r.ok and r.count_source == "usage")


def engine_slack(all_records: list[RequestRecord], claimed: int) -> float:
    """How far the engine's counter may be above ``claimed``."""
    return len(all_records) + ENGINE_FRACTION * claimed


def engine_slack_below(claimed: int) -> float:
    """How far the engine's counter may be below ``claimed``."""
    return ENGINE_FEWER_TOKENS + ENGINE_FEWER_FRACTION * claimed


def engine_witnesses(counter: EngineCounter | None) -> bool:
    """The counter can witness the level: read, never gone back, no series reset."""
    return counter is not None and counter.generated >= 0 and not counter.resets


def engine_agrees(all_records: list[RequestRecord], counter: EngineCounter | None) -> bool:
    """The engine's counter matches the claimed total within the tolerance."""
    if counter is None or not engine_witnesses(counter):
        return False
    claimed = engine_claimed(all_records)
    generated = counter.generated
    return (
        claimed - engine_slack_below(claimed)
        <= generated
        <= claimed + engine_slack(all_records, claimed)
    )


def check_engine(
    problems: list[Problem], all_records: list[RequestRecord], counter: EngineCounter
) -> None:
    generated = counter.generated
    if counter.resets:
        add_problem(
            problems,
            "engine_counter_reset",
            "info",
            counter.resets,
            f"the engine's counter ({counter.name}) was reset during the level "
            f"({counter.resets} series went down or were created again): the tokens "
            "before each reset are partly lost, so it is no witness of this level",
        )
        return
    if generated < 0:
        return  # the counter went back: the engine restarted; nothing to compare
    claimed = engine_claimed(all_records)
    slack = engine_slack(all_records, claimed)
    if generated < claimed - engine_slack_below(claimed):
        add_problem(
            problems,
            "engine_tokens_mismatch",
            "error",
            1,
            f"the engine's own counter ({counter.name}) rose by "
            f"{plural(generated, 'token', fmt='.0f')} over the level while its responses "
            f"claim {claimed}: usage over-reports the work",
        )
    elif generated > claimed + slack and all(
        r.ok and r.count_source == "usage" for r in all_records
    ):
        add_problem(
            problems,
            "engine_tokens_mismatch",
            "warning",
            1,
            f"the engine's own counter ({counter.name}) rose by "
            f"{plural(generated, 'token', fmt='.0f')} over the level, "
            f"{generated - claimed:.0f} more than its responses report: another client was "
            "using the server, or usage under-reports",
        )


def output_disagrees(r: RequestRecord) -> bool:
    """A witness of this request's output count contradicts its usage."""
    return text_disagrees(r) or logprobs_disagree(r)


def check_output(
    problems: list[Problem], ok: list[RequestRecord], engine: EngineCounter | None, engine_ok: bool
) -> None:
    """Output counts against the chunks, the re-tokenized text and the logprobs."""
    lying = [r for r in ok if (n := _claimed(r)) is not None and n < len(r.chunk_arrival_ns)]
    add_problem(
        problems,
        "usage_mismatch",
        "error",
        len(lying),
        f"{plural(len(lying), 'request')} {verb(len(lying), 'reports', 'report')} fewer "
        "completion tokens than the token-carrying chunks they streamed",
    )
    contradicted = [r for r in ok if text_disagrees(r)]
    if contradicted:
        r0 = contradicted[0]
        whose = plural(len(contradicted), "request's", "requests'")
        by_chunk = (
            f", {r0.chunk_text_tokens} chunk by chunk" if r0.chunk_text_tokens is not None else ""
        )
        add_problem(
            problems,
            "text_tokens_mismatch",
            "error",
            len(contradicted),
            f"{whose} streamed text re-tokenizes to a count usage does not match "
            f"(first: usage {r0.completion_tokens}, text {r0.stream_tokens} tokens "
            f"as a whole{by_chunk}, in {plural(len(r0.chunk_arrival_ns), 'chunk')}; at most "
            f"{text_slack_below(r0):.1f} fewer agree): the stream did not carry the work "
            "usage claims",
        )
    lp_bad = [r for r in ok if logprobs_disagree(r)]
    if lp_bad:
        r0 = lp_bad[0]
        whose = plural(len(lp_bad), "request's", "requests'")
        add_problem(
            problems,
            "logprobs_mismatch",
            "error",
            len(lp_bad),
            f"{whose} logprobs (or token ids) account for a count usage does not match "
            f"(first: usage {r0.completion_tokens}, logprobs "
            f"{plural(r0.logprob_tokens or 0, 'token')}; they must be equal): the server's "
            "own per-token record contradicts its usage",
        )
    multi = [
        r
        for r in ok
        if (n := _claimed(r)) is not None
        and n > len(r.chunk_arrival_ns)
        and not output_disagrees(r)
    ]
    if not multi:
        return
    by_text = sum(1 for r in multi if text_agrees(r))
    by_lp = sum(1 for r in multi if logprobs_agree(r))
    within = sum(1 for r in multi if not chunks_fall_short(r))
    unconfirmed = [
        r
        for r in multi
        if chunks_fall_short(r) and not text_agrees(r) and not logprobs_agree(r) and not engine_ok
    ]
    named = []
    if by_text:
        named.append(f"the re-tokenized text agrees for {by_text}")
    if by_lp:
        named.append(f"the logprobs agree for {by_lp}")
    if engine_ok and engine is not None:
        named.append(f"the engine's counter ({engine.name}) agrees with the level's total")
    if within:
        alone = "" if by_text or by_lp or engine_ok else ", and no other witness was asked"
        named.append(
            f"{within} {verb(within, 'is', 'are')} within the chunk count's tolerance "
            f"(1 token + 10% more than chunks){alone}"
        )
    if not unconfirmed:
        add_problem(
            problems,
            "multi_token_chunks",
            "info",
            len(multi),
            f"{plural(len(multi), 'request')} {verb(len(multi), 'reports', 'report')} more tokens "
            "than token-carrying chunks: "
            f"{'; '.join(named)}. ITL spreads each delivery gap over its tokens and "
            "chunk_gap_ms shows the raw gaps",
        )
    else:
        add_problem(
            problems,
            "multi_token_chunks",
            "warning",
            len(multi),
            f"{plural(len(multi), 'request')} {verb(len(multi), 'reports', 'report')} more tokens "
            f"than chunks, {len(unconfirmed)} beyond "
            "the chunk count's tolerance with no second witness (no streamed text "
            "re-tokenized, no logprobs, no engine counter): several tokens per chunk cannot "
            "be told from usage over-reporting; give --tokenizer",
        )


def output_witnesses(ok: list[RequestRecord]) -> OutputWitnesses:
    """Output tokens of the succeeded measured requests, summed per witness."""

    def total(values: list[int | None]) -> int | None:
        if not values or any(v is None for v in values):
            return None
        return sum(v for v in values if v is not None)

    asked = [r.stream_tokens for r in ok if r.stream_tokens is not None]
    lps = [r.logprob_tokens for r in ok if r.logprob_tokens is not None]
    return OutputWitnesses(
        usage=total([_claimed(r) for r in ok]),
        stream_chunks=sum(len(r.chunk_arrival_ns) for r in ok) if ok else None,
        stream_text=sum(asked) if asked else None,
        stream_text_requests=len(asked),
        logprobs=sum(lps) if lps else None,
        logprobs_requests=len(lps),
    )


def output_checks(
    ok: list[RequestRecord], all_records: list[RequestRecord], engine: EngineCounter | None
) -> list[WitnessCheck]:
    """Which witnesses of the output count were asked, and how many agreed with usage."""
    claimed = [r for r in ok if _claimed(r) is not None]
    checks = [
        WitnessCheck(
            count="output_tokens",
            witness="stream_chunks",
            asked=len(claimed),
            agreed=sum(1 for r in claimed if chunks_agree(r)),
            disagreed=sum(
                1 for r in claimed if (r.completion_tokens or 0) < len(r.chunk_arrival_ns)
            ),
        )
    ]
    text = [r for r in claimed if r.stream_tokens is not None]
    if text:
        checks.append(
            WitnessCheck(
                count="output_tokens",
                witness="stream_text",
                asked=len(text),
                agreed=sum(1 for r in text if not text_disagrees(r)),
                disagreed=sum(1 for r in text if text_disagrees(r)),
            )
        )
    lps = [r for r in claimed if r.logprob_tokens is not None]
    if lps:
        checks.append(
            WitnessCheck(
                count="output_tokens",
                witness="logprobs",
                asked=len(lps),
                agreed=sum(1 for r in lps if not logprobs_disagree(r)),
                disagreed=sum(1 for r in lps if logprobs_disagree(r)),
            )
        )
    if engine is not None and engine_witnesses(engine):
        agreed = engine_agrees(all_records, engine)
        checks.append(
            WitnessCheck(
                count="output_tokens",
                witness="engine_counter",
                asked=1,
                agreed=int(agreed),
                disagreed=int(not agreed),
            )
        )
    return checks
