"""Bytes and timestamps: the shared HTTP session, the SSE parser, timeouts."""

from typing import Literal

#: the name of the client that sends a run's requests (``crossover.transport.client``):
#: aiohttp, or the lean ``asyncio.Protocol`` client (plain http; https goes through
#: aiohttp); the client itself is a ``crossover.transport.base.Transport``
TransportName = Literal["aiohttp", "lean"]
TRANSPORTS: tuple[TransportName, ...] = ("aiohttp", "lean")
