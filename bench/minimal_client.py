"""The reference: a minimal aiohttp SSE client that stamps every read and parses later.

It does nothing per chunk but ``perf_counter_ns`` and a list append, so its stamps are
as early as an aiohttp client's can be; ``client_overhead.py`` compares crossover's
last-token stamp with this one's. Usage: URL STREAMS TOKENS OUT.json
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import aiohttp
import orjson


async def main(url: str, streams: int, tokens: int, out: str) -> None:
    perf = time.perf_counter_ns
    body = {
        "model": "calibration",
        "prompt": "one two three four five six seven eight",
        "max_tokens": tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    reads: list[tuple[int, list[tuple[int, bytes]]]] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def one() -> None:
            got: list[tuple[int, bytes]] = []
            t_send = perf()
            async with session.post(url + "/v1/completions", json=body) as resp:
                async for data in resp.content.iter_any():
                    got.append((perf(), data))
            reads.append((t_send, got))

        await asyncio.gather(*(one() for _ in range(streams)))
    records = []
    for t_send, got in reads:  # parsed after the load: nothing but stamps during it
        arrivals, emitted, buf = [], [], b""
        for t, data in got:
            *lines, buf = (buf + data).split(b"\n")
            for line in lines:
                if line.startswith(b"data: {"):
                    obj = orjson.loads(line[6:])
                    choices = obj.get("choices") or []
                    if choices and choices[0].get("text"):
                        arrivals.append(t)
                        emitted.append(obj.get("crossover_emit_ns"))
        records.append({"t_send_ns": t_send, "arrival_ns": arrivals, "emitted_ns": emitted})
    Path(out).write_bytes(orjson.dumps(records))  # noqa: ASYNC240 - the load is over


if __name__ == "__main__":
    import uvloop

    uvloop.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]))
