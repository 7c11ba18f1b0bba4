"""``open_connections`` leaves the run's connections in the pool before the load."""

from __future__ import annotations

import asyncio
import socket

from aiohttp import web

from crossover.engines.registry import dialect as get_dialect
from crossover.records.model import RequestRecord
from crossover.transport.client import StreamOptions, TransportName, make_client
from crossover.transport.http import Timeouts

SSE = b'data: {"choices": [{"index": 0, "text": " a", "finish_reason": "length"}]}\n\n'


def test_open_connections_are_the_ones_the_load_uses(transport: TransportName) -> None:
    async def go() -> tuple[int, set[object], set[object]]:
        peers: list[set[object]] = [set(), set()]
        phase = [0]

        async def handler(request: web.Request) -> web.Response:
            peers[phase[0]].add(request.transport.get_extra_info("peername"))  # type: ignore[union-attr]
            await asyncio.sleep(0.05)  # all in flight together
            if request.method == "POST":  # a whole stream, so the connection is kept
                return web.Response(
                    body=SSE + b"data: [DONE]\n\n", content_type="text/event-stream"
                )
            return web.Response(text="ok")

        app = web.Application()
        app.router.add_get("/health", handler)
        app.router.add_post("/v1/completions", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        site = web.SockSite(runner, sock)
        await site.start()
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        try:
            async with make_client(transport) as session:
                answered = await session.open_connections(url, 8)
                phase[0] = 1

                async def post() -> None:
                    rec = RequestRecord(index=0, expected_output_tokens=1, t_send_ns=0)
                    options = StreamOptions(get_dialect("vllm"), "completions", Timeouts())
                    await session.stream(url + "/v1/completions", {"stream": True}, rec, options)
                    assert rec.ok, rec.error

                await asyncio.gather(*(post() for _ in range(8)))
        finally:
            await runner.cleanup()
        return answered, peers[0], peers[1]

    answered, opened, used = asyncio.run(go())
    assert answered == 8
    assert len(opened) == 8
    assert used == opened  # no new connection during the load


def test_the_warm_up_of_a_server_that_accepts_but_never_answers_is_bounded(
    transport: TransportName,
) -> None:
    """A listening socket nobody accepts from: the kernel completes the handshakes into
    its queue and no answer ever comes (issue 43: a full accept queue held a run 216 s
    in this warm-up). Each GET is given up after its limit; none is counted answered."""

    async def go() -> tuple[int, float]:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)  # never accepted
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        try:
            async with make_client(transport, None, Timeouts(connect_s=0.5)) as session:
                t0 = asyncio.get_running_loop().time()
                answered = await session.open_connections(url, 16, limit_s=0.5)
                return answered, asyncio.get_running_loop().time() - t0
        finally:
            listener.close()

    answered, took = asyncio.run(asyncio.wait_for(go(), 20))
    assert answered == 0
    assert took < 2.0
