"""The lean transport: ``stream_request`` on an ``asyncio.Protocol``, no aiohttp per read.

Same signature, same record and the same error kinds as ``crossover.transport.http``'s
``stream_request`` (the transport tests run against both); what differs is the path of
the bytes. Each ``data_received`` is stamped with ``perf_counter_ns`` and goes straight
into ``ChunkedSSEParser`` (HTTP/1.1 chunked framing and SSE in one pass): the events it
completes carry the stamp of the read that brought their last byte, as the aiohttp
transport's ``StampingHandler`` gives them. The request's read loop (``EventReader``) is
a sink: the events of every connection read in one poll of the loop go to their sinks
in one ``call_soon`` callback (``_Batch``), after all of that poll's reads were stamped,
and the request's task is woken only when its stream ends or breaks, not per read.
aiohttp's payload parser, ``StreamReader`` and ``readchunk`` were most of the client's
CPU at 256 streams (``docs/results/transport_parsers.md``); then the task's wake-up per
read and the dialect's ``ChunkInfo`` per event (``docs/results/client_overhead_lean.md``).

Plain ``http://`` only: an ``https://`` URL (and anything else) is sent through an
aiohttp session the ``LeanSession`` opens for it, the aiohttp transport unchanged (TLS
is where aiohttp is simpler, and a TLS client's CPU is not the parser's).

Where it differs from the aiohttp transport, on purpose:

* it asks for ``Accept-Encoding: identity`` and decodes no Content-Encoding: a 200
  event stream sent compressed anyway is ``undecodable`` (aiohttp asks for gzip and
  deflate and decodes them);
* it follows no redirect (a 3xx is an ``http_error``; aiohttp follows them);
* the events of a read that also broke the body's framing are still read (aiohttp's
  ``StreamReader`` raises its payload error before the chunks it holds).

A request is one keep-alive connection of the session's pool, one request at a time;
which connection is reused, and what a close before the response head means, is
``crossover.transport.reuse``'s rule, the aiohttp transport's too.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any
from urllib.parse import urlsplit

import orjson

from crossover.records.model import ErrorKind, RequestRecord
from crossover.transport.base import StreamOptions, Transport
from crossover.transport.chunked_sse import (
    BodyError,
    ChunkedSSEParser,
    OversizeEvent,
    StampedEvent,
)
from crossover.transport.head import HeadError, ResponseHead, parse_head
from crossover.transport.http import AiohttpTransport
from crossover.transport.protocol import (
    is_json,
    media_type,
    why_not_a_stream,
)
from crossover.transport.reader import EventReader, Timeouts, fail, keep
from crossover.transport.reuse import (
    SETTLE_S,
    Habits,
    ServerHabit,
    Stale,
    closed_how,
    judge_close,
    peer_closed,
    retrying,
)
from crossover.transport.sse import MAX_EVENT_BYTES

#: bytes of a non-200 body kept for the error (as the aiohttp transport reads them)
ERROR_BODY_BYTES = 4096
#: a health answer read by ``open_connections`` larger than this drops its connection
HEALTH_BODY_BYTES = 1024 * 1024
USER_AGENT = f"Python/{sys.version_info[0]}.{sys.version_info[1]} crossover-lean"

# connection states
_IDLE, _HEAD, _SSE, _BODY = range(4)

#: (host, port, Host header, path with query)
Target = tuple[str, int, str, str]


class _Closed(Exception):
    """The connection closed before a response head (``reuse.judge_close`` says what
    that means)."""


class _CannotConnect(Exception):
    def __init__(self, os_error: OSError) -> None:
        super().__init__(str(os_error))
        self.os_error = os_error


class _ConnectTimeout(Exception):
    pass


class _Lost(Exception):
    """The connection closed while a request waited for its response head."""


class _Batch:
    """The connections with events queued for their sinks, drained in one ``call_soon``
    callback: it runs after the reads of the loop's poll were all stamped, and costs one
    callback per poll instead of a Future and a task step per read."""

    __slots__ = ("loop", "_due", "_scheduled")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._due: list[LeanStreamConnection] = []
        self._scheduled = False

    def add(self, conn: LeanStreamConnection) -> None:
        self._due.append(conn)
        if not self._scheduled:
            self._scheduled = True
            self.loop.call_soon(self._run)

    def _run(self) -> None:
        due, self._due = self._due, []
        self._scheduled = False
        for conn in due:
            conn.drain()


class LeanStreamConnection(asyncio.Protocol):
    """One keep-alive connection; one request at a time.

    ``data_received`` stamps each read; before the head it gathers the head, then the
    body goes to a ``ChunkedSSEParser``: read as SSE (``events``, then ``final`` once the
    body ended: the event the end dispatched, if any), or, for a response that is no
    200 event stream, only unframed (``body_parts``, up to ``body_cap`` bytes). An error
    (the framing broke, an event over the cap, the connection lost) is ``error``, after
    the events before it.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, batch: _Batch | None = None) -> None:
        self._loop = loop
        self._batch = batch if batch is not None else _Batch(loop)
        self._queued = False
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._state = _IDLE
        self._buf = b""
        self._max = MAX_EVENT_BYTES
        self.head: ResponseHead | None = None
        #: why a 200 event stream is not read (a Content-Encoding), None when it is
        self.refused: str | None = None
        self.parser: ChunkedSSEParser | None = None
        self.events: list[StampedEvent] = []
        self.final: list[StampedEvent] | None = None
        self.error: BaseException | None = None
        self.error_t = 0
        self.body_parts: list[bytes] = []
        self.body_len = 0
        self.body_cap = 0
        #: the request's read loop once it reads the stream: the events of each read go
        #: straight to it, and the task is woken only at the end, an error or a break
        self.sink: EventReader | None = None
        #: an exception the sink raised (the task raises it, as the loop would have)
        self.sink_error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        #: taken idle from the pool (a close before its response is then a stale
        #: connection, retried, when it idled ``STALE_IDLE_S``); False for a new one
        self.reused = False
        #: when it last received bytes (or opened), and how long it had idled when the
        #: request now on it was written
        self.last_rx_ns = time.perf_counter_ns()
        self.idle_ns = 0
        #: when its last response ended and it was let go (None while a request is on
        #: it), and the habit of the server that response came from
        self.released_ns: int | None = None
        self.habit: ServerHabit | None = None

    # --- asyncio.Protocol ------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses: no isinstance check
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        t = self.last_rx_ns = time.perf_counter_ns()
        if self._state == _SSE:  # the hot path: stamp, frame, queue; no task wake per read
            parser = self.parser
            assert parser is not None
            try:
                evs = parser.feed(data, t)
            except BodyError as exc:
                self.events += exc.events
                self._broke(exc, t)
                return
            if evs:
                self.events += evs
                if self.sink is None:
                    self._wake()  # the task reads them itself (it has not set its sink yet)
                elif not self._queued:
                    # read by the sink after every read of this poll was stamped (as the
                    # task woken per read was), in one callback for all connections
                    self._queued = True
                    self._batch.add(self)
            if parser.done:
                self._end(t)
                self._wake()
        elif self._state == _HEAD:
            self._head(data, t)
        elif self._state == _BODY:
            self._body(data, t)
        else:  # bytes no request asked for: the connection cannot be trusted with one
            self.close()

    def eof_received(self) -> None:
        if self.habit is not None:  # the server's FIN with no request on the connection
            self.habit.saw_close(self.released_ns)

    def connection_lost(self, exc: BaseException | None) -> None:
        self.closed = True
        t = time.perf_counter_ns()
        if self.error is None and self.final is None:
            parser = self.parser
            if self._state in (_SSE, _BODY) and parser is not None:
                try:
                    evs = parser.close(t)  # a body that ends with the connection ends here
                except BodyError as err:
                    self.events += err.events
                    self.error, self.error_t = err, t
                else:
                    if self._state == _SSE:
                        self.final = evs
                    else:
                        self.final = []
            elif self._state == _HEAD:
                lost = _Lost(str(exc) if exc else "closed")
                lost.__cause__ = exc  # a reset (RST) or None (FIN), for the record
                self.error, self.error_t = lost, t
        self._state = _IDLE
        self._wake()

    # --- parts of data_received --------------------------------------------------------

    def drain(self) -> None:
        """The batch's callback: the queued events to the sink; the task is woken only
        when the sink broke the stream or raised."""
        self._queued = False
        sink = self.sink
        evs = self.events
        if sink is None or not evs:
            return  # the task took them (the stream ended, or it broke)
        self.events = []
        try:
            sink.take(evs, False)
        except Exception as exc:  # the task raises it, as its own loop would have
            self.sink = None
            self.sink_error = exc
            self._wake()
            return
        if sink.broken:
            self.sink = None  # nothing after a break is read (the task drops the connection)
            self._wake()

    def _head(self, data: bytes, t: int) -> None:
        buf = self._buf + data if self._buf else data
        while True:
            try:
                got = parse_head(buf)
            except HeadError as exc:
                self._broke(exc, t)
                return
            if got is None:
                self._buf = buf
                return
            head, used = got
            buf = buf[used:]
            if not (100 <= head.status < 200):
                break  # an informational head (100 Continue) precedes the response's own
        self._buf = b""
        self.head = head
        try:
            if head.status in (204, 304):
                parser = ChunkedSSEParser(False, 0, self._max)
            else:
                parser = ChunkedSSEParser(head.chunked, head.content_length, self._max)
        except HeadError as exc:
            self._broke(exc, t)
            return
        self.parser = parser
        if head.status == 200 and head.event_stream:
            self.refused = _refused_coding(head)
        if head.status == 200 and head.event_stream and self.refused is None:
            self._state = _SSE
        else:
            # the body is text to report, JSON to classify, or not read at all
            self._state = _BODY
            self.body_cap = ERROR_BODY_BYTES if head.status != 200 else self._max + 1
        if parser.done:
            self._end(t)
        elif buf:
            self.data_received_at(buf, t)
            return
        self._wake()

    def data_received_at(self, data: bytes, t: int) -> None:
        """The rest of a read after its head, with the read's stamp."""
        if self._state == _SSE:
            parser = self.parser
            assert parser is not None
            try:
                evs = parser.feed(data, t)
            except BodyError as exc:
                self.events += exc.events
                self._broke(exc, t)
                return
            self.events += evs
            if parser.done:
                self._end(t)
            self._wake()
        else:
            self._body(data, t)
            self._wake()

    def _body(self, data: bytes, t: int) -> None:
        parser = self.parser
        assert parser is not None
        try:
            body = parser.body(data)
        except BodyError as exc:
            self._broke(exc, t)
            return
        if body and self.body_len < self.body_cap:
            self.body_parts.append(body)
            self.body_len += len(body)
        if parser.done:
            self.final = []
            self._state = _IDLE
            self._wake()
        elif self.body_len >= self.body_cap:
            self._wake()

    def _end(self, t: int) -> None:
        """The body ended by its framing: the event still waiting for its blank line."""
        parser = self.parser
        assert parser is not None
        try:
            self.final = parser.close(t)
        except BodyError as exc:  # pragma: no cover - the framing had ended
            self.events += exc.events
            self.error, self.error_t = exc, t
        self._state = _IDLE

    def _broke(self, exc: BaseException, t: int) -> None:
        self.error, self.error_t = exc, t
        self._state = _IDLE
        self.close()
        self._wake()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    # --- the request side ------------------------------------------------------------

    def send(self, request: bytes, max_event_bytes: int) -> bool:
        """Write one request (False: the connection is closing, nothing was written)."""
        transport = self.transport
        if self.closed or transport is None or transport.is_closing():
            return False
        if self.reused and peer_closed(transport):
            return False  # the server closed it in the pool: its FIN is not read yet
        self.idle_ns = time.perf_counter_ns() - self.last_rx_ns
        self.released_ns = None
        self._state = _HEAD
        self._max = max_event_bytes
        self.head = None
        self.refused = None
        self.parser = None
        self.events = []
        self.final = None
        self.error = None
        self.body_parts = []
        self.body_len = 0
        self.sink = None
        self.sink_error = None
        transport.write(request)
        return True

    async def wait(self) -> None:
        """Until ``data_received`` or ``connection_lost`` has something for the request."""
        self._waiter = self._loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    async def response_head(self) -> ResponseHead:
        while self.head is None:
            if self.error is not None:
                if isinstance(self.error, _Lost):
                    raise _Closed from self.error
                raise self.error
            await self.wait()
        return self.head

    async def read_body(self) -> bytes:
        """The body (of a response read as no event stream), up to ``body_cap`` bytes."""
        while self.final is None and self.error is None and self.body_len < self.body_cap:
            await self.wait()
        return b"".join(self.body_parts)

    @property
    def reusable(self) -> bool:
        """The response ended by its framing, fully read, and the connection stays open."""
        return (
            not self.closed
            and self.error is None
            and self.final is not None
            and self.head is not None
            and self.head.keep_alive
            and self.parser is not None
            and self.parser.done
        )

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def _refused_coding(head: ResponseHead) -> str | None:
    """Why an event stream's codings cannot be read (this transport decodes none)."""
    te = head.headers.get("transfer-encoding")
    if te is not None and te.strip().lower() != "chunked":
        return f"Transfer-Encoding {te[:40]!r}: the lean transport reads only chunked"
    ce = head.headers.get("content-encoding")
    if ce is not None and ce.strip().lower() not in ("", "identity"):
        return (
            f"Content-Encoding {ce[:40]!r} (asked for identity): the lean transport "
            "decodes none; --transport aiohttp decodes gzip and deflate"
        )
    return None


class LeanSession(Transport):
    """The lean transport (``crossover.transport.base.Transport``): keep-alive pools per
    ``host:port``, the run's headers, and, for ``https://`` URLs, the aiohttp transport
    (``fallback``)."""

    def __init__(
        self, headers: dict[str, str] | None = None, timeouts: Timeouts | None = None
    ) -> None:
        self.timeouts = timeouts or Timeouts()
        self._header_dict = dict(headers or {})
        fixed = {"accept": "*/*", "accept-encoding": "identity", "user-agent": USER_AGENT}
        names = {
            "accept": "Accept",
            "accept-encoding": "Accept-Encoding",
            "user-agent": "User-Agent",
        }
        lines: dict[str, str] = {k: f"{names[k]}: {v}" for k, v in fixed.items()}
        for name, value in self._header_dict.items():
            if any(c in name + value for c in "\r\n\0") or not name or ":" in name:
                raise ValueError(f"a header that cannot be sent: {name[:40]!r}")
            lines[name.lower()] = f"{name}: {value}"
        lines.pop("content-length", None)
        lines.pop("host", None)
        lines.pop("content-type", None)  # the request's own, as aiohttp's post gives it
        self._lines = "".join(v + "\r\n" for v in lines.values())
        self._idle: dict[tuple[str, int], list[LeanStreamConnection]] = {}
        self.habits = Habits()
        self._open: set[LeanStreamConnection] = set()
        self._targets: dict[str, Target | None] = {}
        self._batch: _Batch | None = None  # the running loop's, made by ``acquire``
        self._fallback: AiohttpTransport | None = None
        self.closed = False

    async def close(self) -> None:
        self.closed = True
        for conn in list(self._open):
            conn.close()
        self._open.clear()
        self._idle.clear()
        # the transports close their sockets in a callback: let it run before the loop
        # may end (asyncio.run), so no socket outlives the session
        await asyncio.sleep(0)
        if self._fallback is not None:
            await self._fallback.close()

    def fallback(self) -> AiohttpTransport:
        """The aiohttp transport for what this one does not send (``https://``)."""
        if self._fallback is None:
            self._fallback = AiohttpTransport(self._header_dict or None, self.timeouts)
        return self._fallback

    async def stream(
        self, url: str, body: dict[str, Any], record: RequestRecord, options: StreamOptions
    ) -> RequestRecord:
        return await stream_request(self, url, body, record, options)

    async def open_connections(
        self, base_url: str, count: int, path: str = "/health", limit_s: float = 10.0
    ) -> int:
        return await open_connections(self, base_url, count, path, limit_s)

    def target(self, url: str) -> Target | None:
        """Where a plain ``http://`` URL goes; None for any other (aiohttp sends it)."""
        try:
            return self._targets[url]
        except KeyError:
            pass
        parts = urlsplit(url)
        got: Target | None = None
        if parts.scheme == "http" and parts.hostname:
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            host_header = parts.netloc.rpartition("@")[2]
            got = (parts.hostname, parts.port or 80, host_header, path)
        self._targets[url] = got
        return got

    def request(
        self, target: Target, method: str, payload: bytes | None, close: bool = False
    ) -> bytes:
        """The request's bytes (``close``: with ``Connection: close``)."""
        head = f"{method} {target[3]} HTTP/1.1\r\nHost: {target[2]}\r\n{self._lines}"
        if close:
            head += "Connection: close\r\n"
        if payload is None:
            return (head + "\r\n").encode("latin-1")
        head += f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
        return head.encode("latin-1") + payload

    def habit(self, target: Target) -> ServerHabit:
        """What the session has seen of ``target``'s server's connections."""
        return self.habits.of(target[0], target[1])

    async def acquire(self, target: Target, fresh: bool = False) -> LeanStreamConnection:
        """An idle connection to ``target``, else a new one (``fresh``: always new). A
        pooled one the server has closed (its FIN in the socket, not read yet) is
        dropped, never written on."""
        key = (target[0], target[1])
        idle = self._idle.get(key)
        while idle and not fresh:
            conn = idle.pop()
            if not conn.closed and not peer_closed(conn.transport):
                conn.reused = True
                return conn
            if conn.habit is not None:
                conn.habit.saw_close(conn.released_ns)
            self.drop(conn)
        loop = asyncio.get_running_loop()
        batch = self._batch
        if batch is None or batch.loop is not loop:
            batch = self._batch = _Batch(loop)
        try:
            async with asyncio.timeout(self.timeouts.connect_s):
                _, conn = await loop.create_connection(
                    lambda: LeanStreamConnection(loop, batch), target[0], target[1]
                )
        except TimeoutError:
            raise _ConnectTimeout from None
        except OSError as exc:
            raise _CannotConnect(exc) from exc
        self._open.add(conn)
        return conn

    def release(
        self, conn: LeanStreamConnection, target: Target, habit: ServerHabit | None = None
    ) -> None:
        """Back to the pool when its response was read whole and it stays open; after a
        response to a generation request (``habit``: its server's, while not known) it
        is held out of the pool for ``SETTLE_S`` first."""
        if not conn.reusable or self.closed or (habit is not None and habit.closes):
            self.drop(conn)  # (a server that closes after a streamed response: never reused)
            return
        conn.released_ns = time.perf_counter_ns()
        conn.habit = habit
        if habit is not None and habit.closes is None:
            asyncio.get_running_loop().call_later(SETTLE_S, self._settled, conn, target, habit)
        else:
            self._idle.setdefault((target[0], target[1]), []).append(conn)

    def _settled(self, conn: LeanStreamConnection, target: Target, habit: ServerHabit) -> None:
        still_open = not conn.closed and not peer_closed(conn.transport)
        if not still_open:
            habit.saw_close(conn.released_ns)
        habit.settled(still_open)
        if still_open and not self.closed and not habit.closes:
            self._idle.setdefault((target[0], target[1]), []).append(conn)
        else:
            self.drop(conn)

    def drop(self, conn: LeanStreamConnection) -> None:
        conn.close()
        self._open.discard(conn)


async def stream_request(
    session: LeanSession,
    url: str,
    body: dict[str, Any],
    record: RequestRecord,
    options: StreamOptions,
) -> RequestRecord:
    """``crossover.transport.http.stream_request`` on the lean transport: the same
    record, the same error kinds. A URL other than ``http://`` (TLS) goes through the
    session's aiohttp fallback, that transport unchanged."""
    target = session.target(url)
    if target is None:
        return await session.fallback().stream(url, body, record, options)
    payload = orjson.dumps(body)

    async def attempt(habit: ServerHabit | None, close: bool) -> RequestRecord:
        request = session.request(target, "POST", payload, close)
        return await _attempt(session, target, url, request, record, options, habit)

    return await retrying(attempt, record, session.habit(target))


async def _attempt(
    session: LeanSession,
    target: Target,
    url: str,
    request: bytes,
    record: RequestRecord,
    options: StreamOptions,
    habit: ServerHabit | None = None,
) -> RequestRecord:
    # the read loop of http._attempt, event for event (``EventReader.take``): only where the
    # events come from differs (each carries its own read's stamp, the framing is the
    # parser's), and that it runs inside ``data_received``, so the task sleeps until the
    # stream ends or breaks instead of waking per read
    dialect, timeouts, max_event_bytes = options.dialect, options.limits, options.max_event_bytes
    loop = asyncio.get_running_loop()
    now = loop.time
    perf = time.perf_counter_ns
    total_deadline = now() + timeouts.total_s
    conn: LeanStreamConnection | None = None
    reusable = False
    rd = EventReader(
        record, dialect, options.endpoint, timeouts, options.keep_text, now, total_deadline
    )
    try:
        async with asyncio.timeout_at(min(total_deadline, now() + timeouts.first_token_s)) as cm:
            rd.cm = cm
            record.t_send_ns = perf()
            conn = await session.acquire(target)
            if not conn.send(request, max_event_bytes):
                session.drop(conn)
                if not conn.reused:
                    return fail(record, "connection_error", "a new connection closed at once")
                raise Stale("a reused idle connection closed before the request was written")
            try:
                head = await conn.response_head()
            except _Closed as exc:
                return judge_close(
                    record,
                    reused=conn.reused,
                    closed_before=False,  # send() saw it open
                    idle_ns=conn.idle_ns,
                    how=closed_how(exc.__cause__),
                )
            record.status = head.status
            if head.status != 200:
                text = (await conn.read_body())[:ERROR_BODY_BYTES].decode("utf-8", "replace")
                reusable = conn.reusable
                if head.status == 404:
                    text += f" (no such path {url}; give the server's base URL as --url)"
                return fail(record, "http_error", f"HTTP {head.status}: {text}")
            if not head.event_stream:
                declared = head.headers.get("content-type")
                read = is_json(declared, media_type(declared))
                got = await conn.read_body() if read else None
                return fail(record, *why_not_a_stream(declared, got, max_event_bytes), perf())
            if conn.refused is not None:
                return fail(record, "undecodable", conn.refused)
            rd.phase = "first token"
            too_large: OversizeEvent | None = None
            t_err = 0
            while not rd.broken:
                if conn.sink_error is not None:
                    raise conn.sink_error
                evs = conn.events
                if evs:  # the events before the sink was set (or after it broke)
                    conn.events = []
                    rd.take(evs, False)
                elif conn.error is not None:
                    if not isinstance(conn.error, OversizeEvent):
                        raise conn.error
                    too_large, t_err = conn.error, conn.error_t
                    rd.broken = True
                    break
                elif conn.final is not None:
                    evs, conn.final = conn.final, []
                    rd.take(evs, True)
                    break
                else:
                    conn.sink = rd  # from now on each read's events go to rd at once
                    await conn.wait()
            conn.sink = None  # the rest (final, an error) is read here
            if too_large is not None:
                fail(record, "event_too_large", str(too_large), t_err)
            if not rd.broken:
                record.t_done_ns = rd.t_end if rd.t_end is not None else perf()
                reusable = conn.reusable
    except _ConnectTimeout:
        return fail(record, "timeout", f"no connection within {timeouts.connect_s:g} s")
    except TimeoutError:
        timed_out = rd.timed_out(timeouts)
        if timed_out is not None:
            return timed_out
    except Stale:
        raise
    except _CannotConnect as exc:
        return fail(record, "connection_error", f"cannot connect: {exc.os_error}")
    except BodyError as exc:  # the connection closed mid-body, or the framing broke
        if rd.t_end is not None and record.error_kind is None:
            record.t_done_ns = rd.t_end  # dropped after [DONE]: the response was complete
        else:
            keep(record, rd.t_last, rd.text_chars)
            first = conn.parser.first_bytes if conn is not None and conn.parser else None
            kind: ErrorKind = "stream_truncated" if first is not None else "connection_error"
            return fail(record, kind, f"connection lost: {exc}")
    except (HeadError, OSError) as exc:
        keep(record, rd.t_last, rd.text_chars)
        return fail(record, "connection_error", f"{type(exc).__name__}: {exc}")
    finally:
        if conn is not None:
            # a read queued in the batch before a cancellation or a timeout reached us
            # must not reach the record after this request let go of it
            conn.sink = None
            if reusable:
                # only an event stream's end shows what the server does after one
                h = conn.head
                streamed = h is not None and h.status == 200 and h.event_stream
                session.release(conn, target, habit if streamed else None)
            else:
                session.drop(conn)  # mid-response, broken, or not read to its end
    head_bytes = conn.parser.first_bytes if conn is not None and conn.parser else None
    return rd.finish(dialect, head_bytes)


async def open_connections(
    session: LeanSession,
    base_url: str,
    count: int,
    path: str = "/health",
    limit_s: float = 10.0,
) -> int:
    """``crossover.transport.http.open_connections`` on the lean transport: ``count``
    concurrent GETs of ``path`` on new connections, each left in the pool when its
    answer (any HTTP answer) was read to its end; each given up after ``limit_s``.
    Returns the requests answered."""
    target = session.target(base_url + path)
    if target is None:
        return await session.fallback().open_connections(base_url, count, path, limit_s)
    request = session.request(target, "GET", None)

    async def one() -> bool:
        conn: LeanStreamConnection | None = None
        try:
            async with asyncio.timeout(limit_s):
                conn = await session.acquire(target)
                if not conn.send(request, MAX_EVENT_BYTES):
                    return False
                head = await conn.response_head()
                conn.body_cap = max(conn.body_cap, HEALTH_BODY_BYTES)
                await conn.read_body()
                return head is not None
        except (
            _Closed, _CannotConnect, _ConnectTimeout, HeadError, BodyError, OSError, TimeoutError
        ):  # fmt: skip
            return False
        finally:
            if conn is not None:
                session.release(conn, target)

    results = await asyncio.gather(*(one() for _ in range(max(count, 0))))
    return sum(results)
