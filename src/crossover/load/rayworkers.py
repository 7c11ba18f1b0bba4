"""Load workers as Ray actors spread over a cluster's nodes (``sweep --ray --workers N``).

The same split and the same worker as ``crossover.load.workers`` (``plan_shares``,
``_worker``, which runs the load loop of every executor, ``crossover.load.loop``), with
a Ray actor in place of each worker process: ``LoadWorker`` runs its share on its own
event loop (one thread living as long as the actor), queues its records, and the parent
(the target's actor, on the engine's node) takes them, numbers them in arrival order and
tags each with the node that sent it. Warm-up first in every
worker, then the measured load starts in all of them when the parent says go.

Timestamps stay per worker: a record's stamps are its node's ``perf_counter_ns``, and the
summary gives each node its own window (``crossover.metrics.run.by_clock``); nothing
compares times across hosts. A worker on another node than the engine reaches it at the
engine's node address (the engine must listen there: ``launch: {host: 0.0.0.0}``).
Ray is imported only when this runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import re
import threading
import traceback
from typing import TYPE_CHECKING, Any, TypeVar

from crossover.load.shares import shares_of
from crossover.load.workers import WorkerJob, WorkerLink, _worker
from crossover.workload import prompt_of_row, prompt_row

T = TypeVar("T")

if TYPE_CHECKING:
    from crossover.load.loop import LevelLoad
    from crossover.load.workers import LoadHooks

#: how long one ``take`` waits on a worker for records (s)
TAKE_WAIT_S = 0.1
_LOOPBACK = re.compile(r"^(https?://)(127\.0\.0\.1|localhost|\[::1\])(?=[:/]|$)")


def on_node(url: str, node_ip: str) -> str:
    """``url`` as a worker on another node reaches it: a loopback host becomes the
    engine's node address."""
    return _LOOPBACK.sub(lambda m: m.group(1) + node_ip, url)


def actor_loop(name: str) -> asyncio.AbstractEventLoop:
    """A new event loop (uvloop's) running forever on a ``lifelong_thread``, for a Ray
    actor whose plain methods hand it work: engines and loads started there die with the
    actor's process."""
    from crossover.engines.processes import lifelong_thread

    try:
        import uvloop

        loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    except ImportError:  # pragma: no cover - uvloop is a core dependency on Linux
        loop = asyncio.new_event_loop()
    lifelong_thread(loop.run_forever, name)
    return loop


def drain(outbox: queue.SimpleQueue[T], wait_s: float) -> list[T]:
    """Everything queued in ``outbox``, waiting up to ``wait_s`` for the first item (not
    at all when ``wait_s`` is 0)."""
    items: list[T] = []
    with contextlib.suppress(queue.Empty):
        items.append(outbox.get(timeout=wait_s) if wait_s > 0 else outbox.get_nowait())
        while True:
            items.append(outbox.get_nowait())
    return items


class LoadWorker:
    """One share of a level's load on some node (made a Ray actor by ``run_ray_workers``);
    plain methods only, so Ray runs it as a threaded actor and ``take`` answers while the
    load runs."""

    def __init__(self) -> None:
        import ray

        self.node_id: str = ray.get_runtime_context().get_node_id()
        self.node_ip: str = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
        self.outbox: queue.SimpleQueue[tuple[str, int, Any]] = queue.SimpleQueue()
        self.go_event = threading.Event()
        self.stop_event = threading.Event()
        self.loop = actor_loop("crossover-load-worker")

    def where(self) -> tuple[str, str]:
        return self.node_id, self.node_ip

    def start(self, job: WorkerJob, prompts: list[dict[str, Any]]) -> None:
        link = WorkerLink(self.outbox, self.go_event, self.stop_event)
        work = _worker(job, [prompt_of_row(p) for p in prompts], link)
        asyncio.run_coroutine_threadsafe(_report(work, job.share.worker, self.outbox), self.loop)

    def go(self) -> None:
        self.go_event.set()

    def stop(self) -> None:
        self.stop_event.set()

    def take(self, wait_s: float) -> list[tuple[str, int, Any]]:
        return drain(self.outbox, wait_s)


async def _report(work: Any, worker: int, out: queue.SimpleQueue[tuple[str, int, Any]]) -> None:
    """Run a share; say ``done`` or ``error`` (with the traceback) when it ends."""
    try:
        await work
        out.put(("done", worker, None))
    except BaseException:
        out.put(("error", worker, traceback.format_exc(limit=8)))


async def run_ray_workers(load: LevelLoad, hooks: LoadHooks) -> None:
    """``crossover.load.workers.run_workers`` with Ray actors, spread over the nodes
    (Ray's SPREAD strategy, one CPU each); every record says its ``worker`` and ``node``."""
    import ray

    from crossover.load.workers import WorkerError, WorkerMessages

    config, abort = load.config, hooks.abort
    shares = shares_of(config)
    here_ip: str = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
    cls: Any = ray.remote(LoadWorker).options(
        num_cpus=1, scheduling_strategy="SPREAD", max_concurrency=4, max_restarts=0
    )
    actors: list[Any] = [cls.remote() for _ in shares]

    async def call(ref: Any) -> Any:
        return await asyncio.wrap_future(ref.future())

    plain = [prompt_row(p) for p in load.prompts]

    def stop_all() -> None:
        for a in actors:
            a.stop.remote()

    def go_all() -> None:
        for a in actors:
            a.go.remote()

    said = WorkerMessages(len(actors), hooks, go_all, stop_all)
    try:
        where = await asyncio.gather(*(call(a.where.remote()) for a in actors))
        for a, s, (_, ip) in zip(actors, shares, where, strict=True):
            cfg = config
            if ip != here_ip:  # the engine is on this node: reach it at its address
                cfg = config.model_copy(
                    update={
                        "url": on_node(config.url, here_ip),
                        "urls": [on_node(u, here_ip) for u in config.urls],
                    }
                )
            job = WorkerJob(
                cfg.model_dump_json().encode(), s, load.n_measured, load.headers, load.keep_text
            )
            a.start.remote(job, plain)
        while not said.done:
            if abort.is_set():
                stop_all()
            batches = await asyncio.gather(
                *(call(a.take.remote(TAKE_WAIT_S)) for a in actors), return_exceptions=True
            )
            for k, batch in enumerate(batches):
                if isinstance(batch, BaseException):
                    said.lost(k, f"worker {k} on node {where[k][0][:12]} is gone: {batch}")
                    continue
                for kind, _, payload in batch:
                    said.handle(kind, k, payload, node=where[k][0])
    finally:
        for a in actors:
            with contextlib.suppress(Exception):
                a.stop.remote()
                a.go.remote()
        await asyncio.sleep(0)
        for a in actors:
            with contextlib.suppress(Exception):
                ray.kill(a)
    if said.errors and not abort.is_set():
        raise WorkerError("; ".join(said.errors))
