"""Helpers for the calibration server's tests: a raw aiohttp SSE reader with arrival times."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp
import orjson
import pytest

T = TypeVar("T")


@dataclass
class Event:
    data: str
    arrival_ns: int

    @property
    def json(self) -> dict[str, Any] | None:
        """The parsed data, or None when it is not a JSON object (``[DONE]``, malformed)."""
        try:
            obj = orjson.loads(self.data)
        except orjson.JSONDecodeError:
            return None
        return obj if isinstance(obj, dict) else None


@dataclass
class Streamed:
    """What one streaming request saw; ``error`` is the exception that ended it, if any."""

    status: int
    headers: dict[str, str]
    send_ns: int
    events: list[Event] = field(default_factory=list)
    raw: bytes = b""
    error: BaseException | None = None
    body: bytes = b""

    @property
    def done(self) -> bool:
        return any(e.data == "[DONE]" for e in self.events)

    @property
    def chunks(self) -> list[dict[str, Any]]:
        return [j for j in (e.json for e in self.events) if j is not None]

    @property
    def token_events(self) -> list[tuple[Event, str]]:
        """(event, generated text) for every chunk that carries text."""
        out = []
        for e in self.events:
            j = e.json
            if j is None:
                continue
            for c in j.get("choices", []):
                text = c.get("text") or (c.get("delta") or {}).get("content")
                if text:
                    out.append((e, text))
        return out

    @property
    def tokens(self) -> int:
        return sum(len(text.split()) for _, text in self.token_events)

    @property
    def finish_reasons(self) -> list[str]:
        return [
            c["finish_reason"] for ch in self.chunks for c in ch["choices"] if c["finish_reason"]
        ]

    @property
    def usage(self) -> dict[str, int] | None:
        found = [ch["usage"] for ch in self.chunks if ch.get("usage")]
        return found[-1] if found else None


def parse_sse(buf: bytes) -> tuple[list[str], bytes]:
    """Complete events' data fields in ``buf`` (LF or CRLF) and the unparsed rest."""
    buf = buf.replace(b"\r\n", b"\n")
    out = []
    while b"\n\n" in buf:
        block, buf = buf.split(b"\n\n", 1)
        data = [ln[5:].lstrip(b" ") for ln in block.split(b"\n") if ln.startswith(b"data:")]
        if data:
            out.append(b"\n".join(data).decode("utf-8", "replace"))
    return out, buf


async def stream(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any], timeout_s: float = 5.0
) -> Streamed:
    """POST ``body`` to ``url``; read SSE events with their arrival times."""
    send = time.perf_counter_ns()
    result = Streamed(status=0, headers={}, send_ns=send)
    pending = b""
    try:
        async with asyncio.timeout(timeout_s):
            async with session.post(url, json=body) as resp:
                result.status = resp.status
                result.headers = dict(resp.headers)
                if resp.status != 200:
                    result.body = await resp.read()
                    return result
                if not body.get("stream"):
                    result.body = await resp.read()
                    return result
                async for piece in resp.content.iter_any():
                    now = time.perf_counter_ns()
                    result.raw += piece
                    datas, pending = parse_sse(pending + piece)
                    result.events += [Event(d, now) for d in datas]
    except (aiohttp.ClientError, TimeoutError) as exc:
        result.error = exc
    return result


def run(coro_fn: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        return await coro_fn()

    return asyncio.run(main())


@pytest.fixture
def body() -> Callable[..., dict[str, Any]]:
    """A streaming completions body asking for exactly ``n`` tokens."""

    def make(n: int = 8, chat: bool = False, **extra: Any) -> dict[str, Any]:
        b: dict[str, Any] = {
            "model": "calibration",
            "max_tokens": n,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if chat:
            b["messages"] = [{"role": "user", "content": "one two three four"}]
        else:
            b["prompt"] = "one two three four"
        b.update(extra)
        return b

    return make
