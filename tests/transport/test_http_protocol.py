"""``stream_request`` against hand-written responses: every protocol deviation gets its
own error kind, and the record stops where the protocol says the response ended."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Awaitable, Callable

import orjson
import pytest
from aiohttp import web

from crossover.dialects import get_dialect
from crossover.records.model import RequestRecord
from crossover.transport.http import Timeouts, make_session, stream_request

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


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
            async with make_session() as session:
                await stream_request(
                    session,
                    f"http://127.0.0.1:{port}/v1/completions",
                    {"model": "m", "prompt": "p", "stream": True},
                    dialect,
                    "completions",
                    rec,
                    Timeouts(first_token_s=5, gap_s=5, total_s=10),
                    keep_text=True,
                    max_event_bytes=max_event_bytes,
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
