"""One target of a sweep and one of its levels: the part of a sweep that runs where the
target's load runs.

A ``TargetSession`` owns the target's launched engine (its replicas, restarts after a
death, the warm-up state) and measures one level at a time into a ``RecordWriter``:
the sweep's own database in a local sweep (``crossover.sweep.driver``), or on a Ray node
the relay that streams every write back to the driver's database
(``crossover.sweep.actor``). The same code runs in both places; the caller plans the
levels, hands out the prompts and keeps the sweep file.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crossover.analysis import TargetInfo
from crossover.devices import own_entries, replica_devices
from crossover.dialects.discovery import NotAnLLMServerError, pick_model, served_models
from crossover.engines import registry
from crossover.errors import (
    EngineError,
    NotLLMServerTargetError,
    TargetUnreachableError,
    UsageError,
)
from crossover.measure import Progress, WorkersRunner, execute, probe
from crossover.metrics.summary import Problem, RunSummary
from crossover.records.store import HOLD_S, RecordWriter
from crossover.spec.run import RunConfig
from crossover.sweep.config import Level, SweepConfig, TargetConfig
from crossover.sweep.scrape import NVMLSampler, scrape_loop
from crossover.tasks import alongside
from crossover.workload import Prompt, Tokenizer

#: where a local sweep's runs say they ran
LOCAL_PLACEMENT: dict[str, Any] = {"backend": "local"}


@dataclass
class LevelResult:
    """How one level ended: ``status`` ``done`` or ``failed`` (``reason`` says why);
    ``target_lost``: the target cannot go on this time (its Ray node died)."""

    run_id: str
    status: str
    summary: RunSummary
    reason: str | None = None
    target_lost: bool = False


@dataclass
class TargetSession:
    """One target's engine and levels, wherever they run.

    ``log_dir`` holds the engine logs (``NAME.log``, ``NAME-rK.log``, ``.restartN``);
    ``visible_gpus``: the GPUs this session may give its replicas (Ray's assignment),
    ``None`` for the machine's own numbering.
    """

    cfg: TargetConfig
    sweep: SweepConfig
    log_dir: Path
    nvml: NVMLSampler
    on_engine: Callable[[str, str], None] | None = None
    visible_gpus: list[str] | None = None
    info: TargetInfo = field(init=False)
    engines: list[Any] = field(default_factory=list)  # RunningEngine replicas while launched
    restarts: int = 0
    warm: bool = False  # this engine instance has had its warm-up
    #: a URL target's model: its own, or the one its server lists (asked once)
    model: str | None = None
    #: the client loop's p99 lag (ms) the next level's ``workers: auto`` sizes from: this
    #: target's last measured level's, or before its first the idle probe's (``prepare``)
    loop_p99_ms: float | None = None

    def __post_init__(self) -> None:
        self.info = TargetInfo(name=self.cfg.name)

    @property
    def engine(self) -> Any:
        """Replica 0 (the only one, mostly) while launched; its log and metrics stand for all."""
        return self.engines[0] if self.engines else None

    def _say(self, message: str) -> None:
        if self.on_engine:
            self.on_engine(self.cfg.name, message)

    # --- engines ----------------------------------------------------------
    async def ensure_engine(self) -> tuple[list[str], str, str]:
        """(base URLs, dialect, model) for requests; launches the engine's replicas if
        needed (all of them again when any one has died)."""
        t = self.cfg
        if t.launch is None:
            return t.base_urls, t.engine or "openai", t.model or ""
        ecfg = t.launch.engine_config()
        adapter = t.launch.adapter
        if not self.engines or not all(e.alive() for e in self.engines):
            if self.engines:
                await self.stop()
                self.restarts += 1
            t0 = time.perf_counter_ns()
            engines = await self._start_replicas(ecfg, adapter.display_name)
            ready_s = (time.perf_counter_ns() - t0) / 1e9
            self.engines = engines
            self.warm = False
            first = engines[0]
            settings: dict[str, Any] = {
                k: f.value for k, f in first.effective_settings().facts.items()
            }
            if len(engines) > 1:
                settings["replicas"] = len(engines)
                settings["replica_urls"] = [e.url for e in engines]
            self.info = TargetInfo(
                name=t.name,
                engine=ecfg.engine,
                url=first.url,
                model=t.model or ecfg.model,
                version=first.version,
                settings=settings,
                started_at=first.launch.started_at,
                ready_s=round(ready_s, 3),
            )
            urls = ", ".join(e.url for e in engines)
            self._say(f"healthy at {urls} (ready {ready_s:.1f} s after its start)")
        return [e.url for e in self.engines], adapter.dialect.name, t.model or ecfg.model

    def replica_log(self, k: int) -> Path:
        """``NAME.log`` for replica 0 (as a single engine's), ``NAME-rK.log`` for the others;
        ``.restartN`` before ``.log`` once the engines were started again."""
        stem = self.cfg.name if k == 0 else f"{self.cfg.name}-r{k}"
        if self.restarts:
            stem += f".restart{self.restarts}"
        return self.log_dir / f"{stem}.log"

    def replica_gpus(self, k: int, n: int) -> str:
        """``CUDA_VISIBLE_DEVICES`` of replica ``k`` with ``n`` GPUs each: the k-th slice of
        Ray's assignment, else of crossover's own ``CUDA_VISIBLE_DEVICES`` (its entries'
        own form kept), else of the machine's GPUs."""
        entries = self.visible_gpus if self.visible_gpus is not None else own_entries()
        return replica_devices(entries, k, n)

    async def _start_replicas(self, ecfg: Any, display: str) -> list[Any]:
        """Start every replica at once, wait until all are healthy; if one fails, all are
        stopped and its error raised (the target fails as one engine's failure does)."""
        from crossover.engines.lifecycle import start
        from crossover.engines.processes import free_port

        assert self.cfg.launch is not None
        reps = self.cfg.launch
        configs = []
        ports: set[int] = set()
        for k in range(reps.replicas):
            update: dict[str, Any] = {}
            if reps.replicas > 1:
                if ecfg.port:
                    port = ecfg.port + k
                else:
                    port = free_port(ecfg.host)
                    while port in ports:
                        port = free_port(ecfg.host)
                ports.add(port)
                update["port"] = port
            if reps.gpus_per_replica is not None:
                update["env"] = {
                    **ecfg.env,
                    "CUDA_VISIBLE_DEVICES": self.replica_gpus(k, reps.gpus_per_replica),
                }
            configs.append(ecfg.model_copy(update=update) if update else ecfg)
        engines: list[Any] = []
        try:
            for k, cfg in enumerate(configs):
                log = self.replica_log(k)
                self._say(f"starting {display} (log {log})")
                # started from the thread that lives as long as the process (the main one,
                # or a Ray actor's loop thread): only then does the engine get
                # PR_SET_PDEATHSIG, so a SIGKILLed sweep does not leave it
                engines.append(start(cfg, log))
            waits = [asyncio.ensure_future(e.await_healthy(ecfg.health_timeout_s)) for e in engines]
            try:
                done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_EXCEPTION)
                for w in done:
                    error = w.exception()
                    if error is not None:
                        raise error
            finally:
                for w in waits:
                    w.cancel()
                await asyncio.gather(*waits, return_exceptions=True)
            engines[0].version = await asyncio.to_thread(engines[0].probe_version)
            for e in engines[1:]:
                e.version = engines[0].version
        except BaseException:
            await stop_all(engines)
            raise
        return engines

    async def stop(self) -> None:
        if self.engines:
            engines, self.engines = self.engines, []
            self._say_log_warnings(engines[0])
            await stop_all(engines)

    def _say_log_warnings(self, engine: Any) -> None:
        """The engine log's warnings (a kernel config fallen back to defaults, llama.cpp's
        host prompt cache stalling its slots), said once the target's levels are done: what
        ``crossover verify-config`` would print for the log."""
        try:
            found = engine.effective_settings().warnings
        except (OSError, ValueError, UsageError):  # a log that cannot be read says nothing
            return
        for w in found:
            where = f"{engine.log_path.name}, line {w.line}" if w.line else engine.log_path.name
            self._say(f"{w.level}: {w.message} ({where})")

    async def freeze_gc(self, level: Level) -> None:
        """``freeze_gc: true``: POST each replica's GC-freeze path before the level, its
        warm-up included. Before, not between warm-up and measured window: that seam is
        inside the load (its worker processes, Ray actors), which knows no engine. The
        ~1 M objects a full collection walks are there from the engine's start (its first
        pause comes before any request: docs/engines.md), and each level's freeze also
        takes what the levels before left. A refusal is one line; the level goes on."""
        launch = self.cfg.launch
        path = launch.adapter.freeze_gc_path if launch is not None else None
        if launch is None or not launch.freeze_gc or path is None:
            return
        from crossover.engines.gcfreeze import freeze_gc

        for k, e in enumerate(self.engines):
            why = await asyncio.to_thread(freeze_gc, e.url, path)
            if why is not None:
                who = f"replica {k}'s " if len(self.engines) > 1 else ""
                self._say(
                    f"warning: {who}POST {e.url}{path} failed ({why}): its garbage collector "
                    f"is not frozen before {level.label}"
                )

    # --- one level --------------------------------------------------------
    def warmup_for(self, level: Level) -> int:
        return self.sweep.warmup_for(level.concurrency, "level")

    def workers_for(self, level: Level) -> int:
        """The level's load processes: the sweep's number, or (``auto``) sized from the
        level's streams and the loop lag this target's previous level measured (before
        its first level, the idle probe's: ``probe_idle_loop``)."""
        if self.sweep.workers != "auto":
            return self.sweep.workers
        from crossover.load.sizing import auto_workers_here

        return auto_workers_here(level.concurrency, self.loop_p99_ms)

    async def probe_idle_loop(self, level: Level) -> None:
        """``workers: auto`` with no lag measured yet (the target's first level this time):
        the probe of this machine's idle event loop that ``run --workers auto`` takes
        (``idle_lag_ms``, 0.2 s on a fresh loop in a thread), so the first level is sized
        as ``run`` would size it rather than as if no loop were ever late. Taken once, in
        ``prepare``: before the level's warm-up and measured window, after its engine
        started (an engine on this host busies the cores the load will run on); only where
        the lag can change the number (``lag_counts``). Later levels size from the lag the
        previous level measured, under load."""
        if self.sweep.workers != "auto" or self.loop_p99_ms is not None:
            return
        from crossover.load import looplag
        from crossover.load.sizing import lag_counts

        if lag_counts(level.concurrency):
            self.loop_p99_ms = await asyncio.to_thread(looplag.idle_lag_ms)

    def run_config(self, urls: list[str], dialect: str, model: str, level: Level) -> RunConfig:
        warmup = self.warmup_for(level)
        if self.warm and not self.sweep.warmup_every_level:
            warmup = 0
        return self.sweep.level_run(
            level,
            urls,
            dialect,
            model,
            warmup=warmup,
            workers=self.workers_for(level),
            transport=self.cfg.transport,
        )

    async def prepare(self, level: Level) -> RunConfig:
        """The engine up (or the URLs answering) and the level's run config; an engine
        that will not start raises ``EngineError``, a URL that does not answer
        ``TargetUnreachableError`` (the sweep goes on with its other targets)."""
        urls, dialect, model = await self.ensure_engine()
        if self.cfg.launch is None:
            listed: list[str] | None = None
            for u in urls:
                try:
                    await asyncio.to_thread(probe, u, {})
                    if self.model is None:  # an LLM server of its dialect, asked once
                        got = await asyncio.to_thread(
                            served_models, u, registry.dialect(dialect), model or None
                        )
                        listed = got if listed is None else listed
                except NotAnLLMServerError as exc:
                    raise NotLLMServerTargetError(str(exc)) from None
                except UsageError as exc:
                    raise TargetUnreachableError(str(exc)) from None
            if self.model is None:  # the target's model, or the one its server lists
                try:
                    self.model, said = pick_model(urls[0], listed or [], model or None)
                except UsageError as exc:
                    err = NotLLMServerTargetError(f"target {self.cfg.name}: {exc}")
                    err.left_reason = "it names no model and its server lists several"
                    raise err from None
                if said is not None:
                    self._say(said)
            model = self.model
            if self.info.url is None:  # its server's version, asked once as its model
                from crossover.measure.probes import api_headers, url_version
                from crossover.sweep.versions import REPLICAS_JOIN

                # every replica's: the same servers listed in another order read alike,
                # and replicas of two versions say so
                headers = api_headers(self.run_config(urls, dialect, model, level))
                answered = [
                    await asyncio.to_thread(url_version, u, self.cfg.engine, headers) for u in urls
                ]
                found = sorted({v for v in answered if v is not None})
                version = REPLICAS_JOIN.join(found) or None
                if len(found) > 1:
                    pairs = zip(urls, answered, strict=True)
                    each = ", ".join(f"{u} {v or 'unknown'}" for u, v in pairs)
                    self._say(
                        f"warning: its replicas answer different versions ({each}): its runs "
                        "measure them together"
                    )
                self.info = TargetInfo(
                    name=self.cfg.name,
                    engine=self.cfg.engine,
                    url=urls[0],
                    model=self.cfg.model,
                    version=version,
                    settings=(
                        {"replicas": len(urls), "replica_urls": urls} if len(urls) > 1 else {}
                    ),
                )
        await self.freeze_gc(level)
        await self.probe_idle_loop(level)
        run_cfg = self.run_config(urls, dialect, model, level)
        self.warm = True
        return run_cfg

    async def measure(
        self,
        run_cfg: RunConfig,
        level: Level,
        store: RecordWriter,
        *,
        run_id: str,
        key: str,
        prompts: list[Prompt],
        progress: Progress,
        tokenizer: Tokenizer | None,
        placement: dict[str, Any] | None = None,
        record_hold_s: float = HOLD_S,
        workers_runner: WorkersRunner | None = None,
        drain: asyncio.Event | None = None,
    ) -> LevelResult:
        """Measure one level (after ``prepare``) into ``store``: scrapes beside it, a dying
        engine failing it; ``drain`` set, it sends nothing more (``execute``)."""
        abort = asyncio.Event()
        reason: list[str] = []
        loop = asyncio.get_running_loop()
        if self.engines:

            def died(replica: str) -> Callable[[EngineError], None]:
                def on_exit(err: EngineError) -> None:
                    reason.append(replica + str(err))
                    loop.call_soon_threadsafe(abort.set)

                return on_exit

            many = len(self.engines) > 1
            for k, e in enumerate(self.engines):  # any replica dying fails the level
                e.add_exit_callback(died(f"replica {k}: " if many else ""))
        prom: list[dict[str, Any]] = []
        gpu: list[dict[str, Any]] = []
        url = run_cfg.url
        metrics_url = self.engine.metrics_url if self.engine is not None else f"{url}/metrics"
        from crossover.metrics.client_floor import resolve_client_floor

        floor, _ = resolve_client_floor(
            self.sweep.client_floor, level.concurrency, transport=run_cfg.transport
        )
        # the samples end with the load, not after the level's counting that follows it
        # (the re-tokenized witness, the summary): an idle engine is no sample of the level
        load_done = asyncio.Event()
        scraper = scrape_loop(
            metrics_url, self.nvml, self.sweep.scrape_interval_s, prom, gpu, stop=load_done
        )
        async with alongside(scraper):
            outcome = await execute(
                run_cfg,
                store,
                run_id=run_id,
                key=key,
                version=self.info.version,
                tokenizer=tokenizer,
                prompts=prompts,
                progress=progress,
                abort=abort,
                abort_reason=lambda: reason[0] if reason else None,
                client_floor=floor,
                metrics_url=metrics_url,
                record_hold_s=record_hold_s,
                placement=placement,
                workers_runner=workers_runner,
                drain=drain,
                load_done=load_done,
                # the model as sent: one the config leaves out is the server's
                settings={**self.sweep.target_settings(self.cfg, level), "model": run_cfg.model},
            )
        lag = outcome.summary.client_loop
        if lag is not None and lag.p99_ms is not None:
            self.loop_p99_ms = lag.p99_ms  # the next level's workers: auto
        for s in prom:
            store.add_sample(run_id, "prometheus", s["t_s"], s["values"])
        for g in gpu:
            store.add_sample(run_id, "gpu", g["t_s"], g)
        engine_gone = (
            outcome.status == "done"
            and bool(self.engines)
            and outcome.summary.requests.failed > 0
            and any(
                await asyncio.gather(
                    *(asyncio.to_thread(e.exited_within, 2.0) for e in self.engines)
                )
            )
        )
        if engine_gone:
            # the engine died, and every request left failed before its watcher said so
            why = reason[0] if reason else f"{self.cfg.name}'s engine exited during the level"
            outcome.summary.problems.append(
                Problem(code="engine_died", severity="error", count=1, message=why)
            )
            outcome.summary.verdict = "invalid"
            outcome.status = "failed"
            reason[:] = [why]
            store.finish_run(run_id, "failed", outcome.summary.to_json_dict())
        return LevelResult(run_id, outcome.status, outcome.summary, reason[0] if reason else None)


async def stop_all(engines: list[Any]) -> None:
    """Stop every replica, all at once (each waits for its own process group)."""
    await asyncio.gather(*(asyncio.to_thread(e.stop) for e in engines))
