"""Which client sends a run's requests (``RunConfig.transport``): ``make_client``.

``aiohttp`` (``crossover.transport.http.AiohttpTransport``) or ``lean``
(``crossover.transport.leanhttp.LeanSession``, an ``asyncio.Protocol`` client with
one-pass chunked SSE parsing; ``https://`` URLs go through aiohttp even there). Both are
a ``crossover.transport.base.Transport``: the callers (the load loop, the worker
processes, the probes) hold one and call its methods, never a transport module directly.
"""

from __future__ import annotations

from crossover.transport import TRANSPORTS, TransportName
from crossover.transport.base import StreamOptions, Transport
from crossover.transport.http import AiohttpTransport, Timeouts
from crossover.transport.leanhttp import LeanSession

__all__ = [
    "TRANSPORTS",
    "StreamOptions",
    "Transport",
    "TransportName",
    "make_client",
]


def make_client(
    transport: TransportName,
    headers: dict[str, str] | None = None,
    timeouts: Timeouts | None = None,
) -> Transport:
    """The run's one client of ``transport`` (an async context manager: its lifetime)."""
    if transport == "lean":
        return LeanSession(headers, timeouts)
    return AiohttpTransport(headers, timeouts)
