"""One level's execution: the glue that runs it (:func:`execute`), its load in this
process or over workers, its records kept however it ends, and its outcome.

Nothing that can wait runs on the event loop while streams are in flight: a finished
record is held (``RecordSink``) and handed to the store's writer thread in one batch at
the end of the level (or every ``HOLD_S`` during a long one), the summary is computed
after the level (in a thread, as the text witness is), and a probe measures the loop's
own lag meanwhile (``client_loop`` in the summary, beside the client floor).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from crossover.engines.counters import counter_after, read_counter, scrape
from crossover.engines.registry import dialect as get_dialect
from crossover.errors import UsageError
from crossover.load.loop import LevelLoad, run_share, whole_share
from crossover.load.looplag import probe_interval_s
from crossover.load.probe import prompt_probe
from crossover.load.send import PromptSender, stream_options
from crossover.load.workers import LoadHooks
from crossover.measure.probes import api_headers
from crossover.measure.progress import Progress
from crossover.measure.prompts import (
    PROMPTS_AHEAD,
    PromptFeed,
    build_prompts,
    prompts_needed,
    templates_by_turn,
)
from crossover.measure.summary import (
    ENGINE_COUNTER_SAMPLE,
    LOOP_SAMPLE,
    count_and_retokenize,
    make_context,
)
from crossover.metrics.loop import loop_lag
from crossover.metrics.run import summarize
from crossover.metrics.summary import ClientFloor, EngineCounter, Problem, RunSummary
from crossover.metrics.witness import engine_claimed, engine_slack_below
from crossover.records.model import RequestRecord
from crossover.records.store import HOLD_S, RecordSink, RecordWriter
from crossover.spec.run import RunConfig
from crossover.tasks import cancel_and_wait
from crossover.transport.client import make_client
from crossover.workload import Prompt, Tokenizer

#: runs a level's load over ``config.workers`` workers, as ``run_workers``
WorkersRunner = Callable[[LevelLoad, LoadHooks], Awaitable[None]]


@dataclass
class RunOutcome:
    run_id: str
    summary: RunSummary
    records: list[RequestRecord]
    status: str


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]


async def execute(
    config: RunConfig,
    store: RecordWriter,
    *,
    run_id: str | None = None,
    key: str | None = None,
    version: str | None = None,
    tokenizer: Tokenizer | None = None,
    prompts: list[Prompt] | None = None,
    progress: Progress | None = None,
    abort: asyncio.Event | None = None,
    abort_reason: Callable[[], str | None] | None = None,
    client_floor: ClientFloor | None = None,
    metrics_url: str | None = None,
    stop: asyncio.Event | None = None,
    record_hold_s: float = HOLD_S,
    placement: dict[str, Any] | None = None,
    workers_runner: WorkersRunner | None = None,
    drain: asyncio.Event | None = None,
    load_done: asyncio.Event | None = None,
    settings: dict[str, Any] | None = None,
) -> RunOutcome:
    """Run one level. Records are committed within ``HOLD_S`` of completing (all of them
    when the level ends, however it ends); the summary at the end.

    ``abort`` (set by an engine watcher) stops the level at once; the run is then
    ``failed`` with an ``engine_died`` problem. Cancellation (Ctrl-C) marks it
    ``interrupted``; every record already written stays. ``stop`` (an overload watcher)
    ends the load the same way, but the run is ``done``: what was measured stands, with
    the requests cut short recorded as failed. ``drain`` (``crossover decide``'s sequential
    stop) ends a closed loop gently: nothing more is sent, every request in flight
    finishes, and the run is ``done`` with the requests it sent (one process's load only:
    with ``workers > 1`` the level runs whole).

    Second witnesses of the counts, taken outside the load: with a ``tokenizer``, the
    streamed text of every request is re-tokenized once, after the level (and on the
    chat endpoint the template's tokens counted once, before it, where the tokenizer
    can); with a ``metrics_url``, the engine's generated-token counter is read
    before and after it (not for replicas: one replica's counter cannot witness them all).

    ``record_hold_s``: how long finished records may wait before they are handed to
    ``store`` (``RecordSink``; a Ray node relays them to the driver, so it holds them less).
    ``placement`` (where the load ran: ``{"backend": "ray", "node_id", "node_ip"}``) is
    kept with the run. ``workers_runner`` runs the load of ``workers > 1``: worker
    processes on this machine (``crossover.load.workers.run_workers``, the default) or
    Ray actors over a cluster's nodes (``crossover.load.rayworkers.run_ray_workers``).
    ``load_done`` is set once the load has ended, however it ends, before the counting
    after it (a sweep level's samplers stop there). ``settings``: a sweep target's
    (``SweepConfig.target_settings``), kept with the run for a resume to compare.
    """
    headers = api_headers(config)
    dialect = get_dialect(config.dialect)
    if config.endpoint not in dialect.endpoints:
        raise UsageError(f"engine {config.dialect} has no {config.endpoint} endpoint")
    n_measured = prompts_needed(config)
    build_more: Callable[[int, int], list[Prompt]] | None = None
    if prompts is not None and config.requests is None:
        # a sweep's slice: its measured prompts, then the warm-up's
        n_measured = max(1, len(prompts) - config.warmup)
    if prompts is None:
        prompts = build_prompts(config, tokenizer, n_measured + config.warmup)
        # a trace replays its own lines; sessions keep turn i of a session at i mod T
        if config.requests is None and config.trace is None and config.sessions is None:

            def build_more(count: int, first: int) -> list[Prompt]:
                return build_prompts(config, tokenizer, count, first)

    template = by_turn = None
    count_template = getattr(tokenizer, "chat_template_tokens", None)
    if config.endpoint == "chat" and prompts and callable(count_template):
        template = await asyncio.to_thread(count_template, prompts[0].text)
        if config.sessions is not None:
            by_turn = await asyncio.to_thread(
                templates_by_turn, count_template, prompts, config.sessions.turns
            )
            template = by_turn[0] if by_turn else template
    ctx = make_context(config, tokenizer, version, client_floor, template, by_turn)
    run_id = run_id or new_run_id()
    context: dict[str, Any] = {
        "config": config.model_dump(mode="json"),
        "context": ctx.model_dump(mode="json"),
        "placement": placement or {"backend": "local"},
        **({"target_settings": settings} if settings is not None else {}),
    }
    store.create_run(run_id, context, key)
    abort = abort or asyncio.Event()
    keep_text = tokenizer is not None
    timeouts = config.timeouts
    records: list[RequestRecord] = []
    if len(config.replica_urls) > 1:
        metrics_url = None  # one replica's token counter cannot witness the load of all
    counter = await read_counter(metrics_url, config.model) if metrics_url else None
    own = prompts[0].tokens if prompts else None
    if config.endpoint == "chat" and tokenizer is not None and template is None and own:
        # the template's tokens are uncounted: one prompt of another length shows whether
        # the server's count grows one for one with the prompt (crossover.load.probe)
        probe = await prompt_probe(config, tokenizer, own, headers, timeouts)
        if probe is not None:
            records.append(probe)
            store.add_record(run_id, probe)
    lags: list[float] = []

    halt, relay = _either(abort, stop)
    # the counter read as a series through the level: a reset between readings is seen
    scraper = (
        asyncio.ensure_future(scrape(metrics_url, counter, config.model))
        if counter is not None and metrics_url is not None
        else None
    )
    plan = Execution(
        load=LevelLoad(config, prompts, n_measured, headers, keep_text),
        store=store,
        run_id=run_id,
        records=records,
        lags=lags,
        abort=halt,
        progress=progress,
        record_hold_s=record_hold_s,
        build_more=build_more,
        drain=drain,
        workers_runner=workers_runner,
    )
    try:
        status = await _execute(plan)
    finally:
        if load_done is not None:
            load_done.set()
        if relay is not None:
            relay.cancel()
        if scraper is not None:
            # cancelled again should it lose the cancellation (its reads are aiohttp's,
            # whose timer can turn one into a TimeoutError: crossover.tasks)
            await cancel_and_wait(scraper)
    if status == "failed" and not abort.is_set():
        status = "done"  # stopped on purpose, not aborted
    client_loop = loop_lag(lags, _probe_interval(config), config.workers)
    store.add_sample(run_id, LOOP_SAMPLE, 0.0, client_loop.model_dump(mode="json"))

    engine = None
    if counter is not None and metrics_url is not None and not abort.is_set():
        claimed = engine_claimed(records)
        enough = claimed - engine_slack_below(claimed)
        track = await counter_after(metrics_url, counter, enough, model=config.model)
        if track is not None:
            engine = EngineCounter(
                name=track.name,
                before=track.before,
                after=track.after,
                resets=track.resets,
                scrapes=track.scrapes,
            )
            store.add_sample(run_id, ENGINE_COUNTER_SAMPLE, 0.0, engine.model_dump())
    if tokenizer is not None:
        changed = await asyncio.to_thread(count_and_retokenize, records, tokenizer)
        for r in changed:  # keep the stored records the source of truth
            store.add_record(run_id, r)
    # pure work on records nothing else touches now (the load and its tasks are over):
    # off the event loop, which a sweep's watchers and the next level's prompts share
    summary = await asyncio.to_thread(summarize, records, ctx, engine, client_loop)
    if status == "failed":
        reason = (abort_reason() if abort_reason else None) or "the run was aborted"
        summary.problems.append(
            Problem(code="engine_died", severity="error", count=1, message=reason)
        )
        summary.verdict = "invalid"
    store.finish_run(run_id, status, summary.to_json_dict())
    return RunOutcome(run_id, summary, records, status)


def _either(
    abort: asyncio.Event, stop: asyncio.Event | None
) -> tuple[asyncio.Event, asyncio.Task[None] | None]:
    """One event set when ``abort`` or ``stop`` is, and the task relaying them."""
    if stop is None:
        return abort, None
    halt = asyncio.Event()

    async def relay() -> None:
        waits = [asyncio.ensure_future(abort.wait()), asyncio.ensure_future(stop.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            halt.set()
        finally:
            for w in waits:
                w.cancel()

    return halt, asyncio.ensure_future(relay())


def _probe_interval(config: RunConfig) -> float:
    """The loop-lag probe's sleep for this run (longer below 16 streams: looplag)."""
    return probe_interval_s(config.concurrency if config.mode == "concurrency" else None)


@dataclass(frozen=True, slots=True)
class Execution:
    """How ``execute`` runs a level's load, built once: the load itself, where its
    records go (``store`` under ``run_id``, and ``records``), the loop-lag readings
    (``lags``), the event that stops it (``abort``) and the live ``progress``."""

    load: LevelLoad
    store: RecordWriter
    run_id: str
    records: list[RequestRecord]
    lags: list[float]
    abort: asyncio.Event
    progress: Progress | None = None
    #: how long finished records may wait before they are handed to ``store``
    record_hold_s: float = HOLD_S
    #: makes prompts past ``load.prompts`` as a duration run goes (``PromptFeed``); in
    #: this process only
    build_more: Callable[[int, int], list[Prompt]] | None = None
    #: a closed loop sends nothing more once it is set (this process's load only)
    drain: asyncio.Event | None = None
    #: runs the load of ``workers > 1`` (``crossover.load.workers.run_workers`` if None)
    workers_runner: WorkersRunner | None = None


async def _execute(plan: Execution) -> str:
    """The level's load, in this process's event loop (``workers == 1``) or over
    ``config.workers`` workers; every record is kept (``RecordSink``) however it ends.
    Returns the run's status: ``failed`` where ``abort`` was set."""
    progress = plan.progress
    sink = RecordSink(plan.store, plan.run_id, plan.record_hold_s)

    def keep(rec: RequestRecord) -> None:
        sink.add(rec)
        plan.records.append(rec)

    def on_record(rec: RequestRecord) -> None:
        keep(rec)
        if progress is not None:
            progress.update(rec)

    def on_measure_start() -> None:
        if progress is not None:
            progress.started_ns = time.perf_counter_ns()

    hooks = LoadHooks(on_record, plan.abort, on_measure_start, plan.lags)
    try:
        if plan.load.config.workers > 1:
            from crossover.load.workers import run_workers

            await (plan.workers_runner or run_workers)(plan.load, hooks)
        else:
            await _load_here(plan, hooks, keep)
    except asyncio.CancelledError:
        sink.flush()  # every record received is written before the run is marked
        plan.store.finish_run(plan.run_id, "interrupted", None)
        raise
    finally:
        sink.flush()
    return "failed" if plan.abort.is_set() else "done"


async def _load_here(
    plan: Execution, hooks: LoadHooks, keep: Callable[[RequestRecord], None]
) -> None:
    """The load in this process's event loop, through the load loop of every executor
    (``run_share``); ``hooks.lags`` gets the loop-lag probe's readings during the
    measured load, ``keep`` a request cut short by cancellation. Prompts past the level's
    are built as a duration run goes (``PromptFeed``)."""
    load, abort, progress = plan.load, plan.abort, plan.progress
    config = load.config
    options = stream_options(config, load.keep_text)
    feed = PromptFeed(
        load.prompts, load.n_measured, plan.build_more, PROMPTS_AHEAD * (config.concurrency or 4)
    )

    async def start() -> None:
        if hooks.on_measure_start is not None:
            hooks.on_measure_start()

    async with make_client(config.transport, load.headers, options.limits) as transport:
        sender = PromptSender(
            transport,
            config,
            options,
            on_cancel=keep,
            cancel_reason=lambda: "the run was aborted" if abort.is_set() else "interrupted",
        )

        async def send(i: int, t_sched: int | None, warmup: bool) -> RequestRecord:
            p, reused = (feed.warmup(i), False) if warmup else feed.measured(i)
            if progress is not None and not warmup:
                progress.sent += 1
            rec = await sender.send(p, i, warmup, t_sched, config.replica_for(i), reused)
            hooks.on_record(rec)
            return rec

        try:
            lags = await run_share(
                transport, load, whole_share(config), send, abort, start, plan.drain
            )
            plan.lags.extend(lags or [])
        finally:
            await feed.close()
