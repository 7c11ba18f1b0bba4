"""How many concurrent streams the calibration server keeps on schedule, on one core.

Spawns the server pinned to one CPU, opens C streams from client worker processes on the
other CPUs, and reads back the lag the server saw itself (GET /calibration/truth) and the
server's CPU use. Usage:

    .venv/bin/python bench/calibration_capacity.py --streams 256,1024,2048 --itl-ms 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import time
import urllib.request
from typing import Any

import aiohttp

from crossover.calibration.server import CalibrationConfig, spawn


async def _client(url: str, streams: int, tokens: int, start_at: float) -> tuple[int, int]:
    body = {
        "model": "calibration",
        "prompt": "hello world",
        "max_tokens": tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    conn = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=120)
    async with aiohttp.ClientSession(connector=conn, timeout=timeout) as s:
        await asyncio.sleep(max(0.0, start_at - time.time()))

        async def one() -> int:
            n = 0
            async with s.post(url + "/v1/completions", json=body) as r:
                async for _ in r.content.iter_any():
                    n += 1
            return n

        got = await asyncio.gather(*(one() for _ in range(streams)), return_exceptions=True)
    ok = sum(1 for g in got if isinstance(g, int))
    return ok, streams - ok


def _worker(url: str, streams: int, tokens: int, start_at: float, q: Any) -> None:
    import uvloop

    q.put(uvloop.run(_client(url, streams, tokens, start_at)))


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=30) as r:
        data: dict[str, Any] = json.loads(r.read())
        return data


def measure(
    streams: int, tokens: int, itl_ms: float, procs: int, server_cpu: int
) -> dict[str, Any]:
    cfg = CalibrationConfig(ttft_ms=20.0, itl_ms=itl_ms, truth_max_requests=streams)
    with spawn(cfg, cpu=server_cpu) as url:
        pid = _get(url + "/calibration/truth")["pid"]
        cpu0, t0 = _cpu_s(pid), time.monotonic()
        q: Any = mp.Queue()
        start_at = time.time() + 0.5
        per = [streams // procs + (1 if i < streams % procs else 0) for i in range(procs)]
        workers = [mp.Process(target=_worker, args=(url, n, tokens, start_at, q)) for n in per if n]
        for w in workers:
            w.start()
        results = [q.get() for _ in workers]
        for w in workers:
            w.join()
        cpu1, t1 = _cpu_s(pid), time.monotonic()
        truth = _get(url + "/calibration/truth")
    recs = truth["requests"]
    gaps = [r["emitted_gap_ms"] for r in recs if r["emitted_gap_ms"] is not None]
    first, later = truth["first_chunk_lag_ms"], truth["later_chunk_lag_ms"]
    # busy window: first arrival to last emission (the server idles outside it)
    window_s = (
        max(r["last_emit_ns"] or 0 for r in recs) - min(r["arrival_ns"] for r in recs)
    ) / 1e9
    chunks = sum(r["chunks_sent"] for r in recs)
    return {
        "streams": streams,
        "ok": sum(r[0] for r in results),
        "failed": sum(r[1] for r in results),
        "peak_in_flight": truth["peak_in_flight"],
        "chunks_per_s_target": streams * 1000.0 / itl_ms,
        "chunks_per_s": round(chunks / window_s),
        "server_cpu_frac": round((cpu1 - cpu0) / window_s, 3),
        "wall_s": round(t1 - t0, 2),
        "first_lag_mean_ms": first["mean"],
        "first_lag_p99_le_ms": first["p99_upper"],
        "first_lag_max_ms": first["max"],
        "later_lag_mean_ms": later["mean"],
        "later_lag_p50_le_ms": later["p50_upper"],
        "later_lag_p99_le_ms": later["p99_upper"],
        "later_lag_max_ms": later["max"],
        "emitted_gap_mean_ms": sum(gaps) / len(gaps) if gaps else None,
        "configured_gap_ms": itl_ms,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", default="64,256,1024")
    ap.add_argument("--tokens", type=int, default=100)
    ap.add_argument("--itl-ms", type=float, default=20.0)
    ap.add_argument("--client-procs", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument("--server-cpu", type=int, default=0)
    args = ap.parse_args()
    for c in (int(x) for x in args.streams.split(",")):
        print(json.dumps(measure(c, args.tokens, args.itl_ms, args.client_procs, args.server_cpu)))


if __name__ == "__main__":
    main()
