"""One load level against one endpoint: the library behind ``crossover run``.

Glue only: config -> tokenizer and prompts -> load strategy (dialect + transport)
-> records (SQLite, as they arrive) -> metrics. Sweeps call ``execute`` per level.

Nothing that can wait runs on the event loop while streams are in flight: a finished
record is held (``RecordSink``) and handed to the store's writer thread in one batch at
the end of the level (or every ``HOLD_S`` during a long one), the summary is computed
after the level, and a probe measures the loop's own lag meanwhile (``client_loop`` in
the summary, beside the client floor).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from crossover import defaults
from crossover.engines.counters import counter_after, read_counter, scrape
from crossover.engines.registry import dialect as get_dialect
from crossover.errors import UsageError
from crossover.load.loop import LevelLoad, run_share, whole_share
from crossover.load.looplag import probe_interval_s
from crossover.load.probe import prompt_probe
from crossover.load.send import PromptSender, stream_options
from crossover.load.workers import LoadHooks
from crossover.metrics.loop import loop_lag
from crossover.metrics.run import RunContext, count_with_tokenizer, summarize
from crossover.metrics.summary import (
    ClientFloor,
    EngineCounter,
    EngineInfo,
    LoopLag,
    Problem,
    RunSummary,
)
from crossover.metrics.witness import (
    CHUNK_ENCODES,
    engine_claimed,
    engine_slack_below,
    retokenize,
)
from crossover.records.model import RequestRecord
from crossover.records.store import HOLD_S, RecordSink, RecordWriter, Store
from crossover.spec.run import RunConfig
from crossover.transport.client import make_client
from crossover.transport.http import Timeouts
from crossover.workload import (
    Prompt,
    ServerTokenizer,
    Tokenizer,
    dataset_prompts,
    load_tokenizer,
    synthetic_prompts,
)

#: runs a level's load over ``config.workers`` workers, as ``run_workers``
WorkersRunner = Callable[[LevelLoad, LoadHooks], Awaitable[None]]

#: the run's samples table keeps the loop lag under this source, for ``summarize``
LOOP_SAMPLE = "client_loop"


@dataclass
class Progress:
    """Live counters for the progress display; updated as records arrive."""

    total: int | None
    #: measured requests handed to the transport so far (single-process loads)
    sent: int = 0
    done: int = 0
    failed: int = 0
    warmup_done: int = 0
    warmup_failed: int = 0
    output_chars: int = 0
    output_tokens: int = 0
    started_ns: int = field(default_factory=time.perf_counter_ns)
    ttfts_ms: list[float] = field(default_factory=list)
    #: called with every record as it arrives (``crossover decide``'s sequential stop)
    listener: Callable[[RequestRecord], None] | None = None

    def update(self, r: RequestRecord) -> None:
        if self.listener is not None:
            self.listener(r)
        if r.warmup:
            self.warmup_done += 1
            self.warmup_failed += 0 if r.ok else 1
            return
        if r.ok:
            self.done += 1
            self.output_tokens += r.completion_tokens or len(r.chunk_arrival_ns)
            if r.t_first_ns is not None:
                self.ttfts_ms.append((r.t_first_ns - r.t_send_ns) / 1e6)
        else:
            self.failed += 1

    @property
    def in_flight(self) -> int:
        """Measured requests sent and not finished (0 where ``sent`` is not counted)."""
        return max(0, self.sent - self.done - self.failed)

    @property
    def tokens_per_s(self) -> float:
        dt = (time.perf_counter_ns() - self.started_ns) / 1e9
        return self.output_tokens / dt if dt > 0 else 0.0

    @property
    def ttft_p50_ms(self) -> float | None:
        if not self.ttfts_ms:
            return None
        s = sorted(self.ttfts_ms[-2000:])
        return s[len(s) // 2]


def api_headers(config: RunConfig) -> dict[str, str]:
    """The API key comes from the environment only and is never stored."""
    name = config.api_key_env or "CROSSOVER_API_KEY"
    key = os.environ.get(name)
    if config.api_key_env and not key:
        raise UsageError(f"--api-key-env {name}: that environment variable is not set")
    return {"Authorization": f"Bearer {key}"} if key else {}


def probe(url: str, headers: dict[str, str], timeout_s: float = 10.0) -> None:
    """Fail fast, with one line, when nothing answers at ``url``."""
    for path in ("/health", "/v1/models", "/"):
        req = urllib.request.Request(url + path, headers=headers)  # noqa: S310
        try:
            with urllib.request.urlopen(req, timeout=timeout_s):  # noqa: S310
                return
        except urllib.error.HTTPError:
            return  # something answers HTTP: good enough
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if path == "/":
                raise UsageError(f"cannot reach {url}: {reason}") from None


def choose_tokenizer(config: RunConfig) -> Tokenizer | None:
    if config.tokenizer:
        return load_tokenizer(config.tokenizer)
    if get_dialect(config.dialect).server_tokenize:
        server = ServerTokenizer(config.url, config.model)
        if server.available():
            return server
    return None


def build_prompts(
    config: RunConfig, tokenizer: Tokenizer | None, count: int, first: int = 0
) -> list[Prompt]:
    """Prompts ``first`` .. ``first + count - 1`` of the run's deterministic sequence."""
    if config.sessions is not None:
        from crossover.workload.sessions import session_prompts

        assert config.input_tokens is not None
        return session_prompts(
            config.sessions,
            count,
            config.input_tokens,
            config.output_tokens,
            config.seed,
            tokenizer,
            first,
            input_lengths=config.input_lengths,
            output_lengths=config.output_lengths,
        )
    if config.trace is not None:
        from crossover.workload.trace import read_trace, trace_prompts

        return trace_prompts(
            read_trace(config.trace),
            count,
            config.seed,
            tokenizer,
            config.trace_block_tokens,
            first,
        )
    if config.prompts_file is not None:
        out = config.output_lengths
        replies = out.max if out is not None and out.dist == "dataset" else None
        prompts = dataset_prompts(
            config.prompts_file,
            count,
            config.input_tokens,
            tokenizer,
            config.seed,
            first,
            reply_cap=replies,
        )
        if out is None or replies is not None:
            return prompts
        return [replace(p, output_tokens=out.draw(config.seed, "output", p.id)) for p in prompts]
    assert config.input_tokens is not None
    return synthetic_prompts(
        count,
        config.input_tokens,
        config.seed,
        tokenizer,
        first,
        input_lengths=config.input_lengths,
        output_lengths=config.output_lengths,
        shared_prefix=config.shared_prefix,
    )


#: a duration or rate run keeps at least this many measured prompts per stream built
#: ahead of the request it sends (a rate run builds what its duration needs before it)
PROMPTS_AHEAD = 16


class PromptFeed:
    """The measured prompts of a level, built ahead as a duration or rate run goes, so
    every measured request sends a prompt the run never sent before (a prefix-caching
    engine would serve a repeated one from its cache: TTFT 8 ms for a true 30 in issue
    43). ``build(count, first)`` makes more (prompts ``first`` on, in a thread); None
    where the prompts were given (a sweep's slice): past them a prompt is sent again,
    marked ``prompt_reused`` on its record and counted in ``reused``."""

    def __init__(
        self,
        prompts: list[Prompt],
        n_measured: int,
        build: Callable[[int, int], list[Prompt]] | None,
        ahead: int = PROMPTS_AHEAD,
    ) -> None:
        self.prompts = prompts
        self.n_measured = max(1, min(n_measured, len(prompts)))
        self.build = build
        self.ahead = ahead
        self.extra: list[Prompt] = []
        self.next_first = len(prompts)  # ids after the measured and warm-up prompts
        self.task: asyncio.Future[list[Prompt]] | None = None
        self.reused = 0

    def warmup(self, i: int) -> Prompt:
        return self.prompts[(self.n_measured + i) % len(self.prompts)]

    def measured(self, i: int) -> tuple[Prompt, bool]:
        """Measured request ``i``'s prompt, and whether it was sent before."""
        self._keep_ahead(i)
        if i < self.n_measured:
            return self.prompts[i], False
        k = i - self.n_measured
        if k < len(self.extra):
            return self.extra[k], False
        self.reused += 1  # not built in time (or none can be): sent again
        return self.prompts[i % self.n_measured], True

    def _keep_ahead(self, i: int) -> None:
        """Build the next prompts in a thread once fewer than ``ahead`` are left."""
        left = self.n_measured + len(self.extra) - i
        if self.build is None or self.task is not None or left > self.ahead:
            return
        count = 2 * self.ahead
        build, first = self.build, self.next_first
        self.next_first += count
        task = asyncio.ensure_future(asyncio.to_thread(build, count, first))

        def done(t: asyncio.Future[list[Prompt]]) -> None:
            self.task = None
            if not t.cancelled() and t.exception() is None:
                self.extra += t.result()

        task.add_done_callback(done)
        self.task = task

    async def close(self) -> None:
        """Wait for a build in flight (its thread cannot be stopped, and the tokenizer it
        uses is the one that re-counts the level's text next)."""
        if self.task is not None:
            with contextlib.suppress(Exception):
                await self.task


def prompts_needed(config: RunConfig) -> int:
    """Measured prompts to build before the level: ``--requests``, else what a rate run
    will send in its duration, else (a closed loop for a duration) 16 per stream; a
    duration run builds more as it goes (``PromptFeed``)."""
    if config.requests:
        return config.requests
    floor = defaults.timed_prompts(config.concurrency)
    if config.rate_rps and config.duration_s:
        return max(floor, math.ceil(config.rate_rps * config.duration_s * 1.1))
    return floor


def templates_by_turn(
    count: Callable[[Sequence[tuple[str, str]]], int | None], prompts: list[Prompt], turns: int
) -> list[int] | None:
    """The chat template's tokens around each turn's history (``count``: a tokenizer's
    ``chat_template_tokens``): turn t sends 2t + 1 messages, each with its role's header,
    so a template adds more the later the turn. None where a turn's cannot be counted."""
    out: list[int] = []
    for t in range(turns):
        p = next((p for p in prompts if p.id % turns == t and p.messages), None)
        if p is None:
            break  # fewer requests than turns: the later turns are never sent
        assert p.messages is not None
        n = count(p.messages)
        if n is None:
            return None
        out.append(n)
    return out or None


@dataclass
class RunOutcome:
    run_id: str
    summary: RunSummary
    records: list[RequestRecord]
    status: str


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]


def make_context(
    config: RunConfig,
    tokenizer: Tokenizer | None,
    version: str | None,
    client_floor: ClientFloor | None = None,
    chat_template_tokens: int | None = None,
    chat_template_by_turn: list[int] | None = None,
) -> RunContext:
    return RunContext(
        mode=config.mode,
        output_tokens=config.output_tokens,
        endpoint=config.endpoint,
        engine=EngineInfo(name=config.dialect, url=config.url, model=config.model, version=version),
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        concurrency=config.concurrency,
        rate_rps=config.rate_rps,
        input_tokens=config.input_tokens,
        prompts=(
            f"trace:{config.trace}"
            if config.trace
            else str(config.prompts_file)
            if config.prompts_file
            else "synthetic"
        ),
        seed=config.seed,
        arrival_seed=config.arrival_seed,
        tokenizer=tokenizer.name if tokenizer else None,
        expects_finish_reason=get_dialect(config.dialect).has_done_sentinel,
        allowed_failures=config.allowed_failures,
        slo=config.slo,
        client_floor=client_floor,
        workers=config.workers,
        transport=config.transport,
        chat_template_tokens=chat_template_tokens,
        chat_template_by_turn=chat_template_by_turn,
        shape=config.workload_shape(),
        turns=config.sessions.turns if config.sessions else None,
    )


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
    }
    store.create_run(run_id, context, key)
    abort = abort or asyncio.Event()
    keep_text = tokenizer is not None
    timeouts = Timeouts(**config.timeouts.model_dump())
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
        if relay is not None:
            relay.cancel()
        if scraper is not None:
            scraper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await scraper
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
        changed = await asyncio.to_thread(_count_and_retokenize, records, tokenizer)
        for r in changed:  # keep the stored records the source of truth
            store.add_record(run_id, r)
    summary = summarize(records, ctx, engine, client_loop)
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


#: the ``samples`` source holding a run's engine counter readings
ENGINE_COUNTER_SAMPLE = "engine_counter"


def _count_and_retokenize(
    records: list[RequestRecord], tokenizer: Tokenizer
) -> list[RequestRecord]:
    """After the level (in a thread): count what usage did not, re-tokenize what it did.

    A tokenizer that fails here (a server's ``/tokenize`` gone) leaves the rest without
    the text witness; returns the records it changed."""
    measured = [r for r in records if not r.warmup]
    missing = [r for r in measured if r.ok and r.completion_tokens is None]
    changed: list[RequestRecord] = []
    with contextlib.suppress(OSError, ValueError):
        count_with_tokenizer(missing, tokenizer.encode)
    changed += [r for r in missing if r.completion_tokens is not None]
    done: list[int] = []
    with contextlib.suppress(OSError, ValueError):
        # a local tokenizer encodes every chunk; a server's /tokenize is a round trip each
        budget = CHUNK_ENCODES if isinstance(tokenizer, ServerTokenizer) else None
        retokenize(measured, tokenizer.encode, done, budget)
    changed += [measured[i] for i in done]
    return changed


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


def resummarize(store: Store, run_id: str) -> RunSummary:
    """Recompute a run's summary from its stored raw records."""
    row = store.run(run_id)
    if row is None:
        raise UsageError(f"no run {run_id} in {store.path}")
    ctx = RunContext.model_validate(row.context["context"])
    engine = None
    loop: LoopLag | None = None
    for source, _, data in store.samples(run_id):
        if source == ENGINE_COUNTER_SAMPLE:
            engine = EngineCounter.model_validate(data)
        elif source == LOOP_SAMPLE:
            loop = LoopLag.model_validate(data)
    return summarize(store.records(run_id), ctx, engine, loop)
