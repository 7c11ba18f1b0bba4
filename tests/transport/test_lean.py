"""The prototype Protocol client against a scripted local server: events and their read
stamps, keep-alive reuse, the sink, and each way a response can break."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from crossover.transport.chunked_sse import MalformedChunk, StampedEvent, TruncatedBody
from crossover.transport.lean import (
    HeadError,
    LeanConnection,
    LeanPool,
    parse_head,
    post_request,
)

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def chunk(body: bytes) -> bytes:
    return b"%x\r\n" % len(body) + body + b"\r\n"


async def read_request(reader: asyncio.StreamReader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    await reader.readexactly(length)


def serve(script: Script, test: Callable[[LeanPool], Awaitable[None]]) -> None:
    async def main() -> None:
        server = await asyncio.start_server(script, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        pool = LeanPool("127.0.0.1", port)
        try:
            await asyncio.wait_for(test(pool), 10)
        finally:
            pool.close()
            server.close()

    asyncio.run(main())


async def events_of(conn: LeanConnection) -> list[StampedEvent]:
    out: list[StampedEvent] = []
    while evs := await conn.next_events():
        out += evs
    return out


async def head_then_events(conn: LeanConnection) -> list[StampedEvent]:
    await conn.wait_head()
    return await events_of(conn)


def request(pool: LeanPool) -> bytes:
    return post_request(pool.host, pool.port, "/v1/completions", b'{"stream": true}')


# --- parse_head ---------------------------------------------------------------------------


def test_parse_head_reads_status_and_headers() -> None:
    got = parse_head(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
        b"Transfer-Encoding: gzip, chunked\r\nX-A: 1\r\nx-a: 2\r\n\r\ndata"
    )
    assert got is not None
    head, used = got
    assert (head.status, head.reason, used) == (200, "OK", 117)
    assert head.event_stream and head.chunked and head.keep_alive
    assert head.headers["x-a"] == "1, 2"
    assert head.content_length is None


def test_parse_head_waits_for_the_blank_line() -> None:
    assert parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n") is None


@pytest.mark.parametrize(
    "raw",
    [b"SPDY/3 200 OK\r\n\r\n", b"HTTP/1.1 abc OK\r\n\r\n", b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
     b"HTTP/1.1 200 OK\r\n bad: fold\r\n\r\n", b"x" * 70_000],
)  # fmt: skip
def test_parse_head_rejects_what_is_not_http(raw: bytes) -> None:
    with pytest.raises(HeadError):
        parse_head(raw)


def test_a_malformed_content_length_is_an_error() -> None:
    got = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 1e3\r\n\r\n")
    assert got is not None
    with pytest.raises(HeadError):
        _ = got[0].content_length


@pytest.mark.parametrize("line", [b"Transfer-Encoding: gzip, chunked", b"Content-Encoding: gzip"])
def test_codings_the_prototype_cannot_decode_are_refused(line: bytes) -> None:
    got = parse_head(b"HTTP/1.1 200 OK\r\n" + line + b"\r\n\r\n")
    assert got is not None
    with pytest.raises(HeadError):
        got[0].check_codings()


# --- against a server --------------------------------------------------------------------


def test_events_arrive_stamped_in_order_and_the_connection_is_reused() -> None:
    connections = 0

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        for _ in range(2):
            await read_request(reader)
            writer.write(HEAD)
            for i in range(3):
                writer.write(chunk(b'data: {"i": %d}\n\n' % i))
                await writer.drain()
                await asyncio.sleep(0.01)
            writer.write(chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
            await writer.drain()
        writer.close()

    async def test(pool: LeanPool) -> None:
        for _ in range(2):
            conn = await pool.acquire()
            conn.send(request(pool))
            head = await conn.wait_head()
            assert head.status == 200
            evs = await events_of(conn)
            assert [e[0] for e in evs] == [b'{"i": 0}', b'{"i": 1}', b'{"i": 2}', b"[DONE]"]
            stamps = [e[3] for e in evs]
            assert stamps == sorted(stamps) and stamps[0] > 0
            assert stamps[1] - stamps[0] >= 5_000_000  # the 10 ms sleep between the reads
            assert conn.t_head_ns is not None and conn.t_head_ns <= stamps[0]
            assert conn.reusable
            pool.release(conn)

    serve(script, test)
    assert connections == 1


def test_the_sink_gets_the_events_inside_the_read() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(HEAD + chunk(b"data: a\n\ndata: b\n\n"))
        await writer.drain()
        await asyncio.sleep(0.01)
        writer.write(chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        await writer.drain()

    async def test(pool: LeanPool) -> None:
        got: list[StampedEvent] = []
        conn = await pool.acquire()
        conn.send(request(pool), got.extend)
        await conn.wait_end()
        assert [e[0] for e in got] == [b"a", b"b", b"[DONE]"]
        assert got[0][3] == got[1][3] < got[2][3]
        assert await conn.next_events() == []  # nothing was queued

    serve(script, test)


def test_a_sink_that_raises_ends_the_response_with_its_error() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(HEAD + chunk(b"data: a\n\n"))
        await writer.drain()
        await asyncio.sleep(1)

    def sink(evs: list[StampedEvent]) -> None:
        raise ValueError("bad event")

    async def test(pool: LeanPool) -> None:
        conn = await pool.acquire()
        conn.send(request(pool), sink)
        with pytest.raises(ValueError, match="bad event"):
            await conn.wait_end()
        assert not conn.reusable

    serve(script, test)


def test_a_body_cut_short_keeps_its_events_then_raises_truncated() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(HEAD + chunk(b"data: a\n\n") + b"20\r\ndata: b")
        await writer.drain()
        writer.close()

    async def test(pool: LeanPool) -> None:
        conn = await pool.acquire()
        conn.send(request(pool))
        assert [e[0] for e in await conn.next_events()] == [b"a"]
        with pytest.raises(TruncatedBody):
            await conn.next_events()
        assert not conn.reusable

    serve(script, test)


def test_a_malformed_chunk_stops_the_response() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(HEAD + chunk(b"data: a\n\n") + b"zz\r\n")
        await writer.drain()
        await asyncio.sleep(1)

    async def test(pool: LeanPool) -> None:
        conn = await pool.acquire()
        conn.send(request(pool))
        with pytest.raises(MalformedChunk):
            await events_of(conn)

    serve(script, test)


def test_a_content_length_stream_and_a_non_200() -> None:
    body = b"data: x\n\n"

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n"
            % len(body)
            + body
        )
        await read_request(reader)
        writer.write(b"HTTP/1.1 503 Busy\r\nContent-Length: 4\r\n\r\nbusy")
        await writer.drain()

    async def test(pool: LeanPool) -> None:
        conn = await pool.acquire()
        conn.send(request(pool))
        assert [e[0] for e in await events_of(conn)] == [b"x"]
        pool.release(conn)
        again = await pool.acquire()
        assert again is conn
        conn.send(request(pool))
        head = await conn.wait_head()
        assert (head.status, head.reason) == (503, "Busy")
        assert await conn.next_events() == []
        assert not conn.reusable  # its body was not read

    serve(script, test)


def test_a_connection_closed_before_the_response_is_an_error() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.close()

    async def test(pool: LeanPool) -> None:
        conn = await pool.acquire()
        conn.send(request(pool))
        with pytest.raises(ConnectionError):
            await conn.wait_head()

    serve(script, test)


@pytest.mark.parametrize(
    "head",
    [b"NOT HTTP\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
     b"Content-Encoding: gzip\r\n\r\n"],
)  # fmt: skip
def test_a_head_the_client_cannot_read_is_an_error(head: bytes) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(head)
        await writer.drain()
        await asyncio.sleep(1)

    async def test(pool: LeanPool) -> None:
        conn = await pool.acquire()
        conn.send(request(pool))
        with pytest.raises(HeadError):
            await head_then_events(conn)
        assert not conn.reusable

    serve(script, test)
