"""Second witnesses on hand-made records: the tolerances at their edges, the verdict each
disagreement gives, and the per-witness totals."""

from __future__ import annotations

import pytest

from crossover.metrics.run import RunContext, summarize
from crossover.metrics.summary import EngineCounter, EngineInfo
from crossover.metrics.verify import UNVERIFIED_CODES, verdict
from crossover.metrics.witness import (
    chunks_fall_short,
    count_with_tokenizer,
    engine_agrees,
    held_back,
    logprobs_disagree,
    retokenize,
    text_disagrees,
)
from crossover.records.model import RequestRecord

N = 100
MS = 1_000_000


def ctx(**kw: object) -> RunContext:
    base: dict[str, object] = {
        "mode": "concurrency",
        "concurrency": 2,
        "output_tokens": N,
        "endpoint": "completions",
        "engine": EngineInfo(name="x", url="http://h", model="m"),
        "started_at": "now",
        "input_tokens": 10,
    }
    base.update(kw)
    return RunContext.model_validate(base)


def rec(index: int = 0, n: int = N, chunks: int = N, **kw: object) -> RequestRecord:
    """A request claiming ``n`` tokens in ``chunks`` chunks (1 ms apart), for a 10-token
    prompt that the server counts as 11."""
    send = index * 1000 * MS
    arrivals = [send + 100 * MS + i * MS for i in range(chunks)]
    base: dict[str, object] = {
        "index": index,
        "expected_output_tokens": n,
        "expected_prompt_tokens": 10,
        "t_send_ns": send,
        "t_first_ns": arrivals[0],
        "t_last_ns": arrivals[-1],
        "t_done_ns": arrivals[-1] + 1,
        "chunk_arrival_ns": arrivals,
        "chunk_chars": [1] * chunks,
        "completion_tokens": n,
        "prompt_tokens": 11,
        "count_source": "usage",
        "finish_reason": "length",
        "saw_done": True,
    }
    base.update(kw)
    return RequestRecord.model_validate(base)


def codes(problems: list[object]) -> dict[str, str]:
    return {p.code: p.severity for p in problems}  # type: ignore[attr-defined]


# --- the streamed text ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text_tokens", "disagrees"),
    [
        (100, False),
        (99, False),  # 1 fewer: within 1 + 0.5%
        (98, True),  # 2 fewer
        (127, False),  # 27 more: within 2 + 25%
        (128, True),
    ],
)
def test_text_tolerance_where_the_chunks_fall_short(text_tokens: int, disagrees: bool) -> None:
    r = rec(chunks=50, stream_tokens=text_tokens)  # 100 claimed in 50 chunks
    assert text_disagrees(r) is disagrees


@pytest.mark.parametrize("n", [64, 65, 99, 100, 128, 200, 256, 1000, 1024])
def test_a_two_percent_overstatement_is_caught_from_64_tokens(n: int) -> None:
    """The stream carries ``n`` tokens (one per chunk, re-encoding to one each) and usage
    claims 2% more: chunk by chunk the text is the witness, and it is short."""
    claimed = -(-n * 102 // 100)  # 2% more, rounded up to a whole token
    honest = rec(n=n, chunks=n, stream_tokens=n, chunk_text_tokens=n, text="a" * n)
    lie = rec(n=claimed, chunks=n, stream_tokens=n, chunk_text_tokens=n, text="a" * n)
    assert not text_disagrees(honest)
    assert text_disagrees(lie)
    s = summarize([lie], ctx(output_tokens=claimed, concurrency=1))
    assert s.verdict == "invalid"
    assert codes(s.problems)["text_tokens_mismatch"] == "error"


def test_tokens_held_back_inside_characters_are_allowed_only_where_the_text_has_them() -> None:
    """vLLM sends ``""`` for a token holding a character's first bytes; the character,
    re-encoded, is one token. Cyrillic text (2 bytes a character) may hide as many tokens
    as usage exceeds the chunks; ASCII text of the same shape may not."""
    cyr = "\u0416" * 58  # 58 characters of 2 bytes: 58 continuation bytes
    honest = rec(n=64, chunks=58, stream_tokens=58, chunk_text_tokens=58, text=cyr)
    assert held_back(honest) == 6 and not text_disagrees(honest)
    ascii_ = rec(n=64, chunks=58, stream_tokens=58, chunk_text_tokens=58, text="a" * 58)
    assert held_back(ascii_) == 0 and text_disagrees(ascii_)
    # vLLM with logprobs: the "" chunks are chunks (their own arrival), and still hold
    # their character's first bytes
    split = rec(n=64, chunks=64, stream_tokens=32, chunk_text_tokens=32, text=cyr[:32])
    split.chunk_chars = [0, 1] * 32
    assert held_back(split) == 32 and not text_disagrees(split)
    # no more than usage exceeds the chunks: one chunk per token leaves nothing to hide
    padded = rec(n=66, chunks=66, stream_tokens=64, chunk_text_tokens=64, text=cyr)
    assert held_back(padded) == 0 and text_disagrees(padded)


def test_the_chunk_by_chunk_count_is_the_witness_where_it_was_taken() -> None:
    """Random-weight tokens re-encoded as one string split across their boundaries (+16%
    on the H200): the whole text would cover a lie of 10%, the chunks do not."""
    r = rec(n=110, chunks=100, stream_tokens=114, chunk_text_tokens=100, text="a" * 100)
    assert text_disagrees(r)


@pytest.mark.parametrize("chunks", [100, 89])
def test_the_text_is_asked_where_the_chunks_already_agree(chunks: int) -> None:
    """One token per chunk is no proof: chunks that carry whitespace alone match usage in
    number while the text carries fewer tokens. Every count is checked against the text."""
    r = rec(chunks=chunks, stream_tokens=40)
    assert not chunks_fall_short(r)
    assert text_disagrees(r)
    s = summarize([r], ctx(concurrency=1))
    assert s.verdict == "invalid"
    assert codes(s.problems)["text_tokens_mismatch"] == "error"


def test_text_merged_across_chunk_boundaries_is_rescued_chunk_by_chunk() -> None:
    """A run of newline tokens re-encodes as one token; each chunk on its own does not."""
    r = rec(chunks=100, stream_tokens=40, chunk_text_tokens=100)
    assert not text_disagrees(r)
    s = summarize([r], ctx(concurrency=1))
    assert s.verdict == "valid", s.problems
    text = {c.witness: c for c in s.witnesses.checks}["stream_text"]
    assert (text.asked, text.agreed, text.disagreed) == (1, 1, 0)


def test_replacement_characters_allow_more_text_tokens() -> None:
    """A token holding part of a UTF-8 character decodes to U+FFFD, which re-encodes to
    more tokens: 2 more allowed per U+FFFD, beyond 2 + 25%."""
    assert text_disagrees(rec(n=16, chunks=16, stream_tokens=25, text="x"))  # 9 > 2 + 4
    assert not text_disagrees(rec(n=16, chunks=16, stream_tokens=25, text="\ufffd" * 2))


def test_small_counts_keep_a_token_of_slack() -> None:
    assert not text_disagrees(rec(n=4, chunks=3, stream_tokens=3))
    assert text_disagrees(rec(n=4, chunks=2, stream_tokens=2))  # half of 4: caught


def test_text_is_no_witness_of_a_count_it_made() -> None:
    r = rec(chunks=50, stream_tokens=10, count_source="tokenizer")
    assert not text_disagrees(r)


def test_retokenize_every_usage_count_once_and_chunk_by_chunk_where_there_are_chunks() -> None:
    short = rec(0, n=3, chunks=1, text=" a b c", chunk_chars=[6])
    agreed = rec(1, n=3, chunks=3, text=" a b c", chunk_chars=[2, 2, 2])
    merged = rec(2, n=3, chunks=3, text="\n\n\n", chunk_chars=[1, 1, 1])
    estimated = rec(3, n=3, chunks=1, text=" a b c", count_source="tokenizer")
    failed = rec(4, n=3, chunks=1, text=" a", error_kind="timeout")
    calls: list[str] = []

    def encode(text: str) -> list[int]:  # a run of newlines is one token, as in a BPE
        calls.append(text)
        return list(range(len(text.split()) or (1 if text else 0)))

    done: list[int] = []
    recs = [short, agreed, merged, estimated, failed]
    retokenize(recs, encode, done)
    retokenize(recs, encode, done)
    assert done == [0, 1, 2]
    assert calls == [" a b c", " a b c", " a", " b", " c", "\n\n\n", "\n", "\n", "\n"]
    assert (short.stream_tokens, agreed.stream_tokens, merged.stream_tokens) == (3, 3, 1)
    assert (short.chunk_text_tokens, agreed.chunk_text_tokens) == (None, 3)  # one chunk: none
    assert merged.chunk_text_tokens == 3 and not text_disagrees(merged)
    assert estimated.stream_tokens is None and failed.stream_tokens is None


def test_a_server_tokenizer_stops_encoding_chunks_at_the_budget() -> None:
    recs = [rec(i, n=3, chunks=3, text="abc", chunk_chars=[1, 1, 1]) for i in range(3)]
    done: list[int] = []
    retokenize(recs, lambda t: list(t), done, chunk_budget=7)  # type: ignore[arg-type]
    assert [r.chunk_text_tokens for r in recs] == [3, 3, None]


def test_whitespace_chunks_are_no_tokens_chunk_by_chunk_either() -> None:
    """As many chunks as usage claims, half of them whitespace: the word tokenizer counts
    no token in a space, as a whole and chunk by chunk."""
    r = rec(0, n=4, chunks=4, text=" a  b ", chunk_chars=[2, 1, 2, 1])
    done: list[int] = []
    retokenize([r], lambda t: t.split(), done)  # type: ignore[arg-type,return-value]
    assert (r.stream_tokens, r.chunk_text_tokens) == (2, 2)
    assert text_disagrees(r)


def test_count_with_tokenizer_fills_only_missing_counts() -> None:
    r = rec(0, n=3, chunks=3, text=" a b c d")
    r.completion_tokens, r.count_source = None, None
    count_with_tokenizer([r], lambda t: t.split())  # type: ignore[arg-type,return-value]
    assert (r.completion_tokens, r.count_source) == (4, "tokenizer")


def test_text_disagreement_is_an_error_and_unmatches_the_request() -> None:
    recs = [rec(0, n=3, chunks=3, stream_tokens=3), rec(1, n=3, chunks=1, stream_tokens=1)]
    s = summarize(recs, ctx(output_tokens=3))
    assert s.verdict == "invalid"
    assert codes(s.problems) == {"text_tokens_mismatch": "error"}
    assert s.requests.matched == 1


# --- multi-token chunks -------------------------------------------------------------------


def test_multi_token_chunks_agreed_by_the_text_are_information() -> None:
    s = summarize([rec(n=3, chunks=1, stream_tokens=3)], ctx(output_tokens=3, concurrency=1))
    assert s.verdict == "valid"
    assert codes(s.problems) == {"multi_token_chunks": "info"}


def test_multi_token_chunks_with_no_second_witness_leave_the_run_unverified() -> None:
    s = summarize([rec(n=3, chunks=1)], ctx(output_tokens=3, concurrency=1))
    assert s.verdict == "unverified"
    (p,) = s.problems
    assert (p.code, p.severity) == ("multi_token_chunks", "warning")
    assert "give --tokenizer" in p.message


def test_a_token_held_back_into_the_next_chunk_needs_no_second_witness() -> None:
    """llama.cpp sent 254 chunks for 256 tokens (a token ending inside a UTF-8 character
    goes out with the next): the chunks agree within the tolerance."""
    s = summarize([rec(n=256, chunks=254)], ctx(output_tokens=256, concurrency=1))
    assert s.verdict == "valid"
    assert codes(s.problems) == {"multi_token_chunks": "info"}


def test_multi_token_chunks_agreed_by_the_engine_counter_are_information() -> None:
    r = rec(n=3, chunks=1)
    counter = EngineCounter(name="vllm:generation_tokens_total", before=10, after=13)
    s = summarize([r], ctx(output_tokens=3, concurrency=1), counter)
    assert s.verdict == "valid"
    assert codes(s.problems) == {"multi_token_chunks": "info"}


# --- the engine's counter ---------------------------------------------------------------


def engine(generated: float) -> EngineCounter:
    return EngineCounter(name="vllm:generation_tokens_total", before=1000, after=1000 + generated)


@pytest.mark.parametrize(
    ("generated", "expected"),
    [
        # 4 requests of 100: below, 1 + 0.5% of 400 = 3; above, 4 (one per request) +
        # 1% of 400 = 8
        (400, None),
        (397, None),
        (396, ("engine_tokens_mismatch", "error")),
        (392, ("engine_tokens_mismatch", "error")),  # 2%: caught
        (200, ("engine_tokens_mismatch", "error")),
        (408, None),
        (409, ("engine_tokens_mismatch", "warning")),
    ],
)
def test_engine_counter_tolerance(generated: float, expected: tuple[str, str] | None) -> None:
    recs = [rec(i) for i in range(4)]
    s = summarize(recs, ctx(output_tokens=N, concurrency=2), engine(generated))
    got = [(p.code, p.severity) for p in s.problems if p.code == "engine_tokens_mismatch"]
    assert got == ([expected] if expected else [])
    if expected == ("engine_tokens_mismatch", "error"):
        assert s.verdict == "invalid"
    elif expected is not None:
        assert s.verdict == "unverified"  # another client, or usage under-reports
    else:
        assert s.verdict == "valid"
    assert s.witnesses.engine is not None
    assert (s.witnesses.engine.generated, s.witnesses.engine.claimed) == (generated, 400)


def test_engine_counter_covers_the_warmup() -> None:
    recs = [rec(0), rec(1, warmup=True)]
    s = summarize(recs, ctx(output_tokens=N, concurrency=1), engine(200))
    assert s.problems == []
    assert s.witnesses.engine is not None and s.witnesses.engine.claimed == 200


def test_more_engine_tokens_with_failed_requests_prove_nothing() -> None:
    """A failed request's tokens are in the counter and in no usage: no over-count then."""
    recs = [rec(0), rec(1, error_kind="timeout", error="no next token")]
    s = summarize(recs, ctx(output_tokens=N, concurrency=1, allowed_failures=1), engine(170))
    assert "engine_tokens_mismatch" not in codes(s.problems)


def test_a_counter_that_went_back_is_no_witness() -> None:
    recs = [rec(0)]
    assert not engine_agrees(recs, engine(-50))
    s = summarize(recs, ctx(output_tokens=N, concurrency=1), engine(-50))
    assert s.problems == []


# --- prompt tokens --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reported", "code"),
    [(10, None), (9, None), (8, "error"), (5, "error"), (11, None), (13, None), (14, "inflated"),
     (20, "inflated")],
)  # fmt: skip
def test_prompt_tokens_against_the_prompts_own_count(reported: int, code: str | None) -> None:
    """Completions: no template, so at most 3 special tokens more and 1 fewer."""
    recs = [rec(i, prompt_tokens=reported) for i in range(3)]  # each prompt has 10
    s = summarize(recs, ctx(output_tokens=N))
    got = codes(s.problems)
    if code is None:
        assert got == {}
    elif code == "inflated":
        assert got == {"prompt_tokens_inflated": "error"} and s.verdict == "invalid"
        (p,) = s.problems
        assert f"{reported - 10} more prompt tokens" in p.message
        assert "over-reported" in p.message
    else:
        assert got == {"prompt_tokens_mismatch": "error"}
        (p,) = s.problems
        assert "fewer prompt tokens than their prompts have" in p.message


@pytest.mark.parametrize(
    ("template", "reported", "expected"),
    [(10, 21, {}), (10, 23, {}), (10, 24, {"prompt_tokens_inflated": "error"}),
     (None, 21, {"prompt_tokens_mismatch": "warning"}), (None, 12, {})],
)  # fmt: skip
def test_chat_prompt_tokens_against_the_counted_template(
    template: int | None, reported: int, expected: dict[str, str]
) -> None:
    """Chat: the template's tokens, where the tokenizer counted them, are expected; where
    it could not, a constant offset is only a warning."""
    recs = [rec(i, prompt_tokens=reported) for i in range(3)]
    s = summarize(recs, ctx(output_tokens=N, endpoint="chat", chat_template_tokens=template))
    assert codes(s.problems) == expected


def test_usage_total_must_add_up() -> None:
    good_total = rec(0, total_tokens=111)  # 11 prompt + 100 completion
    bad_total = rec(1, total_tokens=211)
    s = summarize([good_total, bad_total], ctx(output_tokens=N))
    assert codes(s.problems) == {"usage_total_mismatch": "error"}
    assert s.requests.matched == 1
    (p,) = s.problems
    assert "211 against 11 + 100" in p.message


def test_logprobs_are_a_witness_when_sent() -> None:
    agree = rec(0, n=100, chunks=50, logprob_tokens=100)
    s = summarize([agree], ctx(output_tokens=N, concurrency=1))
    assert s.verdict == "valid"
    (p,) = s.problems
    assert (p.code, p.severity) == ("multi_token_chunks", "info")
    assert "the logprobs agree for 1" in p.message
    lie = rec(1, n=100, chunks=100, logprob_tokens=50)
    s2 = summarize([agree, lie], ctx(output_tokens=N))
    assert codes(s2.problems)["logprobs_mismatch"] == "error"
    assert s2.requests.matched == 1
    assert s2.witnesses.output_tokens.logprobs == 150


@pytest.mark.parametrize(("logprobs", "disagrees"), [(32, False), (31, True), (33, True)])
def test_logprobs_must_equal_usage(logprobs: int, disagrees: bool) -> None:
    """Logprob entries (and token ids) are tokens, one per generated token: an off-by-one
    at N = 32 (a last chunk with no entry, or N - 1 chunks) is a disagreement."""
    r = rec(n=32, chunks=32, logprob_tokens=logprobs)
    assert logprobs_disagree(r) is disagrees


def test_choices_never_asked_for_are_an_error() -> None:
    s = summarize([rec(0), rec(1, other_choice_events=3)], ctx(output_tokens=N))
    assert codes(s.problems) == {"extra_choices": "error"}
    assert s.requests.matched == 1


def test_a_message_names_the_witness_that_agreed() -> None:
    """Within the chunk tolerance with nothing else asked, the message says so: no
    'second witness agrees' where none was asked (seen on real SGLang runs)."""
    s = summarize([rec(n=256, chunks=254)], ctx(output_tokens=256, concurrency=1))
    (p,) = s.problems
    assert "within the chunk count's tolerance" in p.message
    assert "no other witness was asked" in p.message
    s2 = summarize(
        [rec(n=256, chunks=254, stream_tokens=256)], ctx(output_tokens=256, concurrency=1)
    )
    (p2,) = s2.problems
    assert "the re-tokenized text agrees for 1" in p2.message
    assert "no other witness was asked" not in p2.message


# --- protocol and warm-up -------------------------------------------------------------


def test_data_after_done_is_an_error_and_unmatches() -> None:
    recs = [rec(0), rec(1, after_done_events=2)]
    s = summarize(recs, ctx(output_tokens=N))
    assert s.verdict == "invalid"
    (p,) = s.problems
    assert (p.code, p.count) == ("data_after_done", 1)
    assert "2 events" in p.message
    assert s.requests.matched == 1


@pytest.mark.parametrize(
    "kind", ["not_streamed", "content_type", "error_event", "undecodable", "event_too_large"]
)
def test_each_protocol_failure_has_its_own_code(kind: str) -> None:
    recs = [rec(0), rec(1, error_kind=kind, error="x")]
    s = summarize(recs, ctx(output_tokens=N))
    assert codes(s.problems) == {kind: "error"}
    s2 = summarize(recs, ctx(output_tokens=N, allowed_failures=1))
    assert codes(s2.problems) == {kind: "warning"} and s2.verdict == "valid"


def test_failed_warmup_is_a_named_warning() -> None:
    recs = [
        rec(0),
        rec(0, warmup=True, error_kind="http_error", error="HTTP 503: loading"),
        rec(1, warmup=True, error_kind="timeout", error="no first token within 1 s"),
        rec(2, warmup=True),
    ]
    s = summarize(recs, ctx(output_tokens=N, concurrency=1))
    assert s.verdict == "valid"
    (p,) = s.problems
    assert (p.code, p.severity, p.count) == ("warmup_failed", "warning", 2)
    assert "2 of 3 warm-up requests failed (http_error 1, timeout 1)" in p.message
    assert "HTTP 503: loading" in p.message
    assert (s.requests.warmup, s.requests.warmup_failed) == (3, 2)


# --- totals and the verdict -----------------------------------------------------------


def test_witness_totals() -> None:
    a = rec(0, n=3, chunks=1, stream_tokens=3)  # re-tokenized: its chunks fall short
    b = rec(1, n=3, chunks=3)
    s = summarize([a, b], ctx(output_tokens=3))
    w = s.witnesses
    assert (w.output_tokens.usage, w.output_tokens.stream_chunks) == (6, 4)
    assert (w.output_tokens.stream_text, w.output_tokens.stream_text_requests) == (3, 1)
    c = rec(2, n=3, chunks=3, count_source=None, completion_tokens=None)
    w2 = summarize([b, c], ctx(output_tokens=3)).witnesses
    assert w2.output_tokens.usage is None  # c had no usage
    assert (w2.output_tokens.stream_text, w2.output_tokens.stream_text_requests) == (None, 0)
    assert (w.prompt_tokens.usage, w.prompt_tokens.prompts) == (22, 20)
    assert w.engine is None


def test_verdict_rules() -> None:
    from crossover.metrics.summary import Problem

    def p(code: str, severity: str) -> Problem:
        return Problem(code=code, severity=severity, count=1, message="")  # type: ignore[arg-type]

    assert verdict([], 1) == "valid"
    assert verdict([], 0) == "invalid"
    assert verdict([p("prompt_tokens_mismatch", "warning")], 1) == "valid"
    for code in UNVERIFIED_CODES:
        assert verdict([p(code, "warning")], 1) == "unverified"
        assert verdict([p(code, "info")], 1) == "valid"
    assert verdict([p("multi_token_chunks", "warning"), p("http_error", "error")], 1) == "invalid"


# --- the documentation --------------------------------------------------------------------


def test_docs_list_every_problem_code_and_every_calibration_fault() -> None:
    """docs/metrics.md names each code with its witness and verdict; docs/calibration.md
    each fault that plants one."""
    from pathlib import Path

    from crossover.calibration.config import FAULT_NAMES
    from crossover.metrics.summary import PROBLEM_CODES
    from crossover.metrics.verify import _ERROR_CODES

    root = Path(__file__).resolve().parents[2] / "docs"
    table = (root / "metrics.md").read_text().split("## Problems", 1)[1]
    rows = {line.split("|")[1].strip(" `") for line in table.splitlines() if line.startswith("| `")}
    assert set(PROBLEM_CODES) <= rows, set(PROBLEM_CODES) - rows
    assert set(_ERROR_CODES.values()) <= set(PROBLEM_CODES)
    faults = (root / "calibration.md").read_text().split("## Faults", 1)[1].split("\n## ")[0]
    assert [f for f in FAULT_NAMES if f"`{f}`" not in faults] == []


def test_text_split_differently_as_a_whole_is_rescued_chunk_by_chunk() -> None:
    """Random-weight tokens re-encoded as one string split into more tokens (+40% at 128
    on the H200); each chunk holding one token re-encodes to one."""
    r = rec(n=128, chunks=126, stream_tokens=179, chunk_text_tokens=128)
    assert not text_disagrees(r)
    assert text_disagrees(rec(n=128, chunks=126, stream_tokens=179))


def test_more_text_than_claimed_is_caught_chunk_by_chunk_too() -> None:
    """A server streaming 200 tokens while claiming 128 carries them in its chunks: the
    chunk-by-chunk count stays over and the run is invalid."""
    r = rec(n=128, chunks=128, stream_tokens=200, chunk_text_tokens=200)
    assert text_disagrees(r)
    s = summarize([r], ctx(concurrency=1))
    assert codes(s.problems)["text_tokens_mismatch"] == "error"


def test_retokenize_goes_chunk_by_chunk_where_the_whole_text_is_long() -> None:
    """Each chunk's text is encoded on its own when the whole text overshoots usage."""
    split = rec(0, n=2, chunks=2, text="ab", chunk_chars=[1, 1])
    calls: list[str] = []

    def encode(text: str) -> list[int]:  # the whole string splits into 8, a chunk into 1
        calls.append(text)
        return [0] * (8 if len(text) > 1 else 1)

    done: list[int] = []
    retokenize([split], encode, done)
    assert calls == ["ab", "a", "b"]
    assert (split.stream_tokens, split.chunk_text_tokens) == (8, 2)
    assert not text_disagrees(split)


def test_counts_on_the_servers_word_alone_are_named() -> None:
    """No tokenizer, no logprobs, no counter: output rests on usage alone (the chunks are
    a lower bound); no prompt of known length: so does the prompt count (issue 43: a
    doubled prompt count raised total tok/s 84% with no word of it)."""
    from crossover.cli.render import summary_table
    from crossover.metrics.text import server_word_note

    alone = summarize([rec(0, expected_prompt_tokens=None)], ctx(concurrency=1))
    assert alone.witnesses.server_word == ["output tokens", "prompt tokens"]
    note = server_word_note(alone)
    assert "output tokens and prompt tokens on the server's word alone" in note
    head = summary_table(alone).renderables[0]
    assert "server's word alone" in str(head)
    witnessed = summarize([rec(0, stream_tokens=N)], ctx(concurrency=1))
    assert witnessed.witnesses.server_word == []
    assert server_word_note(witnessed) == ""
    by_counter = summarize([rec(0)], ctx(concurrency=1), engine(100))
    assert by_counter.witnesses.server_word == []


def test_a_reset_counter_is_no_witness_and_never_a_lie() -> None:
    recs = [rec(i) for i in range(4)]
    reset = EngineCounter(
        name="vllm:generation_tokens_total", before=1000, after=1100, resets=1, scrapes=3
    )
    s = summarize(recs, ctx(output_tokens=N, concurrency=2), reset)
    assert codes(s.problems) == {"engine_counter_reset": "info"}
    assert s.verdict == "valid"
    assert "engine_counter" not in {c.witness for c in s.witnesses.checks}
