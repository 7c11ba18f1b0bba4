"""The client floor: how late crossover's own client sees what a server sends.

Against the calibration server, whose every chunk carries ``crossover_emit_ns`` (the
server's ``perf_counter_ns`` just before the write; CLOCK_MONOTONIC on Linux, one clock
for every process of the machine), the delivery delay of each chunk is exactly
``arrival_ns - crossover_emit_ns``. At one concurrency and token rate this module
measures, with the same transport ``crossover run`` uses:

* delivery delay (p50/p99/max): the floor a latency figure is compared against;
* send lag: ``t_send`` minus the moment the stream's previous request ended (when the
  closed loop meant to send the next one): how slowly the loop gets back to a stream;
* event-loop lag: a probe task's ``asyncio.sleep`` overshoot during the run;
* client CPU seconds (``time.process_time``) and streamed tokens per second;
* TPOT and ITL p50 as measured, beside the server's truth (``/calibration/truth``),
  so the measurement error is visible, and the server's own emission lag, so a server
  that fell behind is not blamed on the client.

Results are cached in ``~/.cache/crossover/floor.json`` (``crossover calibrate``) and
looked up by ``crossover run --client-floor auto``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field, ValidationError

from crossover.errors import UsageError, validation_line
from crossover.files import write_atomic
from crossover.metrics.summary import ClientFloor
from crossover.transport import TransportName

FLOOR_SCHEMA = "crossover.floor/1"
#: the probe's sleep: short enough to see stalls, long enough to cost nothing
PROBE_INTERVAL_S = 0.005


def default_cache_path() -> Path:
    """``$CROSSOVER_FLOOR``, else ``$CROSSOVER_CACHE/floor.json``, else
    ``~/.cache/crossover/floor.json`` (not created)."""
    from crossover.builds.cache import CACHE_ENV

    explicit = os.environ.get("CROSSOVER_FLOOR")
    if explicit:
        return Path(explicit).expanduser()
    raw = os.environ.get(CACHE_ENV)
    root = Path(raw).expanduser() if raw else Path.home() / ".cache" / "crossover"
    return root / "floor.json"


class Percentiles(BaseModel):
    p50: float | None = None
    p99: float | None = None
    max: float | None = None
    count: int = 0


def percentiles(values: Any) -> Percentiles:
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return Percentiles()
    p50, p99 = np.percentile(arr, [50, 99])
    return Percentiles(p50=float(p50), p99=float(p99), max=float(arr.max()), count=int(arr.size))


class ServerLag(BaseModel):
    """The calibration server's own lag behind its schedule (``/calibration/truth``)."""

    mean_ms: float | None = None
    p99_upper_ms: float | None = None
    max_ms: float | None = None
    emitted_gap_p50_ms: float | None = None
    configured_gap_p50_ms: float | None = None


class FloorResult(BaseModel):
    """One level of the client floor; milliseconds unless named otherwise."""

    concurrency: int
    itl_ms: float
    output_tokens: int
    tokens_per_chunk: int = 1
    requests: int
    succeeded: int
    measured_at: str
    wall_s: float
    delivery_ms: Percentiles
    send_lag_ms: Percentiles
    loop_lag_ms: Percentiles
    client_cpu_s: float
    tokens: int
    tokens_per_s: float
    #: tokens streamed per second of client CPU: the client's speed per core
    tokens_per_cpu_s: float | None
    tpot_p50_ms: float | None = None
    itl_p50_ms: float | None = None
    tpot_error_pct: float | None = Field(
        None, description="measured TPOT p50 against the server's emitted gap p50"
    )
    itl_error_pct: float | None = None
    server: ServerLag = Field(default_factory=ServerLag)
    #: the client measured (``--transport``); floors cached before it was recorded: aiohttp
    transport: TransportName = "aiohttp"

    def client_floor(self, source: str | None = None) -> ClientFloor:
        return ClientFloor(
            delivery_p50_ms=self.delivery_ms.p50,
            delivery_p99_ms=self.delivery_ms.p99,
            source=source
            or f"crossover calibrate: concurrency {self.concurrency}, {self.itl_ms:g} ms/token, "
            f"{self.transport}, {self.measured_at}",
        )


class FloorCache(BaseModel):
    schema_: str = Field(FLOOR_SCHEMA, alias="schema")
    measurements: list[FloorResult] = Field(default_factory=list)

    model_config = {"populate_by_name": True}


# --- measurement ---------------------------------------------------------------


def _get_json(url: str, method: str = "GET") -> dict[str, Any]:
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)  # noqa: S310
    with urllib.request.urlopen(req, timeout=30) as r:  # noqa: S310
        data: dict[str, Any] = json.loads(r.read())
        return data


def server_lag(truth: dict[str, Any]) -> ServerLag:
    lag = truth.get("later_chunk_lag_ms") or truth.get("emission_lag_ms") or {}
    reqs = [r for r in truth.get("requests", []) if r.get("stream")]
    emitted = [r["emitted_gap_ms"] for r in reqs if r.get("emitted_gap_ms") is not None]
    configured = [r["configured_gap_ms"] for r in reqs if r.get("configured_gap_ms") is not None]
    return ServerLag(
        mean_ms=lag.get("mean"),
        p99_upper_ms=lag.get("p99_upper"),
        max_ms=lag.get("max"),
        emitted_gap_p50_ms=float(np.median(emitted)) if emitted else None,
        configured_gap_p50_ms=float(np.median(configured)) if configured else None,
    )


async def measure_floor_at(
    url: str,
    concurrency: int,
    output_tokens: int,
    *,
    itl_ms: float,
    tokens_per_chunk: int = 1,
    requests: int | None = None,
    model: str = "calibration",
    transport: TransportName = "aiohttp",
) -> FloorResult:
    """Measure at ``url`` (a calibration server already configured for ``itl_ms``) with
    the client of ``transport``."""
    from crossover.dialects import RequestSpec, VLLMDialect
    from crossover.metrics import requests as rq
    from crossover.records.model import RequestRecord
    from crossover.transport.client import StreamOptions, make_client
    from crossover.transport.http import Timeouts

    n = requests if requests is not None else concurrency
    dialect = VLLMDialect()  # the calibration server's API: vLLM's fields
    spec = RequestSpec(model, "one two three four five six seven eight", output_tokens)
    body = dialect.body(spec)
    target = url + dialect.path(spec)
    timeouts = Timeouts(first_token_s=120.0, gap_s=60.0, total_s=3600.0)
    options = StreamOptions(dialect, "completions", timeouts)
    records: list[RequestRecord] = []
    send_lags: list[float] = []
    loop_lags: list[float] = []
    counter = iter(range(n))
    stop = asyncio.Event()

    async def probe() -> None:
        perf = time.perf_counter_ns
        while not stop.is_set():
            t0 = perf()
            await asyncio.sleep(PROBE_INTERVAL_S)
            loop_lags.append((perf() - t0) / 1e6 - PROBE_INTERVAL_S * 1e3)

    with contextlib.suppress(Exception):
        _get_json(url + "/calibration/reset", "POST")
    async with make_client(transport, None, timeouts) as session:

        async def stream_worker(start_ns: int) -> None:
            intended = start_ns
            for i in counter:
                rec = RequestRecord(index=i, expected_output_tokens=output_tokens, t_send_ns=0)
                await session.stream(target, body, rec, options)
                send_lags.append((rec.t_send_ns - intended) / 1e6)
                records.append(rec)
                intended = rec.t_done_ns or time.perf_counter_ns()

        probe_task = asyncio.ensure_future(probe())
        cpu0 = time.process_time()
        t0 = time.perf_counter_ns()
        await asyncio.gather(*(stream_worker(t0) for _ in range(min(concurrency, n))))
        wall_s = (time.perf_counter_ns() - t0) / 1e9
        cpu_s = time.process_time() - cpu0
        stop.set()
        await probe_task

    truth: dict[str, Any] = {}
    with contextlib.suppress(Exception):
        truth = await asyncio.to_thread(_get_json, url + "/calibration/truth")
    delivery = [
        (a - e) / 1e6
        for r in records
        if r.chunk_emitted_ns
        for a, e in zip(r.chunk_arrival_ns, r.chunk_emitted_ns, strict=False)
    ]
    ok = [r for r in records if r.ok]
    tokens = sum(r.completion_tokens or len(r.chunk_arrival_ns) for r in ok)
    tpots = [v for v in (rq.tpot_ms(r) for r in ok) if v is not None]
    itls = [v for r in ok for v in rq.itl_ms(r)]
    srv = server_lag(truth) if truth else ServerLag()
    tpot_p50 = float(np.median(tpots)) if tpots else None
    itl_p50 = float(np.median(itls)) if itls else None
    truth_gap = srv.emitted_gap_p50_ms or itl_ms

    def err(x: float | None) -> float | None:
        return None if x is None or not truth_gap else abs(x - truth_gap) / truth_gap * 100

    return FloorResult(
        concurrency=concurrency,
        itl_ms=itl_ms,
        output_tokens=output_tokens,
        tokens_per_chunk=tokens_per_chunk,
        requests=len(records),
        succeeded=len(ok),
        measured_at=datetime.now(UTC).isoformat(timespec="seconds"),
        wall_s=wall_s,
        delivery_ms=percentiles(delivery),
        send_lag_ms=percentiles(send_lags),
        loop_lag_ms=percentiles(loop_lags),
        client_cpu_s=cpu_s,
        tokens=tokens,
        tokens_per_s=tokens / wall_s if wall_s > 0 else 0.0,
        tokens_per_cpu_s=tokens / cpu_s if cpu_s > 0 else None,
        tpot_p50_ms=tpot_p50,
        itl_p50_ms=itl_p50,
        tpot_error_pct=err(tpot_p50),
        itl_error_pct=err(itl_p50),
        server=srv,
        transport=transport,
    )


def server_cpu() -> int | None:
    """The core the calibration server is pinned to: the last one, when there are two+."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    return cpus[-1] if len(cpus) >= 2 else None


@contextlib.contextmanager
def client_affinity(exclude: int | None) -> Iterator[None]:
    """Keep this process off the server's core while measuring; restore afterwards."""
    if exclude is None:
        yield
        return
    before = os.sched_getaffinity(0)
    rest = before - {exclude}
    if rest:
        os.sched_setaffinity(0, rest)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def _run(coro: Any) -> Any:
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        return asyncio.run(coro)
    return uvloop.run(coro)


def measure_floor(
    concurrency: int,
    itl_ms: float = 20.0,
    output_tokens: int = 256,
    *,
    tokens_per_chunk: int = 1,
    requests: int | None = None,
    ttft_ms: float = 5.0,
    url: str | None = None,
    pin: bool = True,
    transport: TransportName = "aiohttp",
) -> FloorResult:
    """One level. Without ``url`` the calibration server is spawned in its own process,
    pinned to a core of its own when the machine has two or more."""
    results = measure_floors(
        [concurrency],
        itl_ms,
        output_tokens,
        tokens_per_chunk=tokens_per_chunk,
        requests=requests,
        ttft_ms=ttft_ms,
        url=url,
        pin=pin,
        transport=transport,
    )
    return results[0]


def measure_floors(
    levels: list[int],
    itl_ms: float = 20.0,
    output_tokens: int = 256,
    *,
    tokens_per_chunk: int = 1,
    requests: int | None = None,
    ttft_ms: float = 5.0,
    url: str | None = None,
    pin: bool = True,
    transport: TransportName = "aiohttp",
) -> list[FloorResult]:
    """Several levels against one server (spawned once unless ``url`` is given)."""
    from crossover.calibration.server import CalibrationConfig, spawn

    async def all_levels(base: str) -> list[FloorResult]:
        return [
            await measure_floor_at(
                base,
                c,
                output_tokens,
                itl_ms=itl_ms,
                tokens_per_chunk=tokens_per_chunk,
                requests=requests,
                transport=transport,
            )
            for c in levels
        ]

    if url is not None:
        out: list[FloorResult] = _run(all_levels(url))
        return out
    cfg = CalibrationConfig(
        ttft_ms=ttft_ms,
        itl_ms=itl_ms,
        tokens_per_chunk=tokens_per_chunk,
        default_max_tokens=output_tokens,
        truth_max_requests=max(10_000, 2 * max(levels)),
    )
    cpu = server_cpu() if pin else None
    with spawn(cfg, cpu=cpu) as base, client_affinity(cpu):
        out = _run(all_levels(base))
    return out


# --- cache -----------------------------------------------------------------------


def load_cache(path: Path | None = None) -> FloorCache:
    path = path or default_cache_path()
    if not path.is_file():
        return FloorCache()
    try:
        return FloorCache.model_validate_json(path.read_bytes())
    except ValidationError as exc:
        why = validation_line(exc, limit=1)
        raise UsageError(f"{path}: not a crossover floor file ({why})") from None
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"{path}: not a crossover floor file ({str(exc).splitlines()[0]})"
        ) from None


def save_results(results: list[FloorResult], path: Path | None = None) -> Path:
    """Merge into the cache: a new measurement replaces the one at the same level."""
    path = path or default_cache_path()
    cache = load_cache(path) if path.is_file() else FloorCache()

    def key(m: FloorResult) -> tuple[int, float, int, int, str]:
        return (m.concurrency, m.itl_ms, m.output_tokens, m.tokens_per_chunk, m.transport)

    keys = {key(r) for r in results}
    kept = [m for m in cache.measurements if key(m) not in keys]
    cache.measurements = sorted(kept + results, key=lambda m: (m.concurrency, m.itl_ms))
    write_atomic(path, cache.model_dump_json(by_alias=True, indent=2))
    return path


def lookup(
    cache: FloorCache, concurrency: int | None, transport: TransportName = "aiohttp"
) -> FloorResult | None:
    """The measurement at the nearest concurrency (ties: the higher, the more cautious);
    among several at that level, the newest. ``None`` concurrency: the highest level.
    Only ``transport``'s measurements where it has any; otherwise the others' (a lean
    run then compares with aiohttp's floor, the higher one: the cautious side)."""
    ms = [m for m in cache.measurements if m.delivery_ms.p50 is not None]
    if not ms:
        return None
    ms = [m for m in ms if m.transport == transport] or ms
    if concurrency is None:
        top = max(m.concurrency for m in ms)
        return max((m for m in ms if m.concurrency == top), key=lambda m: m.measured_at)
    best = min(ms, key=lambda m: (abs(m.concurrency - concurrency), -m.concurrency))
    same = [m for m in ms if m.concurrency == best.concurrency]
    return max(same, key=lambda m: m.measured_at)


def resolve_client_floor(
    choice: str,
    concurrency: int | None,
    path: Path | None = None,
    transport: TransportName = "aiohttp",
) -> tuple[ClientFloor | None, str]:
    """``auto`` (the cache), ``off``, or a floor JSON file; returns the floor and a note."""
    if choice == "off":
        return None, "client floor: off"
    if choice == "auto":
        src = path or default_cache_path()
        if not src.is_file():
            return None, (
                f"client floor: none cached in {src}; run `crossover calibrate` to measure it"
            )
    else:
        src = Path(choice)
        if not src.is_file():
            what = "a folder, not a file" if src.is_dir() else "no such file"
            raise UsageError(f"--client-floor {choice}: {what}")
    try:
        cache = load_cache(src)
    except UsageError as exc:
        if choice != "auto":
            raise
        return None, f"client floor: ignored, {exc}"
    m = lookup(cache, concurrency, transport)
    if m is None:
        return None, f"client floor: {src} holds no measurement"
    note = (
        f"client floor: delivery p50 {m.delivery_ms.p50:.3f} ms at concurrency "
        f"{m.concurrency}, {m.transport} ({src})"
    )
    return m.client_floor(
        f"{src}: concurrency {m.concurrency}, {m.transport}, {m.measured_at}"
    ), note
