"""One shared aiohttp session per run; one streamed request -> one raw record.

Arrival times are taken where the bytes enter the process: the session's connections use
``StampingHandler``, aiohttp's protocol with a ``perf_counter_ns`` stamp in each
``data_received`` (paired with how many body bytes the response had then). The read loop
maps each HTTP chunk it reads to the stamp of the ``data_received`` that brought its last
byte, so a chunk waiting while the loop ran other streams' work (many streams ending at
once) keeps its true arrival. A session without the handler falls back to a stamp taken
when the read returns. Timeouts are separate: connect,
first token, gap between token-carrying chunks, and total; a single
``asyncio.timeout`` is rescheduled as the phase changes (no task per read). Only a
token re-arms the gap limit: a comment, a heartbeat, an empty or role-only event is not
progress between tokens.

The events each read completes go to ``EventReader`` (``crossover.transport.reader``),
the read loop both transports share: what it keeps, where the record stops (``[DONE]``,
the first event that breaks the response) and how JSON is read are written there. Here:
bytes that are not UTF-8 and an event over the size cap break the response too, after
which the connection is dropped; a 200 that is not ``text/event-stream`` is not read as
a stream at all: one JSON body is ``not_streamed``, anything else ``content_type``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import time
from collections import deque
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson
from aiohttp.client_proto import ResponseHandler
from aiohttp.client_reqrep import ConnectionKey

from crossover.records.model import ErrorKind, RequestRecord
from crossover.transport.base import StreamOptions, Transport
from crossover.transport.protocol import (
    is_decoding_error,
    is_event_stream,
    media_type,
    not_a_stream,
)
from crossover.transport.reader import (
    AFTER_DONE_S,
    GAP_SLACK,
    EventReader,
    Timeouts,
    clean_server_text,
    fail,
    keep,
)
from crossover.transport.reuse import (
    SETTLE_S,
    STALE_BACKOFF_S,
    STALE_RETRIES,
    Habits,
    ServerHabit,
    Stale,
    closed_how,
    judge_close,
    peer_closed,
    retrying,
)
from crossover.transport.sse import EventTooLarge, SSEParser

__all__ = [
    "AFTER_DONE_S",
    "GAP_SLACK",
    "READ_BUFSIZE",
    "STALE_BACKOFF_S",
    "STALE_RETRIES",
    "AiohttpTransport",
    "PoolConnector",
    "StampingHandler",
    "StreamOptions",
    "Timeouts",
    "clean_server_text",
    "make_session",
    "open_connections",
    "stamp_arrivals",
    "stream_request",
]

READ_BUFSIZE = 4 * 1024 * 1024  # long contexts: a 64 KiB buffer throttles (vLLM #39963)
#: the habit of the server the request being written goes to (``stream_request`` sets
#: it around the write; the connection keeps it for what follows the response)
_HABIT: contextvars.ContextVar[ServerHabit | None] = contextvars.ContextVar(
    "crossover_habit", default=None
)
_JSON = {"Content-Type": "application/json"}
_CLOSE = {"Content-Type": "application/json", "Connection": "close"}


class StampingHandler(ResponseHandler):
    """aiohttp's connection protocol, stamping every ``data_received``.

    ``rx`` holds ``(perf_counter_ns at arrival, body bytes of the current response fed
    so far)`` for the response ``rx_payload`` (its ``StreamReader``); a new response on
    the connection gets a new deque, so a reader holding the old one is never confused by
    the next request's bytes. It also keeps what ``crossover.transport.reuse`` judges a
    close by: how long it idled before its request, whether the server had closed it
    then, and, between requests, when its response ended and whose habit it shows.
    """

    rx_payload: object | None = None
    rx: deque[tuple[int, int]] | None = None
    #: when the connection last received bytes (or opened): it has idled since
    last_rx_ns: int = 0
    #: how long it had idled when the request now on it was written
    idle_ns: int = 0
    #: the server had closed the connection when the request now on it was written
    closed_before: bool = False
    #: when its last response ended and the connection was let go: None while a request
    #: is on it
    released_ns: int | None = None
    #: the habit of the server its last streamed response came from (a close soon after
    #: it, with no request on the connection, shows that the server closes after one)
    habit: ServerHabit | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.last_rx_ns = time.perf_counter_ns()
        super().connection_made(transport)

    def set_response_params(self, **kwargs: Any) -> None:
        # called as each request is about to be written on the connection
        self.idle_ns = time.perf_counter_ns() - self.last_rx_ns
        self.closed_before = peer_closed(self.transport)
        self.released_ns = None
        self.habit = _HABIT.get()
        super().set_response_params(**kwargs)

    def is_connected(self) -> bool:
        """aiohttp's check before it hands out a pooled connection: also closed when the
        server's FIN (or reset) is in the socket, not yet read (never written on then)."""
        if not super().is_connected():
            return False
        if self.released_ns is not None and peer_closed(self.transport):
            if self.habit is not None:
                self.habit.saw_close(self.released_ns)
            return False
        return True

    def feed_data(self, data: Any, *args: Any) -> None:
        # each response parsed: only an event stream's end shows what the server does
        # after one (llama-server keeps a connection its error or JSON answer came on)
        message = data[0]
        if self.habit is not None and not (
            message.code == 200
            and media_type(message.headers.get("Content-Type")) == "text/event-stream"
        ):
            self.habit = None
        super().feed_data(data, *args)

    def eof_received(self) -> None:
        if self.habit is not None:  # the server's FIN with no request on the connection
            self.habit.saw_close(self.released_ns)
        super().eof_received()

    def connection_lost(self, exc: BaseException | None) -> None:
        super().connection_lost(exc)
        exception = getattr(self, "exception", None)  # aiohttp's DataQueue's
        raised = exception() if callable(exception) else None
        if isinstance(raised, BaseException):  # what the waiting request raises
            with contextlib.suppress(AttributeError):
                raised.crossover_closed_before = self.closed_before  # type: ignore[attr-defined]
                raised.crossover_idle_ns = self.idle_ns  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        t = self.last_rx_ns = time.perf_counter_ns()
        super().data_received(data)
        payload = self._payload
        if payload is None or not data:
            return
        if payload is not self.rx_payload:
            self.rx_payload = payload
            self.rx = deque()
        rx = self.rx
        if rx is not None:
            rx.append((t, payload.total_bytes))


class PoolConnector(aiohttp.TCPConnector):
    """aiohttp's connector with ``StampingHandler`` connections and the session's
    ``Habits``: a connection that served a streamed response from a server whose habit
    is not known yet is held out of the pool for ``SETTLE_S`` (its server closes it in
    that time, or keeps it)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.habits = Habits()
        stamp_arrivals(self)

    def _release(
        self, key: ConnectionKey, protocol: ResponseHandler, *, should_close: bool = False
    ) -> None:
        if isinstance(protocol, StampingHandler):
            protocol.released_ns = time.perf_counter_ns()
            habit = protocol.habit
            if habit is not None and not (should_close or protocol.should_close or self._closed):
                if habit.closes is None:
                    self._loop.call_later(SETTLE_S, self._settled, key, protocol, habit)
                    return
                # a server that closes after a streamed response: never reused into it
                should_close = habit.closes
        super()._release(key, protocol, should_close=should_close)

    def _settled(self, key: ConnectionKey, protocol: StampingHandler, habit: ServerHabit) -> None:
        habit.settled(protocol.is_connected())
        super()._release(key, protocol, should_close=habit.closes is True)


def stamp_arrivals(connector: aiohttp.BaseConnector) -> bool:
    """Make ``connector`` build ``StampingHandler`` connections; False where this aiohttp
    has no protocol factory to replace (arrivals are then stamped at read)."""
    factory = getattr(connector, "_factory", None)
    if not isinstance(factory, functools.partial) or factory.func is not ResponseHandler:
        return False
    connector._factory = functools.partial(StampingHandler, *factory.args, **factory.keywords)  # type: ignore[assignment]
    return True


def _arrivals_of(resp: aiohttp.ClientResponse) -> deque[tuple[int, int]] | None:
    """The stamps of ``resp``'s body bytes, when its connection stamps them."""
    conn = resp.connection
    proto = conn.protocol if conn is not None else None
    # the data_received that brought the headers made the response's stamp deque
    if isinstance(proto, StampingHandler) and proto.rx_payload is resp.content:
        return proto.rx
    return None


def make_session(
    headers: dict[str, str] | None = None, timeouts: Timeouts | None = None
) -> aiohttp.ClientSession:
    """The run's one session: no connection cap (the load strategy is the cap)."""
    t = timeouts or Timeouts()
    return aiohttp.ClientSession(
        connector=PoolConnector(limit=0, ttl_dns_cache=300, force_close=False),
        headers=headers,
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=t.connect_s, connect=t.connect_s),
        read_bufsize=READ_BUFSIZE,
        auto_decompress=True,
        trace_configs=[_reuse_trace()],
    )


def habit_of(session: aiohttp.ClientSession, url: str) -> ServerHabit | None:
    """The habit of ``url``'s server as ``session`` has seen it (None: a session whose
    connector keeps no habits)."""
    connector = session.connector
    if not isinstance(connector, PoolConnector):
        return None
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return None
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    return connector.habits.of(parts.hostname or "", port)


async def _on_reuse(_session: object, ctx: SimpleNamespace, _params: object) -> None:
    """aiohttp's trace signal: the request took an idle pooled connection."""
    state = ctx.trace_request_ctx
    if isinstance(state, dict):
        state["reused"] = True


def _reuse_trace() -> aiohttp.TraceConfig:
    trace = aiohttp.TraceConfig()
    trace.on_connection_reuseconn.append(_on_reuse)
    return trace


async def stream_request(
    session: aiohttp.ClientSession,
    url: str,
    body: dict[str, Any],
    record: RequestRecord,
    options: StreamOptions,
) -> RequestRecord:
    """Send one streaming request and fill ``record`` as the bytes arrive.

    ``record.t_send_ns`` is set here, just before the request is written. To a server
    seen to close its connection after a streamed response (llama-server) the request
    goes with ``Connection: close`` (``record.connection_close``). A close before any
    response is judged by ``reuse.judge_close``: a stale reused connection is retried
    (``reuse.retrying``), each retry recorded; any other close dropped the request, a
    failure. One SSE event (or an unfinished line) may hold at most
    ``options.max_event_bytes``.
    """
    payload = orjson.dumps(body)

    async def attempt(habit: ServerHabit | None, close: bool) -> RequestRecord:
        return await _attempt(session, url, payload, record, options, habit, close)

    return await retrying(attempt, record, habit_of(session, url))


async def _attempt(
    session: aiohttp.ClientSession,
    url: str,
    payload: bytes,
    record: RequestRecord,
    options: StreamOptions,
    habit: ServerHabit | None = None,
    close: bool = False,
) -> RequestRecord:
    """One attempt; ``habit``: the server's, for the connection to show once its
    streamed response ends; ``close``: sent with ``Connection: close``."""
    dialect, timeouts, max_event_bytes = options.dialect, options.limits, options.max_event_bytes
    loop = asyncio.get_running_loop()
    now = loop.time
    perf = time.perf_counter_ns
    total_deadline = now() + timeouts.total_s
    head: bytes | None = None  # the first bytes of the body, once any arrived
    parser = SSEParser(max_event_bytes)
    rd = EventReader(
        record, dialect, options.endpoint, timeouts, options.keep_text, now, total_deadline
    )
    conn_state = {"reused": False}
    try:
        async with asyncio.timeout_at(min(total_deadline, now() + timeouts.first_token_s)) as cm:
            rd.cm = cm
            record.t_send_ns = perf()
            try:
                resp_cm = session.post(
                    url,
                    data=payload,
                    headers=_CLOSE if close else _JSON,
                    trace_request_ctx=conn_state,
                )
                token = _HABIT.set(habit)
                try:
                    resp = await resp_cm.__aenter__()
                finally:
                    _HABIT.reset(token)
            except aiohttp.ClientConnectorError:
                raise
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
                # a write that failed on a reused connection says nothing more: taken as
                # closed before the request
                return judge_close(
                    record,
                    reused=conn_state["reused"],
                    closed_before=getattr(exc, "crossover_closed_before", True),
                    idle_ns=getattr(exc, "crossover_idle_ns", 0),
                    how=closed_how(exc),
                )
            content = resp.content
            try:
                record.status = resp.status
                if resp.status != 200:
                    text = (await content.read(4096)).decode("utf-8", "replace")
                    if resp.status == 404:  # most often a URL with the API path already in it
                        text += f" (no such path {url}; give the server's base URL as --url)"
                    return fail(record, "http_error", f"HTTP {resp.status}: {text}")
                if not is_event_stream(resp):
                    try:
                        why = await not_a_stream(resp, max_event_bytes)
                    finally:
                        resp.close()  # what is left unread is no stream: drop the connection
                    return fail(record, *why, perf())
                rd.phase = "first token"
                rx = _arrivals_of(resp)
                consumed = 0
                ended = False
                too_large: EventTooLarge | None = None
                t = perf()
                while not (rd.broken or ended):
                    if rx is None:
                        data = await content.readany()
                        if data:
                            t = perf()
                    else:
                        data, _ = await content.readchunk()
                        if data:
                            # the data_received that brought this chunk's last byte
                            consumed += len(data)
                            while len(rx) > 1 and rx[0][1] < consumed:
                                rx.popleft()
                            t = rx[0][0] if rx and rx[0][1] >= consumed else perf()
                        elif not content.at_eof():
                            continue  # an HTTP chunk boundary with nothing new
                    try:
                        if data:
                            if head is None:
                                head = data[:64]
                            events = parser.feed(data)
                        else:  # the end of the body: a last event without its blank line
                            ended = True
                            events = parser.close()
                    except EventTooLarge as exc:
                        events, too_large, rd.broken = exc.events, exc, True
                    if events:
                        rd.take([(ev.data, ev.event, ev.id, t) for ev in events], ended)
                if too_large is not None:  # the events before it were kept
                    fail(record, "event_too_large", str(too_large), t)
                if rd.broken:
                    resp.close()  # the rest of a broken response is never read
                else:
                    record.t_done_ns = rd.t_end if rd.t_end is not None else perf()
            finally:
                if rd.t_end is not None and not content.at_eof():
                    resp.close()  # ended at [DONE]; the server held the connection open
                await resp_cm.__aexit__(None, None, None)
    except aiohttp.ServerTimeoutError:
        # aiohttp's own timeouts: only the connect limits are set on the session
        return fail(record, "timeout", f"no connection within {timeouts.connect_s:g} s")
    except TimeoutError:
        timed_out = rd.timed_out(timeouts)
        if timed_out is not None:
            return timed_out
    except Stale:
        raise
    except aiohttp.ClientConnectorError as exc:
        return fail(record, "connection_error", f"cannot connect: {exc.os_error}")
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError) as exc:
        if rd.t_end is not None and record.error_kind is None:
            record.t_done_ns = rd.t_end  # dropped after [DONE]: the response was complete
        else:
            keep(record, rd.t_last, rd.text_chars)
            if is_decoding_error(exc):
                return fail(record, "undecodable", f"the body cannot be decoded: {exc}")
            kind: ErrorKind = "stream_truncated" if head is not None else "connection_error"
            return fail(record, kind, f"connection lost: {type(exc).__name__}")
    except (aiohttp.ClientError, OSError) as exc:
        keep(record, rd.t_last, rd.text_chars)
        return fail(record, "connection_error", f"{type(exc).__name__}: {exc}")
    return rd.finish(dialect, head)


async def open_connections(
    session: aiohttp.ClientSession,
    base_url: str,
    count: int,
    path: str = "/health",
    limit_s: float = 10.0,
) -> int:
    """Open ``count`` keep-alive connections to ``base_url`` before the measured load.

    A closed loop sends all its streams at once: connecting them inside the measured
    load held the event loop ~150 us per stream while the first tokens of the streams
    already sent were waiting to be stamped. ``count`` concurrent GETs of ``path`` leave
    that many connections in the session's pool (any HTTP answer will do, 404
    included). A server that closes connections after each response leaves nothing
    behind, which costs only this one round trip. Each GET is given up after
    ``limit_s`` (connecting and its answer together: a server that accepts slowly, or
    never answers, holds the run no longer). Returns the requests answered.
    """

    async def one() -> bool:
        try:
            async with asyncio.timeout(limit_s), session.get(base_url + path) as resp:
                await resp.read()
                return True
        except (TimeoutError, aiohttp.ClientError, OSError):
            return False

    results = await asyncio.gather(*(one() for _ in range(max(count, 0))))
    return sum(results)


class AiohttpTransport(Transport):
    """The aiohttp transport (``crossover.transport.base.Transport``): the run's one
    ``aiohttp.ClientSession`` (``make_session``, or ``session`` where one is given)."""

    def __init__(
        self,
        headers: dict[str, str] | None = None,
        timeouts: Timeouts | None = None,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        self.session = session if session is not None else make_session(headers, timeouts)

    async def close(self) -> None:
        await self.session.close()

    async def stream(
        self, url: str, body: dict[str, Any], record: RequestRecord, options: StreamOptions
    ) -> RequestRecord:
        return await stream_request(self.session, url, body, record, options)

    async def open_connections(
        self, base_url: str, count: int, path: str = "/health", limit_s: float = 10.0
    ) -> int:
        return await open_connections(self.session, base_url, count, path, limit_s)
