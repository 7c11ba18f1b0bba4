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
import functools
import select
import time
from collections import deque
from types import SimpleNamespace
from typing import Any

import aiohttp
import orjson
from aiohttp.client_proto import ResponseHandler

from crossover.dialects.base import Dialect, Endpoint
from crossover.records.model import ErrorKind, RequestRecord
from crossover.transport.protocol import (
    is_decoding_error,
    is_event_stream,
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
from crossover.transport.sse import MAX_EVENT_BYTES, EventTooLarge, SSEParser

__all__ = [
    "AFTER_DONE_S",
    "GAP_SLACK",
    "READ_BUFSIZE",
    "STALE_BACKOFF_S",
    "STALE_RETRIES",
    "StampingHandler",
    "Timeouts",
    "clean_server_text",
    "make_session",
    "open_connections",
    "stamp_arrivals",
    "stream_request",
]

READ_BUFSIZE = 4 * 1024 * 1024  # long contexts: a 64 KiB buffer throttles (vLLM #39963)
#: a request whose reused idle pooled connection closed before any response is retried
#: on another (several pooled connections may have been closed by the server at once);
#: a new connection that closes so is a request the server dropped: a failure, never
#: retried. Each retry is in the record (``retries``, ``retry_reasons``)
STALE_RETRIES = 4
#: a reused connection is stale when the server had closed it before the request was
#: written (``peer_closed``: llama-server closes pooled connections as a response ends),
#: or when it sat idle at least this long before the request (servers close idle
#: keep-alive connections after seconds: uvicorn's ``--timeout-keep-alive``, vLLM's and
#: SGLang's server, 5 s by default; cpp-httplib's, llama-server's, 5 s), so a close in
#: flight as the request went out is not taken for a drop. Any other close before a
#: response dropped the request: a failure
STALE_IDLE_S = 1.0
_POLLRDHUP: int = getattr(select, "POLLRDHUP", 0)


def peer_closed(transport: object) -> bool:
    """The peer has closed the connection (its FIN, or a reset, is in the socket's
    queue, not yet read by the event loop): one ``poll`` of the socket, no read."""
    get = getattr(transport, "get_extra_info", None)
    sock = get("socket") if get is not None else None
    if sock is None:
        return False
    try:
        fd = sock.fileno()
        if fd < 0:
            return True
        poller = select.poll()
        poller.register(fd, select.POLLIN | _POLLRDHUP)
        events = poller.poll(0)
    except (OSError, ValueError):
        return False
    hung = _POLLRDHUP | select.POLLHUP | select.POLLERR
    return any(ev & hung for _, ev in events)


#: waits before each retry of a stale pooled connection (not counted in TTFT: t_send_ns
#: is taken again for the attempt that is served)
STALE_BACKOFF_S = (0.0, 0.002, 0.02, 0.1)


class StampingHandler(ResponseHandler):
    """aiohttp's connection protocol, stamping every ``data_received``.

    ``rx`` holds ``(perf_counter_ns at arrival, body bytes of the current response fed
    so far)`` for the response ``rx_payload`` (its ``StreamReader``); a new response on
    the connection gets a new deque, so a reader holding the old one is never confused by
    the next request's bytes.
    """

    rx_payload: object | None = None
    rx: deque[tuple[int, int]] | None = None
    #: when the connection last received bytes (or opened): it has idled since
    last_rx_ns: int = 0
    #: how long it had idled when the request now on it was written
    idle_ns: int = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.last_rx_ns = time.perf_counter_ns()
        super().connection_made(transport)

    #: the server had closed the connection when the request now on it was written
    closed_before: bool = False

    def set_response_params(self, **kwargs: Any) -> None:
        # called as each request is about to be written on the connection
        self.idle_ns = time.perf_counter_ns() - self.last_rx_ns
        self.closed_before = peer_closed(self.transport)
        super().set_response_params(**kwargs)

    def connection_lost(self, exc: BaseException | None) -> None:
        super().connection_lost(exc)
        exception = getattr(self, "exception", None)  # aiohttp's DataQueue's
        raised = exception() if callable(exception) else None
        if isinstance(raised, BaseException):  # what the waiting request raises: was it stale?
            with contextlib.suppress(AttributeError):
                raised.crossover_stale = (  # type: ignore[attr-defined]
                    self.closed_before or self.idle_ns >= STALE_IDLE_S * 1e9
                )
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
    connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, force_close=False)
    stamp_arrivals(connector)
    return aiohttp.ClientSession(
        connector=connector,
        headers=headers,
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=t.connect_s, connect=t.connect_s),
        read_bufsize=READ_BUFSIZE,
        auto_decompress=True,
        trace_configs=[_reuse_trace()],
    )


class _Stale(Exception):
    """A reused idle keep-alive connection was already closed by the server; ``reason``
    says how (FIN or RST), for the record."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def closed_how(exc: BaseException | None) -> str:
    """FIN (an orderly close) or RST (a reset), from the exception the close raised."""
    seen = exc
    while seen is not None:
        if isinstance(seen, OSError):  # ClientOSError, ConnectionResetError: a reset
            return "RST"
        seen = seen.__cause__
    return "FIN"


def stale(record: RequestRecord, reason: str, attempt: int) -> bool:
    """Record a reused connection's close: a retry (True) while ``STALE_RETRIES`` are
    left, else the request's failure (False)."""
    if attempt == STALE_RETRIES:
        fail(
            record,
            "connection_error",
            f"{reason}, {STALE_RETRIES} retries made: the server closed every connection "
            "before responding",
        )
        return False
    record.retries += 1
    record.retry_reasons.append(reason)
    return True


def dropped(record: RequestRecord, how: str, idle_ns: int | None = None) -> RequestRecord:
    """A connection that was new (``idle_ns`` None), or reused, open when the request was
    written and idle less than ``STALE_IDLE_S`` before it, closed after the request and
    before any response: the server dropped the request. A failure, never retried (it
    may have reached the engine)."""
    which = (
        "a new connection"
        if idle_ns is None
        else f"a reused connection, open when the request went out, idle {idle_ns / 1e6:.0f} ms"
    )
    return fail(
        record,
        "connection_error",
        f"the server closed {which} ({how}) after the request and before any response: "
        "the request was dropped",
    )


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
    dialect: Dialect,
    endpoint: Endpoint,
    record: RequestRecord,
    timeouts: Timeouts,
    keep_text: bool = False,
    max_event_bytes: int = MAX_EVENT_BYTES,
) -> RequestRecord:
    """Send one streaming request and fill ``record`` as the bytes arrive.

    ``record.t_send_ns`` is set here, just before the request is written. A request
    whose reused idle pooled connection turns out to be stale (the server closed it
    after the previous response, as llama-server does) is retried, up to
    ``STALE_RETRIES`` times, each retry recorded; one whose new connection closes before
    a response was dropped by the server and fails.
    One SSE event (or an unfinished line) may hold at most ``max_event_bytes``.
    """
    payload = orjson.dumps(body)
    for attempt in range(STALE_RETRIES + 1):
        try:
            return await _attempt(
                session, url, payload, dialect, endpoint, record, timeouts, keep_text,
                max_event_bytes,
            )  # fmt: skip
        except _Stale as exc:
            if not stale(record, exc.reason, attempt):
                return record
            # let the loop read the FINs of other pooled connections the server closed at
            # the same moment (seen with llama-server at c=64 on the H200: five retries in
            # 1.7 ms all drew closed connections), so the next try gets a live or new one
            await asyncio.sleep(STALE_BACKOFF_S[attempt])
    return record  # pragma: no cover


async def _attempt(
    session: aiohttp.ClientSession,
    url: str,
    payload: bytes,
    dialect: Dialect,
    endpoint: Endpoint,
    record: RequestRecord,
    timeouts: Timeouts,
    keep_text: bool,
    max_event_bytes: int,
) -> RequestRecord:
    loop = asyncio.get_running_loop()
    now = loop.time
    perf = time.perf_counter_ns
    total_deadline = now() + timeouts.total_s
    head: bytes | None = None  # the first bytes of the body, once any arrived
    parser = SSEParser(max_event_bytes)
    rd = EventReader(record, dialect, endpoint, timeouts, keep_text, now, total_deadline)
    conn_state = {"reused": False}
    try:
        async with asyncio.timeout_at(min(total_deadline, now() + timeouts.first_token_s)) as cm:
            rd.cm = cm
            record.t_send_ns = perf()
            try:
                resp_cm = session.post(
                    url,
                    data=payload,
                    headers={"Content-Type": "application/json"},
                    trace_request_ctx=conn_state,
                )
                resp = await resp_cm.__aenter__()
            except aiohttp.ClientConnectorError:
                raise
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
                how = closed_how(exc)
                idle_ns = getattr(exc, "crossover_idle_ns", None)
                if conn_state["reused"] and getattr(exc, "crossover_stale", True):
                    # a pooled connection the server had closed (a write that failed on
                    # it says nothing more: taken as closed before the request)
                    raise _Stale(
                        f"a reused idle connection closed ({how}) before a response"
                    ) from exc
                return dropped(record, how, idle_ns if conn_state["reused"] else None)
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
    except _Stale:
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
