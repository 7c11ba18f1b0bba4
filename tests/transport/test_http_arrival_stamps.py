"""Chunks are stamped where they enter the process (the connection's ``data_received``),
not when the read loop gets to them: when streams end together, one stream's slow work
must not make another's last token look late."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import orjson

from crossover.dialects.base import ChunkInfo
from crossover.engines.registry import dialect as get_dialect
from crossover.records.model import RequestRecord
from crossover.transport.client import StreamOptions, TransportName, make_client
from crossover.transport.http import AiohttpTransport, StampingHandler, Timeouts
from crossover.transport.leanhttp import LeanSession, LeanStreamConnection


def _event(text: str, finish: str | None = None) -> bytes:
    obj = {"choices": [{"index": 0, "text": text, "finish_reason": finish}]}
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _chunked(body: bytes) -> bytes:
    return f"{len(body):x}\r\n".encode() + body + b"\r\n"


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def _server(n: int, ready: threading.Event, sent: list[int]) -> tuple[int, threading.Thread]:
    """``n`` streams: a first token each, then every stream's last token and [DONE] in
    one burst (back-to-back writes), then the end of each body."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(n)
    port = lsock.getsockname()[1]

    def run() -> None:
        conns = []
        for _ in range(n):
            c, _ = lsock.accept()
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += c.recv(65536)
            head, rest = buf.split(b"\r\n\r\n", 1)
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            while len(rest) < length:
                rest += c.recv(65536)
            c.sendall(HEAD + _chunked(_event("first")))
            conns.append(c)
        ready.wait(5)
        time.sleep(0.01)  # the client's loop is busy now: the burst waits in its sockets
        sent.append(time.perf_counter_ns())
        for i, c in enumerate(conns):
            last = _event("slow" if i == 0 else "last", "length") + b"data: [DONE]\n\n"
            c.sendall(_chunked(last) + b"0\r\n\r\n")
        time.sleep(0.5)
        for c in conns:
            c.close()
        lsock.close()

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return port, th


class SlowDialect:
    """The vLLM dialect, but parsing the event that says "slow" takes 80 ms of the loop."""

    def __init__(self) -> None:
        self.inner = get_dialect("vllm")
        self.has_done_sentinel = self.inner.has_done_sentinel

    def parse(self, obj: dict[str, object], endpoint: str) -> ChunkInfo:
        info = self.inner.parse(obj, endpoint)  # type: ignore[arg-type]
        if info.text == "slow":
            time.sleep(0.08)
        return info


def _stamping_connections(session: object) -> set[type]:
    """The protocol types of the connections in use (each transport's private pool: if
    it moves, this fails loudly)."""
    if isinstance(session, LeanSession):
        return {type(c) for c in session._open}
    assert isinstance(session, AiohttpTransport)
    return {type(p) for p in session.session.connector._acquired}  # type: ignore[union-attr]


def test_last_tokens_arriving_together_are_stamped_together(transport: TransportName) -> None:
    n = 4
    ready = threading.Event()
    sent: list[int] = []
    port, th = _server(n, ready, sent)

    async def go() -> list[RequestRecord]:
        records = [RequestRecord(index=i, expected_output_tokens=2, t_send_ns=0) for i in range(n)]
        timeouts = Timeouts(first_token_s=5, gap_s=5, total_s=10)
        options = StreamOptions(SlowDialect(), "completions", timeouts)  # type: ignore[arg-type]
        async with make_client(transport) as session:
            tasks = [
                asyncio.create_task(
                    session.stream(
                        f"http://127.0.0.1:{port}/v1/completions",
                        {"model": "m", "prompt": "p", "stream": True},
                        r,
                        options,
                    )
                )
                for r in records
            ]
            while not all(r.chunk_arrival_ns for r in records):  # noqa: ASYNC110 (polling records)
                await asyncio.sleep(0.005)
            protos = _stamping_connections(session)
            ready.set()
            time.sleep(0.1)  # noqa: ASYNC251 (the point: a busy loop while the burst arrives)
            await asyncio.gather(*tasks)
        # the connections stamp in data_received: aiohttp's with StampingHandler, the
        # lean transport's are its own protocol
        assert protos == {StampingHandler if transport == "aiohttp" else LeanStreamConnection}
        return records

    records = asyncio.run(go())
    th.join(2)
    assert all(r.error_kind is None and len(r.chunk_arrival_ns) == 2 for r in records)
    lasts = [r.chunk_arrival_ns[-1] for r in records]
    # the burst reached every socket while the loop was busy; one stream's 80 ms parse then
    # ran before the others' reads (stamped at read, they would be 80 ms late), yet every
    # last token carries the poll that brought it
    assert max(lasts) - min(lasts) < 20_000_000, [(t - min(lasts)) / 1e6 for t in lasts]
    assert min(lasts) >= sent[0]
    assert all(
        r.t_done_ns is not None and r.t_done_ns - r.chunk_arrival_ns[-1] < 20_000_000
        for r in records
    )
