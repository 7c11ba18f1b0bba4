"""Keep-alive connections, one rule for both transports: when a pooled connection is
reused, and what a close before any response means.

A close (FIN or RST) after the request and before any response is one of two things
the wire cannot tell apart: the server dropped the request (it read it, perhaps handed
it to the engine, and closed), or it had decided to close the connection before the
request reached it. llama-server (cpp-httplib) closes its connection after every
streamed response though its headers say ``Keep-Alive: timeout=5, max=100``: it shuts
its side (FIN), then reads and discards what arrives for up to 100 ms
(``drain_and_close_socket``), so a request written before that FIN arrived is read,
acknowledged and never answered, exactly as a drop. So the client keeps out of that
race instead of judging it afterwards:

* a server's habit is learned per host and port (``ServerHabit``): a connection that
  served a complete streamed response is held out of the pool for ``SETTLE_S``; a FIN
  within that time (or a close seen later in the pool, or at reuse, within
  ``STALE_IDLE_S`` of the response's end) means the server closes after a response,
  and from then on each request to it goes with ``Connection: close`` on a connection
  of its own (``RequestRecord.connection_close``); no close means it keeps them;
* a pooled connection whose FIN (or reset) is already in its socket (``peer_closed``)
  is never written on: it is discarded, no request was sent, nothing is retried;
* a close before any response is judged once, here (``judge_close``): on a reused
  connection that the server had closed before the request was written, or that idled
  ``STALE_IDLE_S`` or more (a keep-alive timeout racing the request), it is a stale
  connection and the request is sent again (``retrying``; each retry in the record);
  on a new connection, or a reused one open when the request went out and idle less
  than that, the request was dropped: a failure, never sent again.
"""

from __future__ import annotations

import asyncio
import select
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from crossover.records.model import RequestRecord
from crossover.transport.reader import fail

#: a request whose reused idle pooled connection closed before any response is retried
#: on another (several pooled connections may have been closed by the server at once)
STALE_RETRIES = 4
#: waits before each retry of a stale pooled connection (not counted in TTFT: t_send_ns
#: is taken again for the attempt that is served)
STALE_BACKOFF_S = (0.0, 0.002, 0.02, 0.1)
#: a reused connection is stale when it sat idle at least this long before the request
#: (servers close idle keep-alive connections after seconds: uvicorn's
#: ``--timeout-keep-alive``, vLLM's and SGLang's server, 5 s by default; cpp-httplib's,
#: llama-server's, 5 s), so a close in flight as the request went out is not taken for a
#: drop. A server's close of an idle connection sooner than this after its response is
#: its habit of closing after a response, not a keep-alive timeout
STALE_IDLE_S = 1.0
#: how long a connection that served a streamed response is held out of the pool while
#: its server's habit is not known: llama-server's FIN follows its last byte by 24 us
#: (median, 2 ms at most, of 60 streamed responses on the 2-core machine under load)
SETTLE_S = 0.1
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


def closed_how(exc: BaseException | None) -> str:
    """FIN (an orderly close) or RST (a reset), from the exception the close raised."""
    seen = exc
    while seen is not None:
        if isinstance(seen, OSError):  # ClientOSError, ConnectionResetError: a reset
            return "RST"
        seen = seen.__cause__
    return "FIN"


@dataclass
class ServerHabit:
    """What this session has seen of one server's (host and port) keep-alive
    connections after a streamed response: ``closes`` None while not known."""

    closes: bool | None = None

    def saw_close(self, released_ns: int | None) -> None:
        """The server closed a connection no request was on; ``released_ns``: when its
        last response ended (None: it was in use, which says nothing of the habit)."""
        if released_ns is not None and time.perf_counter_ns() - released_ns < STALE_IDLE_S * 1e9:
            self.closes = True

    def settled(self, still_open: bool) -> None:
        """A connection held ``SETTLE_S`` after its response: still open, the server
        keeps its connections (until a close after a response is seen)."""
        if still_open and self.closes is None:
            self.closes = False


@dataclass
class Habits:
    """A session's ``ServerHabit`` per host and port."""

    servers: dict[tuple[str, int], ServerHabit] = field(default_factory=dict)

    def of(self, host: str, port: int) -> ServerHabit:
        habit = self.servers.get((host, port))
        if habit is None:
            habit = self.servers[(host, port)] = ServerHabit()
        return habit


class Stale(Exception):
    """A reused pooled connection the server had closed: the request is sent again;
    ``reason`` says how, for the record."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


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


def judge_close(
    record: RequestRecord, *, reused: bool, closed_before: bool, idle_ns: int, how: str
) -> RequestRecord:
    """The connection closed (``how``: FIN or RST) after the request was written and
    before any response: raises ``Stale`` for a reused connection the server had closed
    before the request went out (``closed_before``) or that idled ``STALE_IDLE_S`` or
    more, else fails ``record`` as a dropped request."""
    if reused and (closed_before or idle_ns >= STALE_IDLE_S * 1e9):
        raise Stale(f"a reused idle connection closed ({how}) before a response")
    return dropped(record, how, idle_ns if reused else None)


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


async def retrying(
    attempt: Callable[[ServerHabit | None, bool], Awaitable[RequestRecord]],
    record: RequestRecord,
    habit: ServerHabit | None,
) -> RequestRecord:
    """One request to a server of ``habit`` (None: not kept), for both transports:
    ``attempt(learn, close)`` until it is not ``Stale``, up to ``STALE_RETRIES`` more
    times, each recorded, after ``STALE_BACKOFF_S``. To a server seen to close its
    connection after a streamed response each attempt goes with ``Connection: close``
    (``close``, and ``record.connection_close``), with nothing left to learn; else
    ``learn`` is the habit its connection shows once the streamed response ends."""
    close = habit is not None and habit.closes is True
    record.connection_close = close
    learn = None if close else habit
    for n in range(STALE_RETRIES + 1):
        try:
            return await attempt(learn, close)
        except Stale as exc:
            if not stale(record, exc.reason, n):
                return record
            # let the loop read the FINs of other pooled connections the server closed at
            # the same moment (seen with llama-server at c=64 on the H200: five retries in
            # 1.7 ms all drew closed connections), so the next try gets a live or new one
            await asyncio.sleep(STALE_BACKOFF_S[n])
    return record  # pragma: no cover
