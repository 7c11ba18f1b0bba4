"""``open_connections`` leaves the run's connections in the pool before the load."""

from __future__ import annotations

import asyncio
import socket

from aiohttp import web

from crossover.transport.http import make_session, open_connections


def test_open_connections_are_the_ones_the_load_uses() -> None:
    async def go() -> tuple[int, set[object], set[object]]:
        peers: list[set[object]] = [set(), set()]
        phase = [0]

        async def handler(request: web.Request) -> web.Response:
            peers[phase[0]].add(request.transport.get_extra_info("peername"))  # type: ignore[union-attr]
            await asyncio.sleep(0.05)  # all in flight together
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
            async with make_session() as session:
                answered = await open_connections(session, url, 8)
                phase[0] = 1

                async def post() -> None:
                    async with session.post(url + "/v1/completions", data=b"{}") as r:
                        await r.read()

                await asyncio.gather(*(post() for _ in range(8)))
        finally:
            await runner.cleanup()
        return answered, peers[0], peers[1]

    answered, opened, used = asyncio.run(go())
    assert answered == 8
    assert len(opened) == 8
    assert used == opened  # no new connection during the load
