"""Several client processes for one run, when one event loop cannot keep up.

Each worker process runs its share of the load with its own uvloop and aiohttp
session; how the load is split among them (streams, rate, sessions, a trace's entries)
is ``crossover.load.shares``, and how many workers ``auto`` gives is
``crossover.load.sizing``.

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
import multiprocessing as mp
import queue as queue_mod
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

# the split and the sizing live beside this module; their names stay importable from here
from crossover.load.shares import Share, plan_shares, shares_of
from crossover.load.sizing import LAG_BUDGET_MS, STREAMS_PER_WORKER, auto_workers
from crossover.records.model import RequestRecord
from crossover.workload import Prompt

__all__ = [
    "LAG_BUDGET_MS",
    "STREAMS_PER_WORKER",
    "LoadHooks",
    "Share",
    "WorkerError",
    "WorkerJob",
    "WorkerLink",
    "WorkerMessages",
    "auto_workers",
    "plan_shares",
    "run_workers",
    "shares_of",
]

if TYPE_CHECKING:
    from crossover.load.loop import LevelLoad

#: how often a worker looks at the parent's stop flag
_STOP_POLL_S = 0.1
#: the workers' shared start is this far after the parent says go (ns)
START_LEAD_NS = 50_000_000


# --- the worker process --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WorkerJob:
    """What one worker runs, sent to its process (or Ray actor) whole: the run's config
    (as JSON, a worker on another node reaches the engine at its own URL), its share, and
    the level's measured prompts count, headers and ``keep_text``; the prompts go beside
    it (a Ray actor gets them as plain rows)."""

    config_json: bytes
    share: Share
    n_measured: int
    headers: dict[str, str]
    keep_text: bool


@dataclass(frozen=True, slots=True)
class WorkerLink:
    """How a worker and its parent talk: ``out`` takes the worker's messages
    (``put((kind, worker, payload))``), the parent sets ``go`` and ``stop``
    (``is_set()``), and puts the measured load's start time in ``start`` (``.value``, a
    ``perf_counter_ns`` reading shared by the workers of one machine) before it says go;
    ``start`` None: each worker starts its open loop when it hears go."""

    out: Any
    go: Any
    stop: Any
    start: Any = None


def _worker_main(job: WorkerJob, prompts: list[Prompt], link: WorkerLink) -> None:
    """Entry point of one worker process (spawned: no inherited event loop)."""
    worker = job.share.worker
    try:
        work = _worker(job, prompts, link)
        try:
            import uvloop
        except ImportError:  # pragma: no cover - uvloop is a core dependency on Linux
            asyncio.run(work)
        else:
            uvloop.run(work)
        link.out.put(("done", worker, None))
    except BaseException:  # report anything, including KeyboardInterrupt, to the parent
        link.out.put(("error", worker, traceback.format_exc(limit=8)))


async def _worker(job: WorkerJob, prompts: list[Prompt], link: WorkerLink) -> None:
    """One worker's share, through the load loop every executor runs (``run_share``)."""
    from crossover.load.loop import LevelLoad, run_share
    from crossover.load.send import PromptSender, stream_options
    from crossover.spec.run import RunConfig
    from crossover.transport.client import make_client

    config = RunConfig.model_validate_json(job.config_json)
    load = LevelLoad(config, prompts, job.n_measured, job.headers, job.keep_text)
    share, out, n_measured = job.share, link.out, job.n_measured
    options = stream_options(config, job.keep_text)
    n_prompts = len(prompts)
    abort = asyncio.Event()
    loop = asyncio.get_running_loop()

    async def watch_stop() -> None:
        # polled: a thread blocked on stop.wait() would hold up the loop's shutdown
        while not link.stop.is_set():  # noqa: ASYNC110
            await asyncio.sleep(_STOP_POLL_S)
        abort.set()

    async def ready() -> int | None:
        out.put(("ready", share.worker, None))
        while not link.go.is_set() and not abort.is_set():  # noqa: ASYNC110
            await asyncio.sleep(0.002)
        start = link.start
        return (start.value or None) if start is not None else None

    watcher = loop.create_task(watch_stop())

    async with make_client(config.transport, job.headers, options.limits) as transport:
        sender = PromptSender(
            transport,
            config,
            options,
            worker=share.worker,
            on_cancel=lambda r: out.put(("record", share.worker, r.to_json())),
            cancel_reason=lambda: "the run was aborted",
        )

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
            rec = await sender.send(p, i, warmup, t_sched, replica, reused)
            out.put(("record", share.worker, rec.to_json()))
            return rec

        try:
            lags = await run_share(transport, load, share, send, abort, ready)
            if lags is not None:
                out.put(("lag", share.worker, lags))
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher


# --- the parent ------------------------------------------------------------------------


class WorkerError(RuntimeError):
    """A worker process failed; carries its traceback."""


@dataclass(frozen=True, slots=True)
class LoadHooks:
    """What the executor of a level's load reports to: every record (``on_record``), the
    start of the measured load (``on_measure_start``) and the event loops' lag readings
    (``lags``, ms, pooled); ``abort`` stops the load."""

    on_record: Callable[[RequestRecord], None]
    abort: asyncio.Event
    on_measure_start: Callable[[], None] | None = None
    lags: list[float] | None = None


class WorkerMessages:
    """What the workers of one load say (``record``, ``lag``, ``ready``, ``error``,
    ``done``), however they say it (worker processes here, Ray actors in
    ``crossover.load.rayworkers``): records renumbered in arrival order (measured and
    warm-up apart), lags pooled, ``go`` called once every worker is ready and ``stop``
    on a worker's error."""

    def __init__(
        self, workers: int, hooks: LoadHooks, go: Callable[[], None], stop: Callable[[], None]
    ) -> None:
        self.workers = workers
        self.on_record = hooks.on_record
        self.lags = hooks.lags
        self.on_measure_start = hooks.on_measure_start
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


async def run_workers(load: LevelLoad, hooks: LoadHooks) -> None:
    """Run ``load`` (its config with ``workers > 1``) over worker processes.

    ``hooks.on_record`` gets every record, renumbered: measured records 0, 1, ... and
    warm-up records 0, 1, ... in the order they arrive here; ``record.worker`` says whose
    it was. ``hooks.lags`` gets every worker's event-loop lag readings (ms), pooled.
    """
    config, abort = load.config, hooks.abort
    shares = shares_of(config)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    go = ctx.Event()
    stop = ctx.Event()
    start = ctx.Value("q", 0, lock=False)
    cfg_json = config.model_dump_json().encode()
    link = WorkerLink(out, go, stop, start)

    def job(s: Share) -> WorkerJob:
        return WorkerJob(cfg_json, s, load.n_measured, load.headers, load.keep_text)

    procs = [
        ctx.Process(
            target=_worker_main,
            args=(job(s), load.prompts, link),
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

    said = WorkerMessages(len(procs), hooks, go_all, stop.set)

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
