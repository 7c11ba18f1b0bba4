"""The transport seam: which client sends a run's requests (``RunConfig.transport``).

``aiohttp`` (``crossover.transport.http``) or ``lean`` (``crossover.transport.leanhttp``,
an ``asyncio.Protocol`` client with one-pass chunked SSE parsing; ``https://`` URLs go
through aiohttp even there). Both fill the same record with the same error kinds; the
callers (the runner, the worker processes, the probes) hold a ``Session`` and call
``stream_request`` and ``open_connections`` here, never a transport module directly.
"""

from __future__ import annotations

from typing import Any

import aiohttp

from crossover.dialects.base import Dialect, Endpoint
from crossover.records.model import RequestRecord
from crossover.transport import TRANSPORTS, Transport, http, leanhttp
from crossover.transport.http import Timeouts
from crossover.transport.leanhttp import LeanSession
from crossover.transport.sse import MAX_EVENT_BYTES

__all__ = [
    "TRANSPORTS",
    "Session",
    "Transport",
    "make_client",
    "open_connections",
    "stream_request",
]

Session = aiohttp.ClientSession | LeanSession


def make_client(
    transport: Transport, headers: dict[str, str] | None = None, timeouts: Timeouts | None = None
) -> Session:
    """The run's one session of ``transport`` (an async context manager either way)."""
    if transport == "lean":
        return LeanSession(headers, timeouts)
    return http.make_session(headers, timeouts)


async def stream_request(
    session: Session,
    url: str,
    body: dict[str, Any],
    dialect: Dialect,
    endpoint: Endpoint,
    record: RequestRecord,
    timeouts: Timeouts,
    keep_text: bool = False,
    max_event_bytes: int = MAX_EVENT_BYTES,
) -> RequestRecord:
    """``stream_request`` of the session's transport."""
    if isinstance(session, LeanSession):
        return await leanhttp.stream_request(
            session, url, body, dialect, endpoint, record, timeouts, keep_text, max_event_bytes
        )
    return await http.stream_request(
        session, url, body, dialect, endpoint, record, timeouts, keep_text, max_event_bytes
    )


async def open_connections(
    session: Session, base_url: str, count: int, path: str = "/health", limit_s: float = 10.0
) -> int:
    """``open_connections`` of the session's transport (each GET given up after
    ``limit_s``)."""
    if isinstance(session, LeanSession):
        return await leanhttp.open_connections(session, base_url, count, path, limit_s)
    return await http.open_connections(session, base_url, count, path, limit_s)
