"""The transport seam: what a client of a run's requests is (``Transport``) and how each
streamed response is read (``StreamOptions``).

Two implement it: the aiohttp transport (``crossover.transport.http.AiohttpTransport``)
and the lean one (``crossover.transport.leanhttp.LeanSession``); ``make_client``
(``crossover.transport.client``) picks one by ``RunConfig.transport``. Callers hold a
``Transport`` and never ask which one it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol, Self

from crossover.dialects.base import Dialect, Endpoint
from crossover.records.model import RequestRecord
from crossover.transport.reader import Timeouts
from crossover.transport.sse import MAX_EVENT_BYTES


@dataclass(frozen=True, slots=True)
class StreamOptions:
    """How every streamed response of a run is read: built once, passed with each request."""

    dialect: Dialect
    endpoint: Endpoint
    #: the run's timeouts (declared once, in ``crossover.spec.limits``), carried to each read
    limits: Timeouts
    #: keep the streamed text on the record (for the text witness)
    keep_text: bool = False
    #: the largest SSE event (or unfinished line) a response may hold
    max_event_bytes: int = MAX_EVENT_BYTES


class Transport(Protocol):
    """One run's HTTP client: one session (its keep-alive pool) for every request, whose
        lifetime is the ``async with``. Both transports fill the same record with the same
        error kinds, and stamp each chunk with ``perf_counter_ns`` where its bytes arrive. An
    implementation subclasses it for its ``async with`` (ended by ``close``)."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close every connection (what ``async with`` does at its end)."""
        ...

    async def stream(
        self, url: str, body: dict[str, Any], record: RequestRecord, options: StreamOptions
    ) -> RequestRecord:
        """POST ``body`` to ``url`` as a streaming request and fill ``record`` as the bytes
        arrive (``record.t_send_ns`` set just before it is written); never raises for
        what the server or the network did: the record says it."""
        ...

    async def open_connections(
        self, base_url: str, count: int, path: str = "/health", limit_s: float = 10.0
    ) -> int:
        """Open ``count`` keep-alive connections to ``base_url`` before the measured load
        (concurrent GETs of ``path``, each given up after ``limit_s``); the requests
        answered."""
        ...
