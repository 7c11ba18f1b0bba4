"""Streaming-response parsers against each other, then two transports end to end.

Parsers (``--parsers``, the default): one realistic response, an HTTP/1.1 200 with
``Transfer-Encoding: chunked`` and ``Content-Type: text/event-stream``, N OpenAI
completion chunks as ``data: {...}`` events, a usage chunk and ``data: [DONE]``, cut into
reads in several patterns, goes through each candidate with a ``perf_counter_ns`` stamp
per read, as a transport would take it:

* ``aiohttp``: crossover's path today, without the socket: ``StampingHandler`` (aiohttp's
  ``ResponseHandler`` with its C ``HttpResponseParser``, the body into a
  ``StreamReader``), drained by ``readchunk`` as ``http.py`` does, each chunk mapped to
  the stamp of the read that brought its last byte, ``SSEParser`` on each chunk;
* ``httptools`` (llhttp, uvicorn's parser): the body from ``on_body`` callbacks, then
  either ``SSEParser`` or the SSE layer of ``ChunkedSSEParser`` (``chunked=False``);
* ``h11``: ``receive_data``/``next_event``, the same two SSE layers;
* ``hand``: ``crossover.transport.chunked_sse.ChunkedSSEParser`` (pure Python,
  ``bytes.find``), the head by ``crossover.transport.head.parse_head``.

Every candidate must yield exactly the reference's payloads, each stamped by the read
holding the event's last byte (checked first, with read indices as stamps). Then each
pattern is timed: ``--rounds`` rounds of ``--streams`` responses per candidate,
candidates interleaved, CPU by ``process_time``; the best round is kept. Ratios within
one run are the result, not the absolute speeds.

End to end (``--e2e``): the calibration server (its own process, pinned to the last core)
streams ``--tokens`` tokens to ``--concurrency`` concurrent streams; each client runs in
its own process (``--client``) on the other cores and reports its CPU seconds during
the load (``process_time``) per token received:

* ``crossover``: the aiohttp ``Transport``'s ``stream`` as the runner calls it (records,
  dialect, timeouts);
* ``aiohttp``: the same read loop without the record: ``make_session``, ``readchunk``,
  stamps from ``StampingHandler``, ``SSEParser``, ``orjson`` and the dialect per event;

(The ``lean`` and ``lean-sink`` rows of ``docs/results/transport_parsers.md`` came from a
prototype ``asyncio.Protocol`` client that became ``crossover.transport.leanhttp``,
``--transport lean``, measured in ``docs/results/client_overhead_lean.md``; the
prototype is gone.)

    python bench/transport_parsers.py --json /tmp/parsers.json
    python bench/transport_parsers.py --e2e --concurrency 256 --tokens 256 --json /tmp/e2e.json
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from crossover.transport.chunked_sse import ChunkedSSEParser, StampedEvent
from crossover.transport.head import parse_head
from crossover.transport.sse import SSEParser

Stamp = Callable[[int], int]  # read index -> stamp
Result = list[tuple[bytes, int]]  # (payload, stamp)

HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
    b"Transfer-Encoding: chunked\r\nDate: Wed, 02 Dec 2026 16:00:00 GMT\r\n"
    b"Server: uvicorn\r\n\r\n"
)


# --- the stream ------------------------------------------------------------------------


def payloads(n: int) -> list[bytes]:
    """n OpenAI completion chunks as vLLM writes them, a usage chunk, [DONE]."""
    out = []
    for i in range(n):
        out.append(
            orjson.dumps(
                {
                    "id": "cmpl-8b2c1e0f4d6a4f0e9a7b3c5d1e2f3a4b",
                    "object": "text_completion",
                    "created": 1764691200,
                    "model": "meta-llama/Llama-3.1-8B-Instruct",
                    "choices": [
                        {
                            "index": 0,
                            "text": f" word{i % 97}",
                            "logprobs": None,
                            "finish_reason": None if i < n - 1 else "length",
                            "stop_reason": None,
                        }
                    ],
                    "usage": None,
                }
            )
        )
    out.append(
        orjson.dumps(
            {
                "id": "cmpl-8b2c1e0f4d6a4f0e9a7b3c5d1e2f3a4b",
                "object": "text_completion",
                "created": 1764691200,
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "choices": [],
                "usage": {"prompt_tokens": 8, "total_tokens": 8 + n, "completion_tokens": n},
            }
        )
    )
    out.append(b"[DONE]")
    return out


def wire_of(datas: list[bytes], events_per_chunk: int, chunk_bytes: int) -> tuple[bytes, list[int]]:
    """The chunked body: ``events_per_chunk`` whole events per HTTP chunk, or (with
    ``chunk_bytes``) chunks of that many body bytes, events cut anywhere; and the wire
    offset of each event's last byte."""
    body = b"".join(b"data: " + d + b"\n\n" for d in datas)
    ends_body = []
    off = 0
    for d in datas:
        off += len(d) + 8
        ends_body.append(off - 1)
    if chunk_bytes:
        cuts = list(range(0, len(body), chunk_bytes)) + [len(body)]
    else:
        cuts = [0]
        for k in range(events_per_chunk - 1, len(datas), events_per_chunk):
            cuts.append(ends_body[k] + 1)
        if cuts[-1] != len(body):
            cuts.append(len(body))
    wire = bytearray()
    where = [0] * len(body)
    for a, b in itertools.pairwise(cuts):
        wire += b"%x\r\n" % (b - a)
        base = len(wire)
        for i in range(a, b):
            where[i] = base + i - a
        wire += body[a:b] + b"\r\n"
    wire += b"0\r\n\r\n"
    return bytes(wire), [where[e] + len(HEAD) for e in ends_body]


def reads_of(wire: bytes, per_read: int, chunk_ends: bool, read_bytes: int) -> list[bytes]:
    """The body wire cut into reads: ``per_read`` HTTP chunks each, or ``read_bytes``."""
    if read_bytes:
        return [wire[i : i + read_bytes] for i in range(0, len(wire), read_bytes)]
    # whole HTTP chunks per read: walk the framing
    out, pos, k, start = [], 0, 0, 0
    while pos < len(wire):
        eol = wire.index(b"\r\n", pos)
        size = int(wire[pos:eol], 16)
        pos = eol + 2 + size + 2 if size else eol + 4
        k += 1
        if k == per_read or pos >= len(wire):
            out.append(wire[start:pos])
            start, k = pos, 0
    assert chunk_ends
    return out


#: name -> (events per HTTP chunk, chunk body bytes, chunks per read, read bytes)
PATTERNS: dict[str, tuple[int, int, int, int]] = {
    "1 event/read": (1, 0, 1, 0),
    "8 events/read": (1, 0, 8, 0),
    "64 events/read": (1, 0, 64, 0),
    "split (61-byte chunks, 113-byte reads)": (0, 61, 0, 113),
    "split (reads of 1,460 bytes)": (1, 0, 0, 1460),
}


def make_reads(datas: list[bytes], pattern: str) -> tuple[list[bytes], list[int]]:
    """The reads (the head is the first) and the read index of each event's last byte."""
    epc, cb, per_read, rb = PATTERNS[pattern]
    wire, ends = wire_of(datas, epc, cb)
    reads = [HEAD, *reads_of(wire, per_read, True, rb)]
    bounds, acc = [], 0
    for r in reads:
        acc += len(r)
        bounds.append(acc)
    idx, j = [], 0
    for e in ends:
        while bounds[j] <= e:
            j += 1
        idx.append(j)
    return reads, idx


# --- the candidates ---------------------------------------------------------------------


class _FakeTransport:
    """Just enough of a transport for aiohttp's protocol."""

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def _aiohttp_async(reads: list[bytes], stamp: Stamp) -> Result:
    from crossover.transport.http import READ_BUFSIZE, StampingHandler

    loop = asyncio.get_running_loop()
    proto = StampingHandler(loop)
    proto.connection_made(_FakeTransport())  # type: ignore[arg-type]
    proto.set_response_params(read_bufsize=READ_BUFSIZE, auto_decompress=True)
    proto.data_received(reads[0])
    _msg, content = await proto.read()
    sse = SSEParser()
    out: Result = []
    consumed = 0
    real_stamps: dict[int, int] = {}
    for i in range(1, len(reads)):
        proto.data_received(reads[i])
        rx = proto.rx
        assert rx is not None
        real_stamps[rx[-1][0]] = i
        # drain what is buffered without waiting (http.py awaits readchunk here)
        while content._buffer or content._http_chunk_splits or content.is_eof():
            data, _ = await content.readchunk()
            if data:
                consumed += len(data)
                while len(rx) > 1 and rx[0][1] < consumed:
                    rx.popleft()
                t = rx[0][0]
                out.extend((ev.data, t) for ev in sse.feed(data))
            elif content.at_eof():
                out.extend((ev.data, 0) for ev in sse.close())
                break
        if content.at_eof():
            break
    # StampingHandler stamps with perf_counter_ns: map to the caller's stamps
    return [(d, stamp(real_stamps[t])) for d, t in out]


_LOOP: asyncio.AbstractEventLoop | None = None


def cand_aiohttp(reads: list[bytes], stamp: Stamp) -> Result:
    # one loop for every call (a new loop per response would be timed, not aiohttp);
    # what is left is one run_until_complete per response, a few microseconds
    global _LOOP
    if _LOOP is None:
        _LOOP = asyncio.new_event_loop()
    return _LOOP.run_until_complete(_aiohttp_async(reads, stamp))


def _ours_sse(chunked: bool) -> ChunkedSSEParser:
    return ChunkedSSEParser(chunked=chunked)


def cand_httptools(reads: list[bytes], stamp: Stamp, fast_sse: bool) -> Result:
    import httptools

    body: list[bytes] = []

    class CB:
        def on_body(self, b: bytes) -> None:
            body.append(b)

    p = httptools.HttpResponseParser(CB())
    out: Result = []
    if fast_sse:
        sse = _ours_sse(False)
        for i, r in enumerate(reads):
            t = stamp(i)
            p.feed_data(r)
            if body:
                data = body[0] if len(body) == 1 else b"".join(body)
                body.clear()
                out.extend((e[0], t) for e in sse.feed(data, t))
        out.extend((e[0], 0) for e in sse.close(0))
    else:
        ref = SSEParser()
        for i, r in enumerate(reads):
            t = stamp(i)
            p.feed_data(r)
            if body:
                data = body[0] if len(body) == 1 else b"".join(body)
                body.clear()
                out.extend((ev.data, t) for ev in ref.feed(data))
        out.extend((ev.data, 0) for ev in ref.close())
    return out


def cand_h11(reads: list[bytes], stamp: Stamp, fast_sse: bool) -> Result:
    import h11

    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method="POST", target="/v1/completions",
                          headers=[("Host", "x"), ("Content-Length", "0")]))  # fmt: skip
    conn.send(h11.EndOfMessage())
    out: Result = []
    sse_fast = _ours_sse(False)
    sse_ref = SSEParser()
    for i, r in enumerate(reads):
        t = stamp(i)
        conn.receive_data(r)
        pieces = []
        while True:
            ev = conn.next_event()
            if ev is h11.NEED_DATA or ev is h11.PAUSED:
                break
            if type(ev) is h11.Data:
                pieces.append(ev.data)
            elif type(ev) is h11.EndOfMessage:
                break
        if pieces:
            data = pieces[0] if len(pieces) == 1 else b"".join(pieces)
            if fast_sse:
                out.extend((e[0], t) for e in sse_fast.feed(bytes(data), t))
            else:
                out.extend((e.data, t) for e in sse_ref.feed(bytes(data)))
    if fast_sse:
        out.extend((e[0], 0) for e in sse_fast.close(0))
    else:
        out.extend((e.data, 0) for e in sse_ref.close())
    return out


def cand_hand(reads: list[bytes], stamp: Stamp) -> Result:
    got = parse_head(reads[0])
    assert got is not None
    head, used = got
    p = ChunkedSSEParser(head.chunked, head.content_length)
    out: list[StampedEvent] = []
    if used < len(reads[0]):
        out += p.feed(reads[0][used:], stamp(0))
    for i in range(1, len(reads)):
        out += p.feed(reads[i], stamp(i))
    assert p.done
    return [(e[0], e[3]) for e in out]


CANDIDATES: dict[str, Callable[[list[bytes], Stamp], Result]] = {
    "aiohttp (crossover today)": cand_aiohttp,
    "httptools + SSEParser": lambda r, s: cand_httptools(r, s, False),
    "httptools + fast SSE": lambda r, s: cand_httptools(r, s, True),
    "h11 + SSEParser": lambda r, s: cand_h11(r, s, False),
    "h11 + fast SSE": lambda r, s: cand_h11(r, s, True),
    "hand (chunked_sse)": cand_hand,
}


def available() -> dict[str, Callable[[list[bytes], Stamp], Result]]:
    out = {}
    for name, fn in CANDIDATES.items():
        mod = name.split()[0]
        if mod in ("httptools", "h11"):
            try:
                __import__(mod)
            except ImportError:
                print(f"{mod} is not installed: {name} left out", file=sys.stderr)
                continue
        out[name] = fn
    return out


# --- the parser benchmark ---------------------------------------------------------------


def _perf_stamp(_read: int) -> int:
    return time.perf_counter_ns()


def bench_parsers(args: argparse.Namespace) -> dict[str, Any]:
    datas = payloads(args.events)
    cands = available()
    rows: list[dict[str, Any]] = []
    for pattern in PATTERNS:
        reads, want_idx = make_reads(datas, pattern)
        want = list(zip(datas, want_idx, strict=True))
        for name, fn in cands.items():
            got = fn(reads, lambda i: i)
            if got != want:
                bad = next((k for k, (g, w) in enumerate(zip(got, want, strict=False)) if g != w),
                           min(len(got), len(want)))  # fmt: skip
                raise SystemExit(f"{name} on {pattern!r}: wrong at event {bad} of {len(want)}")
        cpu: dict[str, list[float]] = {n: [] for n in cands}
        for _ in range(args.rounds):
            for name, fn in cands.items():  # interleaved: a noisy moment hits all
                t0 = time.process_time_ns()
                for _ in range(args.streams):
                    fn(reads, _perf_stamp)
                cpu[name].append((time.process_time_ns() - t0) / 1e3)
        n_events = len(datas) * args.streams
        base = min(cpu["aiohttp (crossover today)"])
        for name in cands:
            best = min(cpu[name])
            rows.append({
                "pattern": pattern, "candidate": name, "reads": len(reads),
                "events": len(datas), "cpu_us_per_event": best / n_events,
                "events_per_cpu_s": n_events / (best / 1e6),
                "cpu_us_per_event_median": statistics.median(cpu[name]) / n_events,
                "speedup_vs_aiohttp": base / best,
                "correct": True,
            })  # fmt: skip
        print(f"  {pattern}: done", file=sys.stderr)
    return {"rows": rows, "events_per_stream": len(datas)}


def parsers_table(res: dict[str, Any]) -> str:
    lines = [
        "| pattern | candidate | reads | CPU µs/event | events per CPU-s | × aiohttp |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in res["rows"]:
        lines.append(
            f"| {r['pattern']} | {r['candidate']} | {r['reads']:,} | "
            f"{r['cpu_us_per_event']:.2f} | {r['events_per_cpu_s']:,.0f} | "
            f"{r['speedup_vs_aiohttp']:.2f} |"
        )
    return "\n".join(lines)


# --- end to end ---------------------------------------------------------------------------


async def _client(kind: str, url: str, c: int, tokens: int) -> dict[str, Any]:

    from crossover.dialects.base import RequestSpec
    from crossover.dialects.openai import VLLMDialect
    from crossover.records.model import RequestRecord
    from crossover.transport.http import (
        AiohttpTransport,
        StreamOptions,
        Timeouts,
        _arrivals_of,
        make_session,
    )

    dialect = VLLMDialect()
    spec = RequestSpec("calibration", "one two three four five six seven eight", tokens)
    body = dialect.body(spec)
    path = dialect.path(spec)
    payload = orjson.dumps(body)
    timeouts = Timeouts(first_token_s=120.0, gap_s=60.0, total_s=600.0)
    loads = orjson.loads
    parse = dialect.parse
    counts: list[int] = []
    stamped: list[bool] = []
    late: list[int] = []  # arrival stamp - the server's emission stamp, per token

    async def per_event(events: list[tuple[bytes, int]], arrivals: list[int]) -> None:
        for raw, t in events:
            if raw[:6] == b"[DONE]":
                continue
            info = parse(loads(raw), "completions")
            if info.text:
                arrivals.append(t)
                if info.emitted_ns is not None:
                    late.append(t - info.emitted_ns)

    options = StreamOptions(dialect, "completions", timeouts)
    async with make_session(None, timeouts) as session:
        transport = AiohttpTransport(session=session)
        await transport.open_connections(url, c)

        async def one_xo() -> None:
            rec = RequestRecord(index=0, expected_output_tokens=tokens, t_send_ns=0)
            await transport.stream(url + path, body, rec, options)
            assert rec.error_kind is None, rec.error
            counts.append(len(rec.chunk_arrival_ns))
            late.extend(a - e for a, e in zip(rec.chunk_arrival_ns, rec.chunk_emitted_ns or [],
                                              strict=True))  # fmt: skip
            stamped.append(all(rec.chunk_arrival_ns))

        async def one_aio() -> None:
            arrivals: list[int] = []
            hdrs = {"Content-Type": "application/json"}
            async with session.post(url + path, data=payload, headers=hdrs) as resp:
                assert resp.status == 200
                content = resp.content
                rx = _arrivals_of(resp)
                assert rx is not None
                sse = SSEParser()
                consumed = 0
                while True:
                    data, _ = await content.readchunk()
                    if data:
                        consumed += len(data)
                        while len(rx) > 1 and rx[0][1] < consumed:
                            rx.popleft()
                        t = rx[0][0]
                        await per_event([(e.data, t) for e in sse.feed(data)], arrivals)
                    elif content.at_eof():
                        await per_event([(e.data, 0) for e in sse.close()], arrivals)
                        break
            counts.append(len(arrivals))
            stamped.append(all(arrivals))

        fn = one_xo if kind == "crossover" else one_aio
        times0 = os.times()
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        await asyncio.gather(*(fn() for _ in range(c)))
        wall = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        times1 = os.times()
    tokens_got = sum(counts)
    return {
        "client": kind, "concurrency": c, "tokens_requested": tokens * c,
        "tokens_received": tokens_got, "every_token_stamped": all(stamped),
        "late_mean_ms": statistics.fmean(late) / 1e6 if late else None,
        "late_p99_ms": sorted(late)[int(0.99 * (len(late) - 1))] / 1e6 if late else None,
        "complete_streams": sum(1 for n in counts if n == tokens), "wall_s": wall,
        "cpu_s": cpu, "user_s": times1.user - times0.user,
        "sys_s": times1.system - times0.system, "cpu_us_per_token": cpu / max(tokens_got, 1) * 1e6,
        "tokens_per_cpu_s": tokens_got / cpu if cpu else None,
    }  # fmt: skip


def bench_e2e(args: argparse.Namespace) -> dict[str, Any]:
    from crossover.calibration.server import CalibrationConfig, spawn

    cores = os.cpu_count() or 1
    server_core = cores - 1
    client_cores = [c for c in range(cores) if c != server_core] or [0]
    cfg = CalibrationConfig(ttft_ms=5.0, itl_ms=args.itl_ms, default_max_tokens=args.tokens,
                            truth_max_requests=20_000)  # fmt: skip
    runs: list[dict[str, Any]] = []
    with spawn(cfg, cpu=server_core if cores > 1 else None) as url:
        for rep in range(args.repeats):
            for kind in args.clients.split(","):
                argv = [sys.executable, __file__, "--client", kind, "--url", url, "--concurrency",
                        str(args.concurrency), "--tokens", str(args.tokens)]  # fmt: skip
                if cores > 1 and sys.platform == "linux":
                    argv = ["taskset", "-c", ",".join(map(str, client_cores)), *argv]
                p = subprocess.run(argv, capture_output=True, text=True, timeout=900)
                if p.returncode != 0:
                    raise SystemExit(f"{kind} failed:\n{p.stderr[-3000:]}")
                res = json.loads(p.stdout.strip().splitlines()[-1])
                res["repeat"] = rep
                runs.append(res)
                print(f"  {kind} rep {rep}: {res['cpu_us_per_token']:.2f} µs/token, "
                      f"{res['tokens_received']:,} tokens", file=sys.stderr)  # fmt: skip
    return {"runs": runs, "itl_ms": args.itl_ms, "tokens": args.tokens,
            "concurrency": args.concurrency}  # fmt: skip


def e2e_table(res: dict[str, Any]) -> str:
    by: dict[str, list[dict[str, Any]]] = {}
    for r in res["runs"]:
        by.setdefault(r["client"], []).append(r)
    base = statistics.median(r["cpu_us_per_token"] for r in by.get("aiohttp", res["runs"]))
    lines = [
        "| client | streams | tokens received | all stamped | CPU µs/token (median, min–max) "
        "| tokens per CPU-s | × aiohttp loop | sys share | token late mean / p99 ms |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for kind, rs in by.items():
        us = [r["cpu_us_per_token"] for r in rs]
        med = statistics.median(us)
        lines.append(
            f"| {kind} | {res['concurrency']} | {rs[0]['tokens_received']:,} of "
            f"{rs[0]['tokens_requested']:,} | {all(r['every_token_stamped'] for r in rs)} | "
            f"{med:.2f} ({min(us):.2f}–{max(us):.2f}) | {1e6 / med:,.0f} | {base / med:.2f} | "
            f"{sum(r['sys_s'] for r in rs) / sum(r['cpu_s'] for r in rs):.0%} | "
            f"{statistics.median(r['late_mean_ms'] for r in rs):.2f} / "
            f"{statistics.median(r['late_p99_ms'] for r in rs):.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=256, help="token events per response")
    ap.add_argument("--streams", type=int, default=40, help="responses per timed round")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--e2e", action="store_true", help="end to end on the calibration server")
    ap.add_argument("--concurrency", type=int, default=256)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--itl-ms", type=float, default=20.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--clients", default="crossover,aiohttp")
    ap.add_argument("--client", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args()
    if args.client:  # one end-to-end client, in its own process
        import uvloop

        res = uvloop.run(_client(args.client, args.url, args.concurrency, args.tokens))
        print(json.dumps(res))
        return
    meta = {
        "command": "python bench/transport_parsers.py " + " ".join(sys.argv[1:]),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(), "cpus": os.cpu_count(),
        "machine": platform.processor() or platform.machine(),
    }  # fmt: skip
    versions = {}
    for mod in ("aiohttp", "httptools", "h11", "uvloop"):
        try:
            versions[mod] = __import__(mod).__version__
        except (ImportError, AttributeError):
            versions[mod] = None
    meta["versions"] = versions
    if args.e2e:
        res = bench_e2e(args)
        table = e2e_table(res)
    else:
        res = bench_parsers(args)
        table = parsers_table(res)
    print(table)
    if args.json:
        args.json.write_text(json.dumps({**meta, **res, "table": table}, indent=2))


if __name__ == "__main__":
    main()
