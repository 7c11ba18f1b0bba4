"""A level's samplers end with the level: never left scraping an idle engine.

2026-12-05 on an H200 (``scripts/h200/sweep-triton.yaml``, ``--only vllm``): after the
last level (c=512, 21 s) its scraper ran on for 4 minutes, one ``GET /metrics`` a second
on a new connection, and the sweep never reached the engine's stop until SIGTERM. The
level's summary (about 2 s for 1,024 streams) had blocked the loop past the in-flight
scrape's 1 s timeout; uvloop then ran aiohttp's timer before the scraper's cancelled step,
the cancellation came back as a ``TimeoutError`` (``crossover.tasks``), read as a failed
scrape, and the block's exit waited on the scraper for ever.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from aiohttp import web

from crossover.sweep.scrape import scrape_loop
from crossover.tasks import alongside

uvloop = pytest.importorskip("uvloop")


async def _slow_metrics() -> tuple[web.AppRunner, str]:
    async def metrics(request: web.Request) -> web.Response:
        await asyncio.sleep(0.3)
        return web.Response(text="calibration:num_requests_running 1\n")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}/metrics"


def test_a_scraper_cancelled_after_the_loop_was_blocked_past_its_timeout_ends() -> None:
    async def go() -> float:
        runner, url = await _slow_metrics()
        prom: list[dict[str, object]] = []
        gpu: list[dict[str, object]] = []
        try:
            async with alongside(scrape_loop(url, None, 0.5, prom, gpu)):
                await asyncio.sleep(0.1)  # a scrape in flight, awaiting its response
                time.sleep(0.8)  # noqa: ASYNC251 - the level's summary on the loop, past the 0.5 s timeout
                t0 = time.perf_counter()
            return time.perf_counter() - t0
        finally:
            await runner.cleanup()

    async def bounded() -> float:
        return await asyncio.wait_for(go(), timeout=8)

    took = uvloop.run(bounded())
    assert took < 3.0


def test_a_scraper_stops_by_itself_once_the_load_has_ended() -> None:
    async def go() -> int:
        runner, url = await _slow_metrics()
        prom: list[dict[str, object]] = []
        gpu: list[dict[str, object]] = []
        stop = asyncio.Event()
        try:
            task = asyncio.ensure_future(scrape_loop(url, None, 0.05, prom, gpu, stop=stop))
            await asyncio.sleep(0.5)
            stop.set()
            await asyncio.wait_for(task, timeout=3)  # ended without a cancellation
            return len(prom)
        finally:
            await runner.cleanup()

    assert uvloop.run(go()) >= 1
