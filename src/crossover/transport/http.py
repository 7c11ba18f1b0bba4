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

The read loop is the client's hot path (one pass per chunk, tens of thousands per
second at high concurrency), profiled against the calibration server: the gap timeout
is re-armed at most once per ``GAP_SLACK`` of the gap (re-arming a timer on every read
cost ~7% of the client's CPU), and per-chunk counters live in locals, written to the
record (a pydantic model, whose ``__setattr__`` is slow) once at the end.

The record stops where the protocol says the response ended: at ``[DONE]`` (events
after it are counted in ``after_done_events``, never parsed; a repeated ``[DONE]`` says
the same again and is not counted; a connection held open after it is dropped after
``AFTER_DONE_S``), and at the first event
that breaks the response (an error object, bytes that are not UTF-8, JSON that does
not parse, an event over the size cap), after which the connection is dropped. A 200
that is not ``text/event-stream`` is not read as a stream at all: one JSON body is
``not_streamed``, anything else ``content_type``. JSON is read as JSON: a field present
with ``null`` is absent (``"error": null`` is no error), unknown fields are ignored,
events of a type nobody listens to (``event: ping``) are skipped, and ``event: error``
is an error whatever its data.
"""

from __future__ import annotations

import asyncio
import functools
import re
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from aiohttp.client_proto import ResponseHandler

from crossover.dialects.base import Dialect, Endpoint
from crossover.records.model import ErrorKind, RequestRecord
from crossover.transport.protocol import (
    bad_event,
    is_decoding_error,
    is_event_stream,
    not_a_stream,
    starts_like_json,
)
from crossover.transport.sse import MAX_EVENT_BYTES, EventTooLarge, SSEParser

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
MAX_ERROR_CHARS = 300
READ_BUFSIZE = 4 * 1024 * 1024  # long contexts: a 64 KiB buffer throttles (vLLM #39963)
#: a request that could not even be written on a pooled connection is retried on
#: another: several pooled connections may have been closed by the server at once
STALE_RETRIES = 4
#: waits before each retry of a stale pooled connection (not counted in TTFT: t_send_ns
#: is taken again for the attempt that is served)
STALE_BACKOFF_S = (0.0, 0.002, 0.02, 0.1)
#: the gap timeout fires between gap_s and gap_s * (1 + GAP_SLACK) after the last token
GAP_SLACK = 0.01
#: after [DONE], how long the body may take to end (data after it is counted); a server
#: that holds the connection open longer is not waited for: the response was complete
AFTER_DONE_S = 1.0


def clean_server_text(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """Server strings are untrusted: drop control characters (terminal escapes), cap size."""
    text = _CONTROL.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class Timeouts:
    connect_s: float = 10.0
    first_token_s: float = 300.0
    gap_s: float = 60.0
    total_s: float = 1800.0


class StampingHandler(ResponseHandler):
    """aiohttp's connection protocol, stamping every ``data_received``.

    ``rx`` holds ``(perf_counter_ns at arrival, body bytes of the current response fed
    so far)`` for the response ``rx_payload`` (its ``StreamReader``); a new response on
    the connection gets a new deque, so a reader holding the old one is never confused by
    the next request's bytes.
    """

    rx_payload: object | None = None
    rx: deque[tuple[int, int]] | None = None

    def data_received(self, data: bytes) -> None:
        t = time.perf_counter_ns()
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
    )


class _Stale(Exception):
    """A reused keep-alive connection was already closed by the server."""


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
    whose pooled connection turns out to be stale (the server closed it after the
    previous response, as llama-server does) is retried, up to ``STALE_RETRIES`` times.
    One SSE event (or an unfinished line) may hold at most ``max_event_bytes``.
    """
    payload = orjson.dumps(body)
    for attempt in range(STALE_RETRIES + 1):
        try:
            return await _attempt(
                session, url, payload, dialect, endpoint, record, timeouts, keep_text,
                max_event_bytes,
            )  # fmt: skip
        except _Stale:
            if attempt == STALE_RETRIES:
                record.error_kind = "connection_error"
                record.error = "server closed the connection before responding"
                record.t_done_ns = time.perf_counter_ns()
                return record
            # let the loop read the FINs of other pooled connections the server closed at
            # the same moment (seen with llama-server at c=64 on the H200: five retries in
            # 1.7 ms all drew closed connections), so the next try gets a live or new one
            await asyncio.sleep(STALE_BACKOFF_S[attempt])
    return record  # pragma: no cover


def _keep(record: RequestRecord, t_last: int | None, text_chars: int) -> None:
    """Write the read loop's per-chunk locals back to the record."""
    if t_last is not None:
        record.t_last_ns = t_last
    record.text_chars += text_chars


def _fail(
    record: RequestRecord, kind: ErrorKind, message: str, t_ns: int | None = None
) -> RequestRecord:
    if record.error_kind is None:
        record.error_kind = kind
        record.error = clean_server_text(message)
    if record.t_done_ns is None:
        record.t_done_ns = t_ns if t_ns is not None else time.perf_counter_ns()
    return record


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
    loads = orjson.loads
    parse = dialect.parse
    total_deadline = now() + timeouts.total_s
    phase = "response headers"
    head: bytes | None = None  # the first bytes of the body, once any arrived
    parser = SSEParser(max_event_bytes)
    arrivals = record.chunk_arrival_ns
    chars = record.chunk_chars
    counts: list[int] | None = None  # tokens per chunk, as stated (logprobs)
    stated = 0  # tokens the logprobs of every event account for
    unstated = 0  # token-carrying chunks without logprobs
    others = 0  # events carrying a choice never asked for
    emitted: list[int] | None = None
    pieces: list[str] | None = [] if keep_text else None
    t_first: int | None = None
    t_last: int | None = None
    t_end: int | None = None  # arrival of [DONE]: where the response ended
    after_done = 0
    after_finish = 0
    text_chars = 0
    gap_s = timeouts.gap_s
    gap_armed = gap_s * (1.0 + GAP_SLACK)
    rearm_every = gap_s * GAP_SLACK
    armed_at = -1.0  # loop time of the last re-arm; < 0: still waiting for the first token
    try:
        async with asyncio.timeout_at(min(total_deadline, now() + timeouts.first_token_s)) as cm:
            record.t_send_ns = perf()
            try:
                resp_cm = session.post(
                    url, data=payload, headers={"Content-Type": "application/json"}
                )
                resp = await resp_cm.__aenter__()
            except aiohttp.ClientConnectorError:
                raise
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
                # a pooled keep-alive connection the server had already closed
                raise _Stale from exc
            try:
                record.status = resp.status
                if resp.status != 200:
                    text = (await resp.content.read(4096)).decode("utf-8", "replace")
                    if resp.status == 404:  # most often a URL with the API path already in it
                        text += f" (no such path {url}; give the server's base URL as --url)"
                    return _fail(record, "http_error", f"HTTP {resp.status}: {text}")
                if not is_event_stream(resp):
                    try:
                        why = await not_a_stream(resp, max_event_bytes)
                    finally:
                        resp.close()  # what is left unread is no stream: drop the connection
                    return _fail(record, *why, perf())
                phase = "first token"
                content = resp.content
                rx = _arrivals_of(resp)
                consumed = 0
                broken = ended = False
                too_large: EventTooLarge | None = None
                t = perf()
                while not (broken or ended):
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
                        events, too_large, broken = exc.events, exc, True
                    tokens_here = False
                    for ev in events:
                        raw = ev.data
                        if raw[:6] == b"[DONE]":
                            if t_end is None:
                                record.saw_done = True
                                t_end = t
                                # the response is over: wait a little for more (data after
                                # it is counted), not for a server that holds the connection
                                phase = "after done"
                                cm.reschedule(min(total_deadline, now() + min(gap_s, AFTER_DONE_S)))
                            continue  # a repeated [DONE] says again what the first said
                        if t_end is not None:
                            after_done += 1  # the response ended at [DONE]: not read
                            continue
                        named = ev.event
                        try:
                            obj = loads(raw)
                        except orjson.JSONDecodeError:
                            if named is not None and named not in ("message", "error"):
                                continue  # an event type nobody listens to (a ping)
                            if ended and named != "error":
                                break  # cut inside the last event: the checks below say so
                            if named == "error":
                                _fail(record, "error_event", f"error event: {raw[:200]!r}", t)
                            else:
                                _fail(record, *bad_event(raw), t)
                            broken = True
                            break
                        if not isinstance(obj, dict):
                            if named is not None and named not in ("message", "error"):
                                continue
                            _fail(record, "malformed", f"event is not an object: {raw[:120]!r}", t)
                            broken = True
                            break
                        err = obj.get("error")  # present and null is no error
                        if named == "error" or (err and not obj.get("choices")):
                            _fail(record, "error_event", f"error event: {err or obj}", t)
                            broken = True
                            break
                        info = parse(obj, endpoint)
                        text = info.text
                        n_stated = info.n_tokens
                        if n_stated is not None:
                            stated += n_stated
                        if text:
                            if t_first is None:
                                t_first = record.t_first_ns = t
                                phase = "next token"
                            elif record.finish_reason is not None:
                                after_finish += 1  # the choice had ended
                            t_last = t
                            tokens_here = True
                            arrivals.append(t)
                            n_chars = len(text)
                            chars.append(n_chars)
                            text_chars += n_chars
                            if pieces is not None:
                                pieces.append(text)
                            if n_stated is None:
                                unstated += 1
                            else:
                                if counts is None:
                                    counts = []
                                counts.append(n_stated)
                            if info.emitted_ns is not None:
                                if emitted is None:
                                    emitted = []
                                emitted.append(info.emitted_ns)
                        if info.other_choices:
                            others += 1
                        if info.finish_reason is not None:
                            record.finish_reason = info.finish_reason
                        if info.prompt_tokens is not None:
                            record.prompt_tokens = info.prompt_tokens
                        if info.cached_tokens is not None:
                            record.cached_prompt_tokens = info.cached_tokens
                        if info.completion_tokens is not None:
                            record.completion_tokens = info.completion_tokens
                            record.total_tokens = info.total_tokens
                            record.count_source = "usage"
                    if tokens_here and t_end is None:
                        # only a token re-arms the gap limit: comments, heartbeats, empty
                        # or role-only events are bytes, not progress
                        at = now()
                        if at - armed_at >= rearm_every:
                            # armed_at <= last token < armed_at + rearm_every, so the
                            # timer fires gap_s to gap_s * (1 + GAP_SLACK) after it
                            armed_at = at
                            cm.reschedule(min(total_deadline, at + gap_armed))
                if too_large is not None:  # the events before it were kept
                    _fail(record, "event_too_large", str(too_large), t)
                if broken:
                    resp.close()  # the rest of a broken response is never read
                else:
                    record.t_done_ns = t_end if t_end is not None else perf()
            finally:
                if t_end is not None and not content.at_eof():
                    resp.close()  # ended at [DONE]; the server held the connection open
                await resp_cm.__aexit__(None, None, None)
    except aiohttp.ServerTimeoutError:
        # aiohttp's own timeouts: only the connect limits are set on the session
        return _fail(record, "timeout", f"no connection within {timeouts.connect_s:g} s")
    except TimeoutError:
        if t_end is None:
            _keep(record, t_last, text_chars)
            limit = {
                "response headers": timeouts.first_token_s,
                "first token": timeouts.first_token_s,
                "next token": timeouts.gap_s,
            }[phase]
            if now() >= total_deadline - 0.001:
                return _fail(record, "timeout", f"no end of stream within {timeouts.total_s:g} s")
            return _fail(record, "timeout", f"no {phase} within {limit:g} s")
        record.t_done_ns = t_end  # the response was over at [DONE]
    except _Stale:
        raise
    except aiohttp.ClientConnectorError as exc:
        return _fail(record, "connection_error", f"cannot connect: {exc.os_error}")
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError) as exc:
        if t_end is not None and record.error_kind is None:
            record.t_done_ns = t_end  # dropped after [DONE]: the response was complete
        else:
            _keep(record, t_last, text_chars)
            if is_decoding_error(exc):
                return _fail(record, "undecodable", f"the body cannot be decoded: {exc}")
            kind: ErrorKind = "stream_truncated" if head is not None else "connection_error"
            return _fail(record, kind, f"connection lost: {type(exc).__name__}")
    except (aiohttp.ClientError, OSError) as exc:
        _keep(record, t_last, text_chars)
        return _fail(record, "connection_error", f"{type(exc).__name__}: {exc}")
    _keep(record, t_last, text_chars)
    record.chunk_tokens = counts if counts is not None and not unstated else None
    record.logprob_tokens = stated if counts is not None and not unstated else None
    record.other_choice_events = others
    record.chunk_emitted_ns = emitted
    record.after_done_events = after_done
    record.after_finish_chunks = after_finish
    if pieces is not None:
        record.text = "".join(pieces)
    if (
        record.error_kind is None
        and not arrivals
        and not record.saw_done
        and record.finish_reason is None
        and starts_like_json(head)
    ):
        # an event-stream Content-Type over one JSON body: no event was ever sent
        _fail(record, "not_streamed", "the server answered with one JSON body, not SSE events")
    if (
        record.error_kind is None
        and dialect.has_done_sentinel
        and not record.saw_done
        and record.finish_reason is None
        and record.completion_tokens is None
    ):
        # a clean end with a finish reason or usage but no [DONE] is complete
        # (transformers serve sends no [DONE], seen on the H200); neither is a cut
        _fail(record, "stream_truncated", "stream ended without [DONE] or a finish reason")
    return record


async def open_connections(
    session: aiohttp.ClientSession, base_url: str, count: int, path: str = "/health"
) -> int:
    """Open ``count`` keep-alive connections to ``base_url`` before the measured load.

    A closed loop sends all its streams at once: connecting them inside the measured
    load held the event loop ~150 us per stream while the first tokens of the streams
    already sent were waiting to be stamped. ``count`` concurrent GETs of ``path`` leave
    that many connections in the session's pool (any HTTP answer will do, 404
    included). A server that closes connections after each response leaves nothing
    behind, which costs only this one round trip. Returns the requests answered.
    """

    async def one() -> bool:
        try:
            async with session.get(base_url + path) as resp:
                await resp.read()
                return True
        except (TimeoutError, aiohttp.ClientError, OSError):
            return False

    results = await asyncio.gather(*(one() for _ in range(max(count, 0))))
    return sum(results)
