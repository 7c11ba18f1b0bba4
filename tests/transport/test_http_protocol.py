"""``stream_request`` against hand-written responses: every protocol deviation gets its
own error kind, and the record stops where the protocol says the response ended. Each
test runs once per transport (``_each_transport``)."""

from __future__ import annotations

import asyncio
import gzip
import time
from collections.abc import Awaitable, Callable

import orjson
import pytest
from aiohttp import web

from crossover.engines.registry import dialect as get_dialect
from crossover.records.model import RequestRecord
from crossover.transport.client import StreamOptions, TransportName, make_client
from crossover.transport.http import Timeouts

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
#: the transport of the running test (set by ``_each_transport``)
TRANSPORT: list[TransportName] = ["aiohttp"]


@pytest.fixture(autouse=True)
def _each_transport(transport: TransportName) -> None:
    TRANSPORT[0] = transport


def chunk(text: str, finish: str | None = None) -> bytes:
    obj = {"choices": [{"index": 0, "text": text, "finish_reason": finish}]}
    return b"data: " + orjson.dumps(obj) + b"\n\n"


USAGE = b'data: {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}\n\n'
DONE = b"data: [DONE]\n\n"
GOOD = chunk(" a") + chunk(" b", "length") + USAGE + DONE


def sse(
    *parts: bytes, content_type: str | None = "text/event-stream", pause_s: float = 0
) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        if content_type is not None:
            resp.content_type = content_type
        else:
            resp.headers["Content-Type"] = ""
        await resp.prepare(request)
        for p in parts:
            await resp.write(p)
            if pause_s:
                await asyncio.sleep(pause_s)
        await resp.write_eof()
        return resp

    return handler


def fetch(handler: Handler, max_event_bytes: int = 1024 * 1024) -> RequestRecord:
    return fetch_with(handler, Timeouts(first_token_s=5, gap_s=5, total_s=10), max_event_bytes)


def fetch_with(
    handler: Handler, timeouts: Timeouts, max_event_bytes: int = 1024 * 1024
) -> RequestRecord:
    async def go() -> RequestRecord:
        app = web.Application()
        app.router.add_post("/v1/completions", handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        rec = RequestRecord(index=0, expected_output_tokens=2, t_send_ns=0)
        dialect = get_dialect("vllm")
        try:
            async with make_client(TRANSPORT[0]) as session:
                await session.stream(
                    f"http://127.0.0.1:{port}/v1/completions",
                    {"model": "m", "prompt": "p", "stream": True},
                    rec,
                    StreamOptions(dialect, "completions", timeouts, True, max_event_bytes),
                )
        finally:
            await runner.cleanup()
        return rec

    return asyncio.run(go())


def test_a_good_stream() -> None:
    r = fetch(sse(GOOD))
    assert r.ok and r.saw_done and r.text == " a b"
    assert (r.completion_tokens, r.prompt_tokens, r.finish_reason) == (2, 3, "length")
    assert r.after_done_events == 0


def test_event_stream_with_parameters_is_a_stream() -> None:
    r = fetch(sse(GOOD, content_type="text/event-stream; charset=utf-8"))
    assert r.ok, r.error


def test_a_json_body_to_a_streaming_request_is_not_streamed() -> None:
    body = {"choices": [{"text": " a b", "finish_reason": "length"}], "usage": {}}
    r = fetch(_json(body))
    assert r.error_kind == "not_streamed"
    assert r.error is not None and "one a completion body" in r.error
    assert r.chunk_arrival_ns == [] and r.t_first_ns is None


def test_a_json_body_under_an_event_stream_label_is_not_streamed() -> None:
    body = orjson.dumps({"choices": [{"text": " a b", "finish_reason": None}]})
    r = fetch(sse(body))
    assert r.error_kind == "not_streamed"


def test_a_json_error_with_status_200_is_an_error_event() -> None:
    r = fetch(_json({"error": {"message": "out of memory"}}))
    assert r.error_kind == "error_event"
    assert r.error is not None and "out of memory" in r.error


@pytest.mark.parametrize(
    ("content_type", "shown"),
    [("text/plain", "text/plain"), ("application/octet-stream", "application/octet-stream"),
     (None, "(none)")],
)  # fmt: skip
def test_a_wrong_content_type_is_not_read_as_a_stream(content_type: str | None, shown: str) -> None:
    r = fetch(sse(GOOD, content_type=content_type))
    assert r.error_kind == "content_type"
    assert r.error is not None and shown in r.error
    assert r.chunk_arrival_ns == []


def test_an_error_event_ends_the_response_there() -> None:
    err = b'data: {"error": {"message": "engine crashed", "code": 500}}\n\n'
    r = fetch(sse(chunk(" a"), err, chunk(" b", "length"), USAGE, DONE, pause_s=0.02))
    assert r.error_kind == "error_event"
    assert r.error is not None and "engine crashed" in r.error
    assert len(r.chunk_arrival_ns) == 1  # " b" came after the error: not taken
    assert r.completion_tokens is None and r.finish_reason is None
    assert r.t_done_ns is not None and r.t_done_ns >= r.chunk_arrival_ns[0]


def test_bytes_that_are_not_utf8_are_undecodable() -> None:
    bad = b'data: {"choices": [{"index": 0, "text": "\xff", "finish_reason": null}]}\n\n'
    r = fetch(sse(chunk(" a"), bad, chunk(" b", "length"), USAGE, DONE))
    assert r.error_kind == "undecodable"
    assert len(r.chunk_arrival_ns) == 1


def test_json_that_does_not_parse_is_malformed() -> None:
    r = fetch(sse(chunk(" a"), b"data: {not json\n\n", chunk(" b", "length"), DONE))
    assert r.error_kind == "malformed"
    assert len(r.chunk_arrival_ns) == 1


def test_a_body_its_content_encoding_cannot_decode_is_undecodable() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        body = gzip.compress(GOOD)
        body = body[:12] + bytes(b ^ 0x5A for b in body[12:])  # corrupt the deflate stream
        return web.Response(
            body=body, headers={"Content-Type": "text/event-stream", "Content-Encoding": "gzip"}
        )

    r = fetch(handler)
    assert r.error_kind == "undecodable", r.error


def test_an_event_over_the_cap_ends_the_response_there() -> None:
    big = chunk(" " + "x" * 5000)
    r = fetch(sse(chunk(" a"), big, chunk(" b", "length"), USAGE, DONE), max_event_bytes=4096)
    assert r.error_kind == "event_too_large"
    assert r.error is not None and "4096-byte cap" in r.error
    assert len(r.chunk_arrival_ns) == 1
    ok = fetch(sse(chunk(" a"), big, chunk(" b", "length"), USAGE, DONE), max_event_bytes=8192)
    assert ok.ok and len(ok.chunk_arrival_ns) == 3


def test_a_line_that_never_ends_is_cut_off_at_the_cap() -> None:
    endless = [b"data: " + b"x" * 1000] + [b"x" * 1000] * 20
    r = fetch(sse(chunk(" a"), *endless, DONE), max_event_bytes=4096)
    assert r.error_kind == "event_too_large"
    assert len(r.chunk_arrival_ns) == 1


def test_the_response_ends_at_done() -> None:
    r = fetch(sse(GOOD, chunk(" late"), USAGE.replace(b"2}", b"9}"), DONE, pause_s=0.05))
    assert r.ok
    assert r.after_done_events == 2  # the chunk and the usage; the second [DONE] is a repeat
    assert r.text == " a b" and len(r.chunk_arrival_ns) == 2
    assert r.completion_tokens == 2  # the usage after [DONE] was not read
    # t_done is the arrival of [DONE], not the end of the HTTP response 100 ms later
    assert r.t_done_ns is not None
    assert (r.t_done_ns - r.chunk_arrival_ns[-1]) / 1e6 < 40


def _json(body: object) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(body=orjson.dumps(body), content_type="application/json")

    return handler


def test_a_404_names_the_path_and_the_base_url_fix() -> None:
    async def not_found(request: web.Request) -> web.StreamResponse:
        raise web.HTTPNotFound()

    r = fetch(not_found)
    assert r.error_kind == "http_error"
    assert r.error is not None
    assert "HTTP 404" in r.error
    assert "/v1/completions" in r.error and "base URL" in r.error


# --- JSON and SSE as their specifications allow them -------------------------------------


def test_fields_present_with_null_are_absent() -> None:
    """An "error": null (and "usage": null on every chunk) is no error (it failed every
    request of a real server once)."""
    nul = b'"error": null, "usage": null, "system_fingerprint": null'
    c1 = (
        b'data: {"choices": [{"index": 0, "text": " a", "logprobs": null, "finish_reason": null}], '
    )
    c2 = b'data: {"choices": [{"index": 0, "text": " b", "finish_reason": "length"}], '
    usage = b'data: {"choices": [], "error": null, "usage": {"prompt_tokens": 3, "completion_tokens": 2}}\n\n'
    r = fetch(sse(c1 + nul + b"}\n\n", c2 + nul + b"}\n\n", usage, DONE))
    assert r.ok, r.error
    assert (r.completion_tokens, r.prompt_tokens, r.text) == (2, 3, " a b")


def test_integers_written_as_floats_are_integers() -> None:
    usage = b'data: {"choices": [], "usage": {"prompt_tokens": 3.0, "completion_tokens": 2.0, "total_tokens": 5.0}}\n\n'
    r = fetch(sse(chunk(" a"), chunk(" b", "length"), usage, DONE))
    assert r.ok and (r.completion_tokens, r.prompt_tokens, r.total_tokens) == (2, 3, 5)
    assert r.count_source == "usage"


def test_a_repeated_done_is_no_data_after_done() -> None:
    r = fetch(sse(GOOD, DONE, DONE))
    assert r.ok and r.saw_done and r.after_done_events == 0


def test_no_done_after_a_finish_reason_and_usage_is_complete() -> None:
    r = fetch(sse(chunk(" a"), chunk(" b", "length"), USAGE))
    assert r.ok and not r.saw_done and r.completion_tokens == 2


def test_a_last_event_without_its_blank_line_is_read() -> None:
    r = fetch(sse(chunk(" a"), chunk(" b", "length"), USAGE, b"data: [DONE]"))
    assert r.ok and r.saw_done


def test_a_last_event_cut_short_is_a_truncated_stream_not_malformed() -> None:
    r = fetch(sse(chunk(" a"), b'data: {"choices": [{"index": 0, "te'))
    assert r.error_kind == "stream_truncated"
    assert len(r.chunk_arrival_ns) == 1


def test_events_of_a_type_nobody_listens_to_are_skipped() -> None:
    ping = b"event: ping\ndata: keep-alive\n\n"
    r = fetch(sse(chunk(" a"), ping, b"id: 3\nretry: 10\n" + chunk(" b", "length"), USAGE, DONE))
    assert r.ok, r.error
    assert r.text == " a b"


def test_an_error_event_type_is_an_error_whatever_its_data() -> None:
    r = fetch(sse(chunk(" a"), b"event: error\ndata: out of memory\n\n", USAGE, DONE))
    assert r.error_kind == "error_event"
    assert r.error is not None and "out of memory" in r.error


def test_choices_never_asked_for_are_counted_not_read() -> None:
    other = b'data: {"choices": [{"index": 1, "text": " z", "finish_reason": null}]}\n\n'
    both = (
        b'data: {"choices": [{"index": 0, "text": " b", "finish_reason": "length"}, '
        b'{"index": 1, "text": " y", "finish_reason": "length"}]}\n\n'
    )
    r = fetch(sse(chunk(" a"), other, both, USAGE, DONE))
    assert r.ok
    assert r.text == " a b" and len(r.chunk_arrival_ns) == 2
    assert r.other_choice_events == 2


def test_logprobs_state_the_tokens_of_each_chunk() -> None:
    def lp(text: str, n: int, finish: str | None = None) -> bytes:
        logprobs = {"tokens": ["t"] * n, "token_logprobs": [-1.0] * n}
        obj = {
            "choices": [{"index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish}]
        }
        return b"data: " + orjson.dumps(obj) + b"\n\n"

    usage = b'data: {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 3}}\n\n'
    r = fetch(sse(lp(" a", 1), lp(" b c", 2, "length"), usage, DONE))
    assert r.ok
    assert r.chunk_tokens == [1, 2] and r.logprob_tokens == 3
    partial = fetch(sse(lp(" a", 1), chunk(" b", "length"), USAGE, DONE))
    assert partial.chunk_tokens is None and partial.logprob_tokens is None


def test_a_connection_held_open_after_done_is_not_waited_for() -> None:
    """The response ended at [DONE]; a server that keeps the body open after it costs the
    client at most AFTER_DONE_S, and the request is complete."""
    from crossover.transport.http import AFTER_DONE_S

    t0 = time.perf_counter()
    r = fetch(sse(GOOD, b": still here\n\n", pause_s=3.0))
    assert time.perf_counter() - t0 < 3.0 + AFTER_DONE_S  # not the 6 s the server holds
    assert r.ok and r.saw_done, r.error
    assert r.t_done_ns is not None and r.t_done_ns - r.chunk_arrival_ns[-1] < 50_000_000


def test_heartbeats_do_not_re_arm_the_gap_limit() -> None:
    beats = [b": ping\n\n"] * 12  # every 0.1 s: 1.2 s of comments, no token
    r = fetch_with(sse(chunk(" a"), *beats, chunk(" b", "length"), USAGE, DONE, pause_s=0.1),
                   Timeouts(first_token_s=5, gap_s=0.5, total_s=10))  # fmt: skip
    assert r.error_kind == "timeout"
    assert r.error == "no next token within 0.5 s"


def test_tokens_after_the_finish_reason_are_counted() -> None:
    r = fetch(sse(chunk(" a", "length"), chunk(" b"), USAGE, DONE))
    assert r.ok and r.after_finish_chunks == 1 and r.finish_reason == "length"


def test_an_empty_data_event_is_no_event() -> None:
    """ "data:" alone (a heartbeat) dispatches nothing, by the SSE spec: not malformed."""
    r = fetch(sse(chunk(" a"), b"data:\n\n", b"data: \n\n", chunk(" b", "length"), USAGE, DONE))
    assert r.ok, r.error
    assert r.text == " a b"
