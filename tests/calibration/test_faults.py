"""Every fault's observable behaviour on the wire, seen with a plain aiohttp client."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import orjson
import pytest

from crossover.calibration.config import parse_fault
from crossover.calibration.server import CalibrationConfig, serve

from .conftest import Streamed, run, stream

Body = Callable[..., dict[str, Any]]
N = 8


def _one(fault: str, req: dict[str, Any], timeout_s: float = 5.0, **cfg: Any) -> Streamed:
    config = CalibrationConfig(ttft_ms=5.0, itl_ms=2.0, faults=[parse_fault(fault)], **cfg)
    path = "/v1/chat/completions" if "messages" in req else "/v1/completions"

    async def go() -> Streamed:
        async with serve(config) as url, aiohttp.ClientSession() as s:
            return await stream(s, url + path, req, timeout_s)

    return run(go)


def _good(s: Streamed) -> None:
    assert s.status == 200
    assert s.error is None
    assert s.done


def test_short_completion(body: Body) -> None:
    s = _one("short_completion", body(N))
    _good(s)
    assert s.tokens == N // 2
    assert s.finish_reasons == ["stop"]
    assert s.usage is not None
    assert s.usage["completion_tokens"] == N // 2


def test_long_completion(body: Body) -> None:
    s = _one("long_completion", body(N), long_completion_extra_tokens=3)
    _good(s)
    assert s.tokens == N + 3
    assert s.finish_reasons == ["length"]
    assert s.usage is not None
    assert s.usage["completion_tokens"] == N + 3


def test_finish_reason(body: Body) -> None:
    s = _one("finish_reason", body(N))
    _good(s)
    assert s.tokens == N
    assert s.finish_reasons == ["stop"]
    assert s.usage is not None
    assert s.usage["completion_tokens"] == N


def test_role_chunk(body: Body) -> None:
    s = _one("role_chunk", body(N, chat=True), role_chunk_delay_ms=30.0)
    _good(s)
    first = s.chunks[0]["choices"][0]["delta"]
    assert first == {"role": "assistant"}
    role_at = s.events[0].arrival_ns
    token_at = s.token_events[0][0].arrival_ns
    assert (token_at - role_at) / 1e6 >= 30.0
    assert s.tokens == N


def test_chat_without_fault_has_role_and_content_in_first_chunk(body: Body) -> None:
    s = _one("short_completion:0.5", body(N, chat=True))  # request 0 is not faulted
    _good(s)
    assert s.chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": " tok"}


def test_multi_token_chunks(body: Body) -> None:
    s = _one("multi_token_chunks", body(N))
    _good(s)
    sizes = [len(text.split()) for _, text in s.token_events]
    assert sum(sizes) == N
    assert max(sizes) >= 2
    assert len(s.token_events) < N


def test_usage_missing(body: Body) -> None:
    s = _one("usage_missing", body(N))
    _good(s)
    assert s.usage is None
    assert s.tokens == N
    whole = _one("usage_missing", body(N, stream=False))
    assert "usage" not in orjson.loads(whole.body)


def test_usage_mismatch(body: Body) -> None:
    s = _one("usage_mismatch", body(N), usage_mismatch_delta=-2)
    _good(s)
    assert s.tokens == N
    assert s.usage is not None
    assert s.usage["completion_tokens"] == N - 2


def test_prompt_tokens_mismatch(body: Body) -> None:
    s = _one("prompt_tokens_mismatch", body(N), prompt_tokens_extra=5)
    _good(s)
    assert s.usage is not None
    assert s.usage["prompt_tokens"] == 4 + 5


@pytest.mark.parametrize(("fault", "status"), [("http_500", 500), ("http_429", 429)])
def test_http_errors(body: Body, fault: str, status: int) -> None:
    s = _one(fault, body(N))
    assert s.status == status
    assert orjson.loads(s.body)["error"]["code"] == status
    if status == 429:
        assert s.headers["Retry-After"] == "1"


def test_stall_outlasts_a_short_timeout(body: Body) -> None:
    s = _one("stall", body(N), timeout_s=0.25, stall_s=1.0)
    assert isinstance(s.error, TimeoutError)
    assert s.tokens == N // 2
    assert not s.done


def test_stall_then_resumes(body: Body) -> None:
    s = _one("stall", body(N), stall_s=0.1)
    _good(s)
    assert s.tokens == N
    arrivals = [e.arrival_ns for e, _ in s.token_events]
    gaps = [(b - a) / 1e6 for a, b in itertools.pairwise(arrivals)]
    assert max(gaps) >= 100.0
    assert gaps.index(max(gaps)) == N // 2 - 1


def test_cut_ends_cleanly_without_finish_usage_or_done(body: Body) -> None:
    s = _one("cut", body(N))
    assert s.status == 200
    assert s.error is None
    assert s.tokens == N // 2
    assert s.finish_reasons == []
    assert s.usage is None
    assert not s.done


def test_reset_drops_the_connection(body: Body) -> None:
    s = _one("reset", body(N))
    assert isinstance(s.error, aiohttp.ClientError)
    assert s.tokens == N // 2
    assert not s.done
    assert s.finish_reasons == []


def test_connection_close_header(body: Body) -> None:
    for req in (body(N), body(N, stream=False)):
        s = _one("connection_close", req)
        assert s.status == 200
        assert s.error is None
        assert s.headers.get("Connection", "").lower() == "close"


def test_malformed_json_line(body: Body) -> None:
    s = _one("malformed_json", body(N))
    _good(s)
    bad = [e for e in s.events if e.data != "[DONE]" and not _is_json(e.data)]
    assert len(bad) == 1
    assert s.tokens == N


def _is_json(text: str) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


def test_slow_headers(body: Body) -> None:
    t0 = time.perf_counter()
    s = _one("slow_headers", body(N), slow_headers_s=0.2)
    _good(s)
    assert (s.token_events[0][0].arrival_ns - s.send_ns) / 1e9 >= 0.2
    assert time.perf_counter() - t0 < 2.0
    late = _one("slow_headers", body(N), timeout_s=0.1, slow_headers_s=1.0)
    assert isinstance(late.error, TimeoutError)
    assert late.status == 0


def test_never_answer_times_out_and_shutdown_is_prompt(body: Body) -> None:
    t0 = time.perf_counter()
    s = _one("never_answer", body(N), timeout_s=0.2)
    assert isinstance(s.error, TimeoutError)
    assert s.status == 0
    assert time.perf_counter() - t0 < 2.0


def test_split_events_use_crlf_comments_and_small_writes(body: Body) -> None:
    s = _one("split_events", body(N), split_event_bytes=5)
    _good(s)
    assert b"\r\n\r\n" in s.raw
    assert b": ping\r\n" in s.raw
    assert s.tokens == N
    assert s.usage is not None
    assert s.usage["completion_tokens"] == N


def test_fraction_is_deterministic_by_request_counter(body: Body) -> None:
    config = CalibrationConfig(
        ttft_ms=1.0, itl_ms=0.5, faults=[parse_fault("short_completion:0.25")]
    )

    async def go() -> list[int]:
        async with serve(config) as url, aiohttp.ClientSession() as s:
            return [(await stream(s, url + "/v1/completions", body(N))).tokens for _ in range(8)]

    tokens = run(go)
    assert tokens == [N, N, N, N // 2, N, N, N, N // 2]


def test_faults_combine(body: Body) -> None:
    config = CalibrationConfig(
        ttft_ms=1.0,
        itl_ms=0.5,
        faults=[parse_fault("usage_missing"), parse_fault("finish_reason")],
    )

    async def go() -> Streamed:
        async with serve(config) as url, aiohttp.ClientSession() as s:
            return await stream(s, url + "/v1/completions", body(N))

    s = run(go)
    assert s.usage is None
    assert s.finish_reasons == ["stop"]
    assert s.tokens == N


def test_non_streaming_variants(body: Body) -> None:
    reset = _one("reset", body(N, stream=False))
    assert isinstance(reset.error, aiohttp.ClientError)
    cut = _one("cut", body(N, stream=False))
    assert isinstance(cut.error, aiohttp.ClientPayloadError)
    bad = _one("malformed_json", body(N, stream=False))
    assert bad.status == 200
    assert not _is_json(bad.body.decode())
    t0 = time.perf_counter()
    stalled = _one("stall", body(N, stream=False), stall_s=0.2)
    assert time.perf_counter() - t0 >= 0.2
    assert orjson.loads(stalled.body)["usage"]["completion_tokens"] == N


# --- counts a second witness contradicts ----------------------------------------------


def test_usage_inflated_claims_the_length_over_half_a_stream(body: Body) -> None:
    for req in (body(N), body(N, chat=True)):
        s = _one("usage_inflated", req)
        _good(s)
        assert s.tokens == N // 2 and len(s.token_events) == N // 2
        assert s.finish_reasons == ["length"]
        assert s.usage is not None and s.usage["completion_tokens"] == N
    whole = orjson.loads(_one("usage_inflated", body(N, stream=False)).body)
    assert len(whole["choices"][0]["text"].split()) == N // 2
    assert whole["usage"]["completion_tokens"] == N


def test_prompt_tokens_short_reports_half_the_prompt(body: Body) -> None:
    s = _one("prompt_tokens_short", body(N))  # a 4-word prompt
    _good(s)
    assert s.usage is not None and s.usage["prompt_tokens"] == 2
    chat = _one("prompt_tokens_short", body(N, chat=True), chat_template_tokens=6)
    assert chat.usage is not None and chat.usage["prompt_tokens"] == (4 + 6) // 2


# --- protocol deviations ----------------------------------------------------------------


def test_not_streamed_answers_a_stream_request_with_one_json_body(body: Body) -> None:
    config = CalibrationConfig(ttft_ms=1.0, itl_ms=0.5, faults=[parse_fault("not_streamed")])

    async def go() -> tuple[str, dict[str, Any]]:
        async with serve(config) as url, aiohttp.ClientSession() as s:
            async with s.post(url + "/v1/completions", json=body(N)) as r:
                return r.content_type, await r.json()

    ctype, doc = run(go)
    assert ctype == "application/json"
    assert len(doc["choices"][0]["text"].split()) == N
    assert doc["usage"]["completion_tokens"] == N


def test_content_type_labels_the_stream_as_plain_text(body: Body) -> None:
    s = _one("content_type", body(N))
    assert s.headers["Content-Type"].startswith("text/plain")
    _good(s)  # the body itself is a good stream
    assert s.tokens == N


def test_error_event_in_the_middle_then_the_rest(body: Body) -> None:
    s = _one("error_event", body(N))
    _good(s)
    errors = [i for i, e in enumerate(s.events) if e.json is not None and "error" in e.json]
    assert len(errors) == 1
    before = [e for e in s.events[: errors[0]] if e.json and e.json.get("choices")]
    assert len(before) == N // 2
    assert s.tokens == N  # the server goes on after its error


def test_undecodable_chunk_is_not_utf8(body: Body) -> None:
    s = _one("undecodable", body(N))
    _good(s)
    assert b"\xff\xfe" in s.raw
    assert s.tokens == N + 1  # the bad chunk is extra: the stream goes on after it
    with pytest.raises(UnicodeDecodeError):
        s.raw.decode("utf-8")


def test_oversized_event_pads_one_chunk(body: Body) -> None:
    s = _one("oversized_event", body(N), oversized_event_bytes=200_000)
    _good(s)
    sizes = sorted(len(e.data) for e in s.events)
    assert sizes[-1] == 200_000 and sizes[-2] < 1000
    assert s.tokens == N  # the big event carries one of the N tokens


def test_data_after_done(body: Body) -> None:
    s = _one("data_after_done", body(N))
    datas = [e.data for e in s.events]
    first_done = datas.index("[DONE]")
    assert datas[first_done + 1 :][-1] == "[DONE]"
    assert len(datas) - first_done - 1 == 2
    assert s.usage is not None and s.usage["completion_tokens"] == N


def test_detokenize_inverts_tokenize() -> None:
    async def go() -> tuple[list[int], str, str]:
        async with serve(CalibrationConfig()) as url, aiohttp.ClientSession() as s:
            async with s.post(url + "/tokenize", json={"content": "hello big world"}) as r:
                ids = (await r.json())["tokens"]
            async with s.post(url + "/detokenize", json={"tokens": ids}) as r:
                text = (await r.json())["content"]
            async with s.post(url + "/detokenize", json={"tokens": "x"}) as r:
                bad = str(r.status)
            return ids, text, bad

    ids, text, bad = run(go)
    assert len(ids) == 3 and text == "hello big world"
    assert bad == "400"


def test_word_tokenizer_counts_what_the_server_counts() -> None:
    from crossover.calibration.tokenizer import WordTokenizer, token_ids

    tok = WordTokenizer()
    ids = tok.encode(" tok tok  tok")
    assert ids == token_ids(" tok tok  tok") and len(ids) == 3
    assert tok.decode(ids[:2]) == "tok tok"
    assert tok.decode([1, 2]) == ""  # template ids


# --- wire forms, parts of the response, delivery -------------------------------------------


def test_whitespace_chunks_keep_the_chunk_count_and_halve_the_words(body: Body) -> None:
    s = _one("whitespace_chunks", body(N))
    _good(s)
    texts = [t for _, t in s.token_events]
    assert len(texts) == N and texts.count(" ") == N // 2
    assert s.tokens == N // 2
    assert s.usage is not None and s.usage["completion_tokens"] == N


@pytest.mark.parametrize("fault", ["extra_choice", "choices_per_event"])
def test_choices_never_asked_for_go_out_beside_index_0(body: Body, fault: str) -> None:
    s = _one(fault, body(N, chat=True))
    _good(s)
    indices = [c["index"] for ch in s.chunks for c in ch["choices"]]
    assert indices.count(0) == N and indices.count(1) == N
    together = max(len(ch["choices"]) for ch in s.chunks)
    assert together == (2 if fault == "choices_per_event" else 1)


def test_prompt_tokens_inflated_and_usage_total(body: Body) -> None:
    s = _one("prompt_tokens_inflated", body(N))
    assert s.usage is not None and s.usage["prompt_tokens"] == 8  # a 4-word prompt, doubled
    t = _one("usage_total_mismatch", body(N), usage_total_extra=7)
    assert t.usage is not None
    assert t.usage["total_tokens"] == t.usage["prompt_tokens"] + N + 7


def test_logprobs_one_entry_per_token(body: Body) -> None:
    s = _one("logprobs", body(N, chat=True), tokens_per_chunk=2)
    entries = [
        len(c["logprobs"]["content"]) for ch in s.chunks for c in ch["choices"] if c["logprobs"]
    ]
    assert sum(entries) == N and max(entries) == 2


@pytest.mark.parametrize(
    ("fault", "raw"),
    [
        ("cr_lines", b"\r\r"),
        ("crlf_lines", b"\r\n\r\n"),
        ("sse_variety", b"retry: 3000\ndata:{"),
        ("null_fields", b'"error":null'),
        ("float_ints", b'"completion_tokens":8.0'),
        ("unknown_fields", b'"x_vendor"'),
        ("heartbeats", b": keep-alive\n\n"),
    ],
)
def test_honest_forms_on_the_wire(body: Body, fault: str, raw: bytes) -> None:
    s = _one(fault, body(N))
    assert s.status == 200 and s.error is None
    assert raw in s.raw


def test_done_repeated_missing_or_without_its_blank_line(body: Body) -> None:
    assert _one("repeated_done", body(N)).raw.endswith(b"data: [DONE]\n\ndata: [DONE]\n\n")
    assert b"[DONE]" not in _one("no_done", body(N)).raw
    assert _one("no_final_blank_line", body(N)).raw.endswith(b"}\n\ndata: [DONE]")
    assert _one("sse_variety", body(N)).raw.startswith(b"\xef\xbb\xbf: variety\n")


def test_burst_delivery_writes_tokens_together(body: Body) -> None:
    s = _one("burst_delivery", body(N), burst_tokens=4)
    _good(s)
    arrivals = sorted({e.arrival_ns for e, _ in s.token_events})
    assert len(arrivals) <= N // 4 + 1  # four tokens a write (the first write may split)


def test_heartbeat_stall_sends_only_comments(body: Body) -> None:
    s = _one("heartbeat_stall", body(N), stall_s=0.3, heartbeat_ms=50.0)
    _good(s)
    assert s.raw.count(b": keep-alive") >= 4
    gaps = [
        (b.arrival_ns - a.arrival_ns) / 1e6 for (a, _), (b, _) in itertools.pairwise(s.token_events)
    ]
    assert max(gaps) >= 300
