"""What only the lean transport has: the aiohttp fallback for TLS, the headers it will
not send, and its refusal of a compressed stream (it asked for identity)."""

from __future__ import annotations

import asyncio
import gzip

import aiohttp
import pytest
from aiohttp import web

from crossover.engines.registry import dialect as get_dialect
from crossover.records.model import RequestRecord
from crossover.transport.base import StreamOptions
from crossover.transport.http import Timeouts
from crossover.transport.leanhttp import LeanSession


def _record() -> RequestRecord:
    return RequestRecord(index=0, expected_output_tokens=2, t_send_ns=0)


def test_https_goes_through_an_aiohttp_session() -> None:
    async def go() -> tuple[RequestRecord, object]:
        async with LeanSession() as session:
            assert session.target("https://127.0.0.1:9/v1/completions") is None
            assert session.target("http://[::1]:8000/v1/x?a=1") == (
                "::1",
                8000,
                "[::1]:8000",
                "/v1/x?a=1",
            )
            rec = _record()
            options = StreamOptions(
                get_dialect("vllm"), "completions", Timeouts(connect_s=2, first_token_s=5)
            )
            await session.stream("https://127.0.0.1:9/v1/completions", {}, rec, options)
            return rec, session.fallback().session

    rec, fallback = asyncio.run(go())
    assert isinstance(fallback, aiohttp.ClientSession) and fallback.closed
    assert rec.error_kind == "connection_error" and rec.error is not None
    assert rec.error.startswith("cannot connect")


@pytest.mark.parametrize("header", [("X-A", "1\r\nX-B: 2"), ("X:A", "1"), ("", "1")])
def test_a_header_that_would_split_the_request_is_refused(header: tuple[str, str]) -> None:
    with pytest.raises(ValueError, match="header that cannot be sent"):
        LeanSession(dict([header]))


def test_the_run_headers_go_with_each_request_and_identity_is_asked_for() -> None:
    seen: list[dict[str, str]] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        seen.append(dict(request.headers))
        body = gzip.compress(b'data: {"choices": [{"index": 0, "text": " a"}]}\n\n')
        return web.Response(
            body=body, headers={"Content-Type": "text/event-stream", "Content-Encoding": "gzip"}
        )

    async def go() -> RequestRecord:
        app = web.Application()
        app.router.add_post("/v1/completions", handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        rec = _record()
        try:
            async with LeanSession({"Authorization": "Bearer k"}) as session:
                options = StreamOptions(
                    get_dialect("vllm"), "completions", Timeouts(first_token_s=5)
                )
                await session.stream(
                    f"http://127.0.0.1:{port}/v1/completions", {"stream": True}, rec, options
                )
        finally:
            await runner.cleanup()
        return rec

    rec = asyncio.run(go())
    assert seen[0]["Authorization"] == "Bearer k"
    assert seen[0]["Accept-Encoding"] == "identity"
    assert seen[0]["Content-Type"] == "application/json"
    # the server compressed a stream nobody asked it to: refused, never guessed at
    assert rec.error_kind == "undecodable"
    assert rec.error is not None and "Content-Encoding 'gzip'" in rec.error
