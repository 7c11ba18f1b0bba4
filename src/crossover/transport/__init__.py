"""Bytes and timestamps: the shared HTTP session, the SSE parser, timeouts."""

from typing import Literal

#: the client that sends a run's requests (``crossover.transport.client``): aiohttp, or
#: the lean ``asyncio.Protocol`` client (plain http; https goes through aiohttp)
Transport = Literal["aiohttp", "lean"]
TRANSPORTS: tuple[Transport, ...] = ("aiohttp", "lean")
