"""A prototype HTTP/1.1 streaming client on ``asyncio.Protocol``: no aiohttp per read.

Not wired into the runner (issue 33, a later step); ``bench/transport_parsers.py
--e2e`` measures it against the aiohttp transport on the calibration server.

Each ``data_received`` is stamped with ``perf_counter_ns`` and its bytes go straight
into ``ChunkedSSEParser``: the events it completes are queued with that stamp and the
waiting request task is woken once per read (as aiohttp's ``StreamReader`` wakes its
reader), or, with a sink, handed to it right there, no task woken until the end. One
request at a time per connection, keep-alive, pooled by ``LeanPool``.

What the prototype does not do yet, where the aiohttp transport does: a body other than
a 200 event stream is not read (the response reports its status and head, the connection
is dropped); no TLS, proxies, redirects or Content-Encoding; no connect timeout of its
own (the caller's ``asyncio.timeout`` covers it).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from crossover.transport.chunked_sse import (
    BodyError,
    ChunkedSSEParser,
    MalformedChunk,
    StampedEvent,
)
from crossover.transport.sse import MAX_EVENT_BYTES

#: called from ``data_received`` with the events each read completed
Sink = Callable[[list[StampedEvent]], None]

#: a response head longer than this is an error
MAX_HEAD_BYTES = 64 * 1024


class HeadError(Exception):
    """The response head is not HTTP/1.1 this client can read."""


@dataclass(frozen=True, slots=True)
class ResponseHead:
    status: int
    reason: str
    #: header names lower-cased; a repeated header's values joined with ", "
    headers: dict[str, str]
    #: an HTTP/1.0 response: its connection closes unless it says keep-alive
    http10: bool = False

    @property
    def chunked(self) -> bool:
        te = self.headers.get("transfer-encoding", "")
        return te.rsplit(",", 1)[-1].strip().lower() == "chunked"

    @property
    def content_length(self) -> int | None:
        value = self.headers.get("content-length")
        if value is None or self.chunked:
            return None
        if not value.strip().isdigit():
            raise HeadError(f"a malformed Content-Length {value[:40]!r}")
        return int(value)

    def check_codings(self) -> None:
        """``HeadError`` for a body coded other than chunked (the prototype decodes none)."""
        te = self.headers.get("transfer-encoding")
        if te is not None and te.strip().lower() != "chunked":
            raise HeadError(f"Transfer-Encoding {te[:40]!r}: only chunked is read")
        ce = self.headers.get("content-encoding")
        if ce is not None and ce.strip().lower() != "identity":
            raise HeadError(f"Content-Encoding {ce[:40]!r}: the prototype decodes none")

    @property
    def keep_alive(self) -> bool:
        connection = self.headers.get("connection", "").lower()
        return "keep-alive" in connection if self.http10 else "close" not in connection

    @property
    def event_stream(self) -> bool:
        ctype = self.headers.get("content-type", "")
        return ctype.split(";", 1)[0].strip().lower() == "text/event-stream"


def parse_head(buf: bytes) -> tuple[ResponseHead, int] | None:
    """The head at the start of ``buf`` and its length, or None while it is incomplete."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        if len(buf) > MAX_HEAD_BYTES:
            raise HeadError(f"no end of the response head in {MAX_HEAD_BYTES} bytes")
        return None
    lines = buf[:end].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise HeadError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise HeadError(f"a malformed header line: {line[:80]!r}")
        key = name.lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    reason = parts[2] if len(parts) > 2 else ""
    return ResponseHead(int(parts[1]), reason, headers, parts[0] == "HTTP/1.0"), end + 4


class LeanConnection(asyncio.Protocol):
    """One keep-alive connection; one request in flight at a time."""

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self.transport: asyncio.Transport | None = None
        self._max = max_event_bytes
        self._head_buf = b""
        self.head: ResponseHead | None = None
        self.t_head_ns: int | None = None
        self._parser: ChunkedSSEParser | None = None
        #: events completed and not yet taken, each stamped with its read's arrival
        self._events: deque[StampedEvent] = deque()
        self._error: BaseException | None = None
        self._ended = False  # the body ended (framing) or the connection closed
        self._waiter: asyncio.Future[None] | None = None
        self._sink: Sink | None = None
        self.closed = False

    # --- asyncio.Protocol ------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses: no isinstance check
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        t = time.perf_counter_ns()
        parser = self._parser
        if parser is None:
            if self._ended or self._error is not None:
                return  # not ours (between requests, or after an error): dropped
            self._head_buf += data
            try:
                got = parse_head(self._head_buf)
            except HeadError as exc:
                self._fail(exc)
                return
            if got is None:
                return
            head, used = got
            self.head, self.t_head_ns = head, t
            data, self._head_buf = self._head_buf[used:], b""
            if head.status != 200 or not head.event_stream:
                self._ended = True  # the prototype reads no other body
                self._wake()
                return
            try:
                head.check_codings()
                parser = self._parser = ChunkedSSEParser(
                    head.chunked, head.content_length, self._max
                )
            except HeadError as exc:
                self._fail(exc)
                return
            if not data:
                self._wake()
                return
        try:
            events = parser.feed(data, t)
        except BodyError as exc:
            self._deliver(exc.events)
            self._fail(exc)
            return
        if events:
            self._deliver(events)
        if parser.done:
            self._ended = True
        if self._ended or (events and self._sink is None):
            self._wake()

    def _deliver(self, events: list[StampedEvent]) -> None:
        sink = self._sink
        if sink is None:
            self._events.extend(events)
            return
        try:
            sink(events)
        except Exception as exc:  # the consumer broke: the response is over for it
            if self._error is None:
                self._fail(exc)

    def connection_lost(self, exc: BaseException | None) -> None:
        self.closed = True
        t = time.perf_counter_ns()
        parser = self._parser
        if parser is not None and not self._ended and self._error is None:
            try:
                self._deliver(parser.close(t))
            except BodyError as err:
                self._deliver(err.events)
                self._error = self._error or err
        elif self._parser is None and self._error is None and not self._ended:
            self._error = exc or ConnectionResetError("connection closed before a response")
        self._ended = True
        self._wake()

    # --- the request side ----------------------------------------------------------

    def _fail(self, exc: BaseException) -> None:
        self._error = exc
        self._ended = True
        if self.transport is not None:
            self.transport.close()
        self._wake()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def send(self, request: bytes, sink: Sink | None = None) -> None:
        """Write one request; the connection must be idle.

        With ``sink``, the events go to it from ``data_received`` itself, in the read
        that completed them, and the request's task sleeps until ``wait_end``: no task
        wakes per read. Without, ``next_events`` takes them.
        """
        assert self.transport is not None
        self._sink = sink
        self.head = None
        self.t_head_ns = None
        self._parser = None
        self._events.clear()
        self._error = None
        self._ended = False
        self.transport.write(request)

    async def wait_head(self) -> ResponseHead:
        """The response head (raises the connection's error, if it came first)."""
        while self.head is None:
            if self._error is not None:
                raise self._error
            await self._wait()
        return self.head

    async def next_events(self) -> list[StampedEvent]:
        """The events queued since the last call, waiting for at least one; an empty
        list at the end of the body. A ``BodyError`` or connection error is raised once
        the events before it were taken."""
        while not self._events:
            if self._error is not None:
                raise self._error
            if self._ended:
                return []
            await self._wait()
        out = list(self._events)
        self._events.clear()
        return out

    async def wait_end(self) -> None:
        """The end of the response (raises its error, if any, or the sink's)."""
        while not self._ended:
            await self._wait()
        if self._error is not None:
            raise self._error

    async def _wait(self) -> None:
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    @property
    def reusable(self) -> bool:
        """Idle and able to carry another request."""
        return (
            not self.closed
            and self._ended
            and self._error is None
            and self.head is not None
            and self.head.keep_alive
            and self._parser is not None
            and self._parser.done
        )

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class LeanPool:
    """Keep-alive connections to one ``host:port``, no cap (the load strategy is it)."""

    def __init__(self, host: str, port: int, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self.host = host
        self.port = port
        self._max = max_event_bytes
        self._idle: list[LeanConnection] = []

    async def open(self, count: int) -> None:
        """Connect ``count`` connections before the load and keep them idle."""
        loop = asyncio.get_running_loop()
        made = await asyncio.gather(
            *(
                loop.create_connection(lambda: LeanConnection(self._max), self.host, self.port)
                for _ in range(count)
            )
        )
        self._idle.extend(proto for _, proto in made)

    async def acquire(self) -> LeanConnection:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
        loop = asyncio.get_running_loop()
        _, proto = await loop.create_connection(
            lambda: LeanConnection(self._max), self.host, self.port
        )
        return proto

    def release(self, conn: LeanConnection) -> None:
        if conn.reusable:
            self._idle.append(conn)
        else:
            conn.close()

    def close(self) -> None:
        for conn in self._idle:
            conn.close()
        self._idle.clear()


def post_request(host: str, port: int, path: str, body: bytes) -> bytes:
    """The bytes of one ``POST`` with a JSON body."""
    return (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode("latin-1") + body


__all__ = [
    "HeadError",
    "LeanConnection",
    "LeanPool",
    "MalformedChunk",
    "ResponseHead",
    "parse_head",
    "post_request",
]
