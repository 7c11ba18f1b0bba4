"""The one load loop of a level, whoever runs it: warm-up, connections, measured load.

The in-process load (``crossover.measure``), each worker process
(``crossover.load.workers``) and each Ray actor (``crossover.load.rayworkers``, which
runs the worker's code) call ``run_share`` with what differs between them: their
``Share`` of the load (``crossover.load.shares.plan_shares``; the whole of it
in-process: ``whole_share``), how a request is sent and where its record goes
(``send``), and what happens between the warm-up and the measured load (``start``:
in-process, the progress clock starts; a worker says it is ready and waits for the
parent's go).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from crossover import defaults
from crossover.load.looplag import probe_interval_s
from crossover.load.send import open_replica_connections
from crossover.load.shares import Share
from crossover.load.strategies import SendFn, closed_loop, measured_load
from crossover.transport.client import Transport
from crossover.workload import Prompt

if TYPE_CHECKING:
    from crossover.spec.run import RunConfig


@dataclass(frozen=True, slots=True)
class LevelLoad:
    """One level's load as every executor takes it, built once by ``crossover.measure``."""

    config: RunConfig
    #: the measured prompts first, then the warm-up's
    prompts: list[Prompt]
    n_measured: int
    #: the request headers (the API key's)
    headers: dict[str, str]
    #: keep each request's streamed text (for the text witness)
    keep_text: bool


def whole_share(config: RunConfig) -> Share:
    """The whole level as the share of one loop (``workers == 1``): the run's own seed,
    its streams in a closed loop, none in an open one."""
    concurrency = config.concurrency if config.mode == "concurrency" else None
    return Share(
        worker=0,
        concurrency=concurrency,
        rate_rps=config.rate_rps,
        max_in_flight=config.max_in_flight,
        requests=config.requests,
        duration_s=config.duration_s,
        warmup=config.warmup,
        warmup_concurrency=defaults.warmup_concurrency(config.concurrency, config.warmup),
        prompt_offset=0,
        warmup_offset=0,
        seed=config.arrivals_seed,
        probe_interval_s=probe_interval_s(concurrency),
    )


async def run_share(
    transport: Transport,
    load: LevelLoad,
    share: Share,
    send: SendFn,
    abort: asyncio.Event,
    start: Callable[[], Awaitable[int | None]],
    drain: asyncio.Event | None = None,
) -> list[float] | None:
    """Run ``share`` of ``load`` through ``send``: its warm-up (a closed loop), then, for a
    closed loop, its streams' connections opened on ``transport``, then ``start()`` (the
    time the measured load starts at, a ``perf_counter_ns`` reading shared by the workers
    of a split schedule; None: now), then the measured load. Returns the event loop's
    lag readings (ms) during it; None where ``abort`` was set before it began.
    ``drain``: a closed loop sends nothing more once it is set."""
    config = load.config
    if share.warmup:
        await closed_loop(send, share.warmup_concurrency, share.warmup, None, abort, warmup=True)
    if share.concurrency is not None and not abort.is_set():
        await open_replica_connections(transport, config, share.concurrency)
    start_ns = await start()
    if abort.is_set():
        return None
    return await measured_load(
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
        # a sweep level's prompts are its slice of the trace's: line id, at its time
        offsets_from=load.prompts[0].id if load.prompts else 0,
        sessions=(config.sessions.turns, config.sessions.think_s) if config.sessions else None,
        part=share.part or (0, 1),
        start_ns=start_ns,
        drain=drain,
    )
