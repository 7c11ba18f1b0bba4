"""Several client processes for one run, when one event loop cannot keep up.

Each worker process runs its share of the load with its own uvloop and aiohttp
session: a closed loop gets ``C`` streams split as evenly as possible (and the
measured requests in proportion), an open loop gets ``rate / W`` with its own seed
(independent Poisson processes add up to one Poisson process at the full rate).

Sessions and traces are split by index instead, so the work is the one a single process
would send: sessions in a closed loop go to the workers in whole blocks of sessions (in
proportion to their streams), each session wholly in one worker so its turns stay in
order; an open loop of sessions or a trace is one schedule (the run's seed, the trace's
times) that every worker computes, worker ``k`` of ``W`` sending its entries ``k``,
``k + W``, ... against a start time the parent gives them all.

Workers send finished records back over a ``multiprocessing`` queue as they
complete; the parent numbers them in arrival order (measured and warm-up apart),
writes them to the run's store and feeds the progress display.

Warm-up: every worker runs its share of it, says so, and waits; the measured load
starts in all workers together when the parent says go.

Timestamps: ``time.perf_counter_ns()`` is CLOCK_MONOTONIC on Linux, one clock for
every process of the machine, so the workers' records are comparable with each other
and with the parent's (and with the calibration server's emission stamps).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import multiprocessing as mp
import queue as queue_mod
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.synchronize import Event as MpEvent
from typing import TYPE_CHECKING, Any

import orjson

from crossover import defaults
from crossover.load.looplag import probe_interval_s as lag_probe_interval
from crossover.records.model import RequestRecord
from crossover.workload import Prompt

if TYPE_CHECKING:
    from crossover.config import RunConfig

#: streams one event loop carries under ``--workers auto``: at 256 streams one loop's
#: p99 lag passed 1 ms on the calibration server (docs/results/client_overhead.md)
STREAMS_PER_WORKER = 128
#: the loop lag (ms, p99) a worker may start with before it is given fewer streams
LAG_BUDGET_MS = 1.0


def auto_workers(streams: int | None, cores: int, lag_ms: float | None = None) -> int:
    """``--workers auto``: client processes for ``streams`` concurrent streams.

    One per ``STREAMS_PER_WORKER`` streams; where a loop is already ``lag_ms`` late
    (p99: ``idle_lag_ms`` before a run, or a previous level's ``client_loop``) past
    ``LAG_BUDGET_MS``, each carries fewer streams in proportion (a loop 2 ms late gets
    half as many), since every chunk it reads is stamped that late. Never more than
    ``cores``, never fewer than 1; a load with no stream count (an open loop, a trace:
    ``streams`` None) runs from one process.
    """
    if streams is None or streams < 1:
        return 1
    per_worker = float(STREAMS_PER_WORKER)
    if lag_ms is not None and lag_ms > LAG_BUDGET_MS:
        per_worker *= LAG_BUDGET_MS / lag_ms
    want = -(-streams // max(1, int(per_worker)))  # ceil
    return max(1, min(want, cores))


#: how often a worker looks at the parent's stop flag
_STOP_POLL_S = 0.1
#: the workers' shared start is this far after the parent says go (ns)
START_LEAD_NS = 50_000_000


@dataclass(frozen=True, slots=True)
class Share:
    """One worker's part of the load."""

    worker: int
    concurrency: int | None
    rate_rps: float | None
    max_in_flight: int | None
    requests: int | None
    duration_s: float | None
    warmup: int
    warmup_concurrency: int
    prompt_offset: int
    warmup_offset: int
    seed: int
    #: the loop-lag probe's sleep, from the whole run's concurrency (looplag.probe_interval_s)
    probe_interval_s: float
    #: ``(k, W)``: this worker sends entries k, k + W, ... of the whole run's schedule (a
    #: trace, or an open loop of sessions); ``rate_rps``, ``requests`` and ``seed`` are then
    #: the whole run's, its indices are the run's own and ``prompt_offset`` is 0
    part: tuple[int, int] | None = None


def _split(total: int, parts: int) -> list[int]:
    """``total`` as ``parts`` integers differing by at most one, larger first."""
    base, extra = divmod(total, parts)
    return [base + (1 if k < extra else 0) for k in range(parts)]


def _weighted(total: int, weights: list[int]) -> list[int]:
    """``total`` split in proportion to ``weights`` (largest remainders), summing exactly."""
    w = sum(weights)
    raw = [total * x / w for x in weights]
    out = [int(r) for r in raw]
    for k in sorted(range(len(raw)), key=lambda k: raw[k] - out[k], reverse=True)[
        : total - sum(out)
    ]:
        out[k] += 1
    return out


def plan_shares(
    *,
    workers: int,
    concurrency: int | None,
    rate_rps: float | None,
    max_in_flight: int | None,
    requests: int | None,
    duration_s: float | None,
    warmup: int,
    seed: int,
    turns: int | None = None,
    trace: bool = False,
) -> list[Share]:
    """Split one run's load over ``workers`` processes (fewer when there is less to split).

    ``turns``: the requests are sessions of that many turns, split in whole sessions;
    ``trace``: the open loop replays a trace, split by line (``part``)."""
    by_part = concurrency is None and (turns is not None or trace)
    reqs: list[int | None]
    if concurrency is not None and turns is not None:
        assert requests is not None  # sessions count requests
        n_sessions = -(-requests // turns)
        w = max(1, min(workers, concurrency, n_sessions))
        conc = _split(concurrency, w)
        # whole sessions, in proportion to the streams; the last one may be cut short
        ends = list(itertools.accumulate(_weighted(n_sessions, conc)))
        reqs = [
            min(e * turns, requests) - min(b * turns, requests)
            for b, e in zip([0, *ends[:-1]], ends, strict=True)
        ]
    elif concurrency is not None:
        w = max(1, min(workers, concurrency))
        conc = _split(concurrency, w)
        reqs = list(_weighted(requests, conc)) if requests is not None else [None] * w
    elif by_part:
        units = None if requests is None else -(-requests // (turns or 1))
        w = max(1, workers if units is None else min(workers, units))
        conc = [0] * w
        reqs = [requests] * w  # each worker walks the whole schedule, sending its part
    else:
        assert rate_rps is not None
        w = max(1, workers if requests is None else min(workers, requests))
        conc = [0] * w
        reqs = list(_split(requests, w)) if requests is not None else [None] * w
    warm = _split(warmup, w)
    caps: list[int | None] = (
        list(_split(max_in_flight, w)) if max_in_flight is not None else [None] * w
    )
    shares = []
    offset = warm_offset = 0
    for k in range(w):
        c = conc[k] or None
        shares.append(
            Share(
                worker=k,
                concurrency=c,
                rate_rps=None if rate_rps is None else rate_rps / (1 if by_part else w),
                max_in_flight=None if (cap := caps[k]) is None else max(1, cap),
                requests=reqs[k],
                duration_s=duration_s,
                warmup=warm[k],
                warmup_concurrency=defaults.warmup_concurrency(c, warm[k]),
                prompt_offset=0 if by_part else offset,
                warmup_offset=warm_offset,
                # a shared schedule needs the run's own seed; independent ones their own
                seed=seed if by_part else seed * 1009 + k,
                probe_interval_s=lag_probe_interval(concurrency),
                part=(k, w) if by_part else None,
            )
        )
        offset += reqs[k] or 0
        warm_offset += warm[k]
    return shares


# --- the worker process --------------------------------------------------------------


def _worker_main(
    config_json: bytes,
    share: Share,
    prompts: list[Prompt],
    n_measured: int,
    headers: dict[str, str],
    keep_text: bool,
    out: Any,
    go: MpEvent,
    stop: MpEvent,
    start: Any,
) -> None:
    """Entry point of one worker process (spawned: no inherited event loop)."""
    try:
        work = _worker(
            config_json, share, prompts, n_measured, headers, keep_text, out, go, stop, start
        )
        try:
            import uvloop
        except ImportError:  # pragma: no cover - uvloop is a core dependency on Linux
            asyncio.run(work)
        else:
            uvloop.run(work)
        out.put(("done", share.worker, None))
    except BaseException:  # report anything, including KeyboardInterrupt, to the parent
        out.put(("error", share.worker, traceback.format_exc(limit=8)))


async def _worker(
    config_json: bytes,
    share: Share,
    prompts: list[Prompt],
    n_measured: int,
    headers: dict[str, str],
    keep_text: bool,
    out: Any,
    go: MpEvent,
    stop: MpEvent,
    start: Any = None,
) -> None:
    """One worker's share. ``start``: where the parent puts the measured load's start time
    before it says go (``.value``, a ``perf_counter_ns`` reading shared by the workers of
    one machine); None: each worker starts its open loop when it hears go."""
    from crossover.config import RunConfig
    from crossover.engines.registry import dialect as get_dialect
    from crossover.load.send import open_replica_connections, send_prompt
    from crossover.load.strategies import closed_loop, measured_load
    from crossover.transport.client import make_client
    from crossover.transport.http import Timeouts

    config = RunConfig.model_validate_json(config_json)
    dialect = get_dialect(config.dialect)
    timeouts = Timeouts(**config.timeouts.model_dump())
    n_prompts = len(prompts)
    abort = asyncio.Event()
    loop = asyncio.get_running_loop()

    async def watch_stop() -> None:
        # polled: a thread blocked on stop.wait() would hold up the loop's shutdown
        while not stop.is_set():  # noqa: ASYNC110
            await asyncio.sleep(_STOP_POLL_S)
        abort.set()

    watcher = loop.create_task(watch_stop())

    async with make_client(config.transport, headers, timeouts) as session:

        async def send(i: int, t_sched: int | None, warmup: bool) -> RequestRecord:
            reused = False
            if warmup:
                p = prompts[(n_measured + share.warmup_offset + i) % n_prompts]
                replica = config.replica_for(share.warmup_offset + i)
            else:
                # past the measured prompts a prompt is sent again: marked on its record
                reused = share.prompt_offset + i >= n_measured
                p = prompts[(share.prompt_offset + i) % n_prompts]
                # the run's request index, so the replicas share the load evenly
                replica = config.replica_for(share.prompt_offset + i)
            rec = await send_prompt(
                session,
                config,
                dialect,
                p,
                index=i,
                warmup=warmup,
                t_scheduled_ns=t_sched,
                timeouts=timeouts,
                keep_text=keep_text,
                worker=share.worker,
                replica=replica,
                on_cancel=lambda r: out.put(("record", share.worker, r.to_json())),
                cancel_reason=lambda: "the run was aborted",
                reused=reused,
            )
            out.put(("record", share.worker, rec.to_json()))
            return rec

        try:
            if share.warmup:
                await closed_loop(
                    send, share.warmup_concurrency, share.warmup, None, abort, warmup=True
                )
            if share.concurrency is not None:
                await open_replica_connections(session, config, share.concurrency)
            out.put(("ready", share.worker, None))
            while not go.is_set() and not abort.is_set():  # noqa: ASYNC110
                await asyncio.sleep(0.002)
            if abort.is_set():
                return
            lags = await measured_load(
                send,
                concurrency=share.concurrency,
                rate_rps=share.rate_rps,
                requests=share.requests,
                duration_s=share.duration_s,
                abort=abort,
                seed=share.seed,
                max_in_flight=share.max_in_flight,
                probe_interval_s=share.probe_interval_s,
                offsets_ns=config.trace_offsets_ns(),
                offsets_from=prompts[0].id if prompts else 0,
                sessions=(
                    (config.sessions.turns, config.sessions.think_s) if config.sessions else None
                ),
                part=share.part or (0, 1),
                start_ns=(start.value or None) if start is not None else None,
            )
            out.put(("lag", share.worker, lags))
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher


# --- the parent ------------------------------------------------------------------------


def shares_of(config: RunConfig) -> list[Share]:
    """``plan_shares`` for a run's config (``config.workers`` of its load)."""
    return plan_shares(
        workers=config.workers,
        concurrency=config.concurrency,
        rate_rps=config.rate_rps,
        max_in_flight=config.max_in_flight,
        requests=config.requests,
        duration_s=config.duration_s,
        warmup=config.warmup,
        seed=config.arrivals_seed,
        turns=config.sessions.turns if config.sessions else None,
        trace=config.trace is not None,
    )


class WorkerError(RuntimeError):
    """A worker process failed; carries its traceback."""


class WorkerMessages:
    """What the workers of one load say (``record``, ``lag``, ``ready``, ``error``,
    ``done``), however they say it (worker processes here, Ray actors in
    ``crossover.load.rayworkers``): records renumbered in arrival order (measured and
    warm-up apart), lags pooled, ``go`` called once every worker is ready and ``stop``
    on a worker's error."""

    def __init__(
        self,
        workers: int,
        on_record: Callable[[RequestRecord], None],
        lags: list[float] | None,
        on_measure_start: Callable[[], None] | None,
        go: Callable[[], None],
        stop: Callable[[], None],
    ) -> None:
        self.workers = workers
        self.on_record = on_record
        self.lags = lags
        self.on_measure_start = on_measure_start
        self.go = go
        self.stop = stop
        self.next_index = {False: 0, True: 0}
        self.ready: set[int] = set()
        self.finished: set[int] = set()
        self.errors: list[str] = []

    @property
    def done(self) -> bool:
        return len(self.finished) >= self.workers

    def handle(self, kind: str, k: int, payload: Any, node: str | None = None) -> None:
        """One message of worker ``k`` (``node``: the Ray node it runs on)."""
        if kind == "record":
            rec = RequestRecord.model_validate(orjson.loads(payload))
            rec.index = self.next_index[rec.warmup]
            self.next_index[rec.warmup] += 1
            if node is not None:
                rec.node = node
            self.on_record(rec)
        elif kind == "lag":
            if self.lags is not None:
                self.lags.extend(payload)
        elif kind == "ready":
            self.ready.add(k)
            if len(self.ready) == self.workers:
                if self.on_measure_start is not None:
                    self.on_measure_start()
                self.go()
        elif kind == "error":
            self.errors.append(f"worker {k}: {payload}")
            self.finished.add(k)
            self.stop()
        else:
            self.finished.add(k)
            self.ready.add(k)

    def lost(self, k: int, why: str) -> None:
        """Worker ``k`` is gone without a word."""
        if k not in self.finished:
            self.errors.append(why)
            self.finished.add(k)


async def run_workers(
    config: RunConfig,
    prompts: list[Prompt],
    n_measured: int,
    headers: dict[str, str],
    keep_text: bool,
    on_record: Callable[[RequestRecord], None],
    abort: asyncio.Event,
    on_measure_start: Callable[[], None] | None = None,
    lags: list[float] | None = None,
) -> None:
    """Run ``config`` (a ``RunConfig`` with ``workers > 1``) over worker processes.

    ``on_record`` gets every record, renumbered: measured records 0, 1, ... and warm-up
    records 0, 1, ... in the order they arrive here; ``record.worker`` says whose it was.
    ``lags`` gets every worker's event-loop lag readings (ms), pooled.
    """
    shares = shares_of(config)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    go = ctx.Event()
    stop = ctx.Event()
    start = ctx.Value("q", 0, lock=False)
    cfg_json = config.model_dump_json().encode()
    procs = [
        ctx.Process(
            target=_worker_main,
            args=(cfg_json, s, prompts, n_measured, headers, keep_text, out, go, stop, start),
            name=f"crossover-worker-{s.worker}",
            daemon=True,
        )
        for s in shares
    ]
    for p in procs:
        p.start()
    loop = asyncio.get_running_loop()

    def go_all() -> None:
        # one start for every worker's open loop (CLOCK_MONOTONIC is the machine's): a
        # schedule split by index is then sent as one process would send it; the lead
        # covers the workers' noticing go (they look every 2 ms)
        start.value = time.perf_counter_ns() + START_LEAD_NS
        go.set()

    said = WorkerMessages(len(procs), on_record, lags, on_measure_start, go_all, stop.set)

    def get() -> tuple[str, int, Any] | None:
        try:
            item: tuple[str, int, Any] = out.get(timeout=0.1)
            return item
        except queue_mod.Empty:
            return None

    try:
        while not said.done:
            if abort.is_set():
                stop.set()
            item = await loop.run_in_executor(None, get)
            if item is None:
                dead = [
                    k for k, p in enumerate(procs) if not p.is_alive() and k not in said.finished
                ]
                if dead and out.empty():
                    # a worker that died without a word (killed): give up on it
                    for k in dead:
                        said.lost(k, f"worker {k} exited with status {procs[k].exitcode}")
                continue
            said.handle(*item)
    except asyncio.CancelledError:
        stop.set()
        raise
    finally:
        stop.set()
        go.set()
        for p in procs:
            await loop.run_in_executor(None, p.join, 5.0)
            if p.is_alive():
                p.terminate()
                p.join(2.0)
    if said.errors and not abort.is_set():
        raise WorkerError("; ".join(said.errors))
