"""The floor: a bare ``asyncio.Protocol`` client on uvloop that stamps every read.

No HTTP library at all: one hand-written HTTP/1.1 request per connection, and per
``data_received`` nothing but ``perf_counter_ns`` and a list append (the end of the
chunked body is the only thing looked for). The chunked framing and the SSE events are
decoded after the load. So its CPU per token is what the event loop and the kernel cost
for one read, the least any Python client on uvloop can spend: ``client_overhead.py``
shows it beside the minimal aiohttp client, so a goal the lean transport misses can be
told apart from one no Python client could meet. Usage: URL STREAMS TOKENS OUT.json
(writes the minimal client's record format).
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import orjson

_END = b"0\r\n\r\n"


class _Stream(asyncio.Protocol):
    def __init__(self, request: bytes, done: asyncio.Future[None]) -> None:
        self.request = request
        self.done = done
        self.reads: list[tuple[int, bytes]] = []
        self.t_send = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.t_send = time.perf_counter_ns()
        transport.write(self.request)  # type: ignore[attr-defined]  # uvloop's TCPTransport

    def data_received(self, data: bytes) -> None:
        self.reads.append((time.perf_counter_ns(), data))
        if data.endswith(_END) and not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


def _body_reads(reads: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """The body as (stamp, bytes) pieces, each stamped with the read that brought its
    last byte: HTTP/1.1 chunks decoded, or the reads' own bytes where the body is not
    chunked (decoded after the load)."""
    raw = b"".join(d for _, d in reads)
    ends, pos = [], 0
    for _, d in reads:
        pos += len(d)
        ends.append(pos)
    head_end = raw.index(b"\r\n\r\n") + 4
    if b"transfer-encoding: chunked" in raw[:head_end].lower():
        spans = []
        i = head_end
        while True:
            eol = raw.index(b"\r\n", i)
            size = int(raw[i:eol].split(b";")[0], 16)
            if size == 0:
                break
            spans.append((eol + 2, eol + 2 + size))
            i = eol + 2 + size + 2
    else:
        starts = [0, *ends[:-1]]
        spans = [(max(a, head_end), b) for a, b in zip(starts, ends, strict=True) if b > head_end]
    out: list[tuple[int, bytes]] = []
    r = 0
    for start, end in spans:
        while ends[r] < end:
            r += 1
        out.append((reads[r][0], raw[start:end]))
    return out


async def main(url: str, streams: int, tokens: int, out: str) -> None:
    u = urlsplit(url)
    host, port = u.hostname or "127.0.0.1", u.port or 80
    payload = orjson.dumps({
        "model": "calibration",
        "prompt": "one two three four five six seven eight",
        "max_tokens": tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    })  # fmt: skip
    request = (
        f"POST /v1/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
        "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
        f"Connection: close\r\nContent-Length: {len(payload)}\r\n\r\n"
    ).encode() + payload
    loop = asyncio.get_running_loop()

    async def one() -> _Stream:
        done: asyncio.Future[None] = loop.create_future()
        transport, proto = await loop.create_connection(lambda: _Stream(request, done), host, port)
        await done
        transport.close()
        return proto

    protos = await asyncio.gather(*(one() for _ in range(streams)))
    records = []
    for p in protos:  # parsed after the load: nothing but stamps during it
        arrivals, emitted, buf = [], [], b""
        for t, data in _body_reads(p.reads):
            *lines, buf = (buf + data).split(b"\n")
            for line in lines:
                if line.startswith(b"data: {"):
                    obj = orjson.loads(line[6:])
                    choices = obj.get("choices") or []
                    if choices and choices[0].get("text"):
                        arrivals.append(t)
                        emitted.append(obj.get("crossover_emit_ns"))
        records.append({"t_send_ns": p.t_send, "arrival_ns": arrivals, "emitted_ns": emitted})
    Path(out).write_bytes(orjson.dumps(records))  # noqa: ASYNC240 - the load is over


if __name__ == "__main__":
    import uvloop

    uvloop.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]))
