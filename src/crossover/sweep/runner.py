"""Run a sweep: every target over every level and repeat, resumably.

Targets run one after another (one engine at a time, so one GPU is enough);
each launched engine is started once and reused across its levels. Every run is
committed to ``DIR/sweep.db`` as it finishes and ``DIR/sweep.json`` is rewritten
after each, so an interrupted sweep loses at most the level in flight; the same
command again skips the runs already done (each has a key target|level|repeat, the level
``c=4`` for a concurrency or ``rate=2.5`` for an arrival rate in a rate sweep).
An engine that dies mid-level fails that level, is restarted, and the sweep goes on.
With ``refine``, levels are added between the measured ones where a crossover's interval
is still wide; inconclusive brackets get only the budget the crossovers leave.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from crossover.analysis import (
    SweepFile,
    SweepRun,
    TargetInfo,
    analyze_sweep,
    findings_to_schema,
    propose_refinement,
)
from crossover.analysis.crossovers import Finding
from crossover.analysis.schema import GpuSample, RooflineFacts, ServerMetricsSample
from crossover.config import RunConfig
from crossover.errors import EngineError, UsageError
from crossover.metrics.summary import Problem, RunSummary
from crossover.records.store import Store
from crossover.runner import Progress, build_prompts, choose_tokenizer, execute, new_run_id, probe
from crossover.sweep.config import (
    Level,
    SweepConfig,
    TargetConfig,
    launch_config,
    replicas_config,
)
from crossover.sweep.scrape import NVMLSampler, scrape_loop
from crossover.workload import Prompt, Tokenizer


def run_key(target: str, level: Level, repeat: int) -> str:
    return f"{target}|{level.key}|r={repeat}"


def parse_run_key(key: str) -> tuple[str, Level, int]:
    """``(target, level, repeat)`` of a run key, old (``A|c=4|r=0``) or new."""
    name, level, rep = key.split("|")
    return name, Level.from_key(level), int(rep.removeprefix("r="))


@dataclass
class SweepEvents:
    """Hooks for the CLI's progress display; all optional."""

    on_level_start: Callable[[str, Level, int, Progress], None] | None = None
    on_level_done: Callable[[str, Level, int, RunSummary, str], None] | None = None
    on_skip: Callable[[str, Level, int], None] | None = None
    on_engine: Callable[[str, str], None] | None = None


@dataclass
class _Target:
    cfg: TargetConfig
    info: TargetInfo
    engines: list[Any] = field(default_factory=list)  # RunningEngine replicas while launched
    restarts: int = 0
    warm: bool = False  # this engine instance has had its warm-up

    @property
    def engine(self) -> Any:
        """Replica 0 (the only one, mostly) while launched; its log and metrics stand for all."""
        return self.engines[0] if self.engines else None


@dataclass
class SweepOutcome:
    sweep: SweepFile
    findings: list[Finding]
    ran: int
    skipped: int
    failed_levels: list[str] = field(default_factory=list)


class SweepRunner:
    def __init__(
        self,
        config: SweepConfig,
        out: Path,
        events: SweepEvents | None = None,
        only: set[str] | None = None,
        redo_invalid: bool = False,
    ) -> None:
        self.config = config
        #: on resume, measure again the levels whose stored run is not valid
        self.redo_invalid = redo_invalid
        #: measure only these targets this time; the others' stored runs stay in sweep.json
        self.only = only
        config.check_only(only)
        from crossover.calibration.floor import resolve_client_floor

        # a bad floor file fails before work, and before sweep.db exists
        resolve_client_floor(config.client_floor, None)
        self.out = out
        self.events = events or SweepEvents()
        self.store = Store(out / "sweep.db")
        self.nvml = NVMLSampler()
        self._tokenizer: Tokenizer | None = None
        self._prompts: list[Prompt] | None = None
        self.targets = [_Target(t, TargetInfo(name=t.name)) for t in config.targets]
        self.ran = 0
        self.skipped = 0
        self.failed_levels: list[str] = []
        self.started_at = datetime.now(UTC).isoformat(timespec="seconds")
        self._check_resume()

    # --- resumption -------------------------------------------------------
    def _check_resume(self) -> None:
        ident = self.config.identity()
        previous = self.store.get_meta("identity")
        if previous is not None and previous != ident:
            diff = ", ".join(k for k in ident if ident[k] != previous.get(k))
            raise UsageError(
                f"{self.out} holds a sweep with a different workload ({diff}); "
                "use another --out or the same settings to resume"
            )
        self.store.set_meta("identity", ident)
        started = self.store.get_meta("started_at")
        if started:
            self.started_at = started
        else:
            self.store.set_meta("started_at", self.started_at)

    def _done(self, target: str, level: Level, r: int) -> bool:
        row = self.store.finished_by_key(run_key(target, level, r))
        if row is None:
            return False
        # with redo_invalid a run that did not verify is measured again (it stays stored)
        return not (self.redo_invalid and (row.summary or {}).get("verdict") != "valid")

    # --- engines ----------------------------------------------------------
    async def _ensure_engine(self, t: _Target) -> tuple[list[str], str, str]:
        """(base URLs, dialect, model) for requests; launches the engine's replicas if
        needed (all of them again when any one has died)."""
        if t.cfg.launch is None:
            return t.cfg.base_urls, t.cfg.engine or "openai", t.cfg.model or ""
        from crossover.engines.adapters import get_adapter

        ecfg = launch_config(t.cfg)
        adapter = get_adapter(ecfg.engine)
        if not t.engines or not all(e.alive() for e in t.engines):
            if t.engines:
                await self._stop_engine(t)
                t.restarts += 1
            engines = await self._start_replicas(t, ecfg, adapter.display_name)
            t.engines = engines
            t.warm = False
            first = engines[0]
            settings: dict[str, Any] = {
                k: f.value for k, f in first.effective_settings().facts.items()
            }
            if len(engines) > 1:
                settings["replicas"] = len(engines)
                settings["replica_urls"] = [e.url for e in engines]
            t.info = TargetInfo(
                name=t.cfg.name,
                engine=ecfg.engine,
                url=first.url,
                model=t.cfg.model or ecfg.model,
                version=first.version,
                settings=settings,
            )
            if self.events.on_engine:
                where = ", ".join(e.url for e in engines)
                self.events.on_engine(t.cfg.name, f"healthy at {where}")
        return [e.url for e in t.engines], adapter.dialect, t.cfg.model or ecfg.model

    def _replica_log(self, t: _Target, k: int) -> Path:
        """``NAME.log`` for replica 0 (as a single engine's), ``NAME-rK.log`` for the others;
        ``.restartN`` before ``.log`` once the engines were started again."""
        stem = t.cfg.name if k == 0 else f"{t.cfg.name}-r{k}"
        if t.restarts:
            stem += f".restart{t.restarts}"
        return self.out / "engines" / f"{stem}.log"

    async def _start_replicas(self, t: _Target, ecfg: Any, display: str) -> list[Any]:
        """Start every replica at once, wait until all are healthy; if one fails, all are
        stopped and its error raised (the target fails as one engine's failure does)."""
        from crossover.engines.lifecycle import start
        from crossover.engines.processes import free_port

        reps = replicas_config(t.cfg)
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
                n = reps.gpus_per_replica
                gpus = ",".join(str(g) for g in range(k * n, k * n + n))
                update["env"] = {**ecfg.env, "CUDA_VISIBLE_DEVICES": gpus}
            configs.append(ecfg.model_copy(update=update) if update else ecfg)
        engines: list[Any] = []
        try:
            for k, cfg in enumerate(configs):
                log = self._replica_log(t, k)
                if self.events.on_engine:
                    self.events.on_engine(t.cfg.name, f"starting {display} (log {log})")
                # started from this (the main) thread, not a worker thread: only then does
                # the engine get PR_SET_PDEATHSIG, so a SIGKILLed sweep does not leave it
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
            await _stop_all(engines)
            raise
        return engines

    async def _stop_engine(self, t: _Target) -> None:
        if t.engines:
            engines, t.engines = t.engines, []
            await _stop_all(engines)

    # --- one level --------------------------------------------------------
    def _warmup(self, level: Level) -> int:
        cfg = self.config
        if cfg.warmup_requests is not None:
            return cfg.warmup_requests
        return min(level.concurrency, 8) if level.concurrency is not None else 4

    def _run_config(
        self, urls: list[str], dialect: str, model: str, level: Level, warm: bool
    ) -> RunConfig:
        cfg = self.config
        warmup = self._warmup(level)
        if warm and not cfg.warmup_every_level:
            warmup = 0
        return RunConfig(
            url=urls[0],
            urls=urls if len(urls) > 1 else [],
            engine=dialect,
            model=model,
            endpoint=cfg.endpoint,
            concurrency=level.concurrency,
            rate_rps=level.rate,
            requests=cfg.requests_for_level(level),
            duration_s=cfg.duration_s_per_level,
            warmup_requests=warmup,
            output_tokens=cfg.output_tokens,
            input_tokens=cfg.input_tokens,
            prompts_file=cfg.prompts_file,
            tokenizer=cfg.tokenizer,
            seed=cfg.seed,
            timeouts=cfg.timeouts,
            allowed_failures=cfg.allowed_failures,
        )

    def _slice_length(self, level: Level) -> int:
        cfg = self.config
        measured = cfg.requests_for_level(level)
        if measured is None and level.concurrency is not None:
            measured = max(64, 16 * level.concurrency)
        elif measured is None:  # as many as the open loop schedules for the duration
            measured = int(level.value * (cfg.duration_s_per_level or 0) * 1.5) + 16
        return measured + self._warmup(level)

    @staticmethod
    def _slice_key(level: Level, r: int) -> str:
        # concurrency levels keep the key sweeps always stored
        return f"{level.concurrency}|{r}" if level.concurrency is not None else f"{level.key}|{r}"

    def _prompts_for(self, run_cfg: RunConfig, level: Level, r: int) -> list[Prompt]:
        """Prompts of level ``c``, repeat ``r``: the same for every target, and distinct
        from every other level's and repeat's, so no run gets prefix-cache hits from an
        earlier one (llama.cpp caches each slot's last prompt). Slices and prompts are
        kept in the database, so a resumed sweep sends exactly the same ones."""
        slices: dict[str, list[int]] = self.store.get_meta("prompt_slices") or {}
        if not slices:  # the whole base plan at once: one tokenizer fits all of it
            for lvl in self.config.levels():
                for rep in range(self.config.repeats):
                    start = sum(v[1] for v in slices.values())
                    slices[self._slice_key(lvl, rep)] = [start, self._slice_length(lvl)]
        if self._slice_key(level, r) not in slices:  # a level added by --refine
            start = sum(v[1] for v in slices.values())
            slices[self._slice_key(level, r)] = [start, self._slice_length(level)]
        self.store.set_meta("prompt_slices", slices)
        need = sum(v[1] for v in slices.values())
        if self._prompts is None:
            stored = self.store.get_meta("prompts") or []
            self._prompts = [Prompt(p["id"], p["text"], p["tokens"]) for p in stored]
        if len(self._prompts) < need:
            if self._tokenizer is None:
                self._tokenizer = choose_tokenizer(run_cfg)
            have = len(self._prompts)
            self._prompts += build_prompts(run_cfg, self._tokenizer, need - have, first=have)
            self.store.set_meta(
                "prompts",
                [{"id": p.id, "text": p.text, "tokens": p.tokens} for p in self._prompts],
            )
        start, length = slices[self._slice_key(level, r)]
        return self._prompts[start : start + length]

    async def _level(self, t: _Target, level: Level, r: int) -> None:
        try:
            urls, dialect, model = await self._ensure_engine(t)
        except EngineError as exc:
            said = f" (its log ends: {exc.cause})" if exc.cause else ""
            self.failed_levels.append(
                f"{t.cfg.name} {level.label}: engine failed to start: {exc}{said}"
            )
            raise
        url = urls[0]
        run_cfg = self._run_config(urls, dialect, model, level, t.warm)
        t.warm = True
        if t.cfg.launch is None:
            for u in urls:
                await asyncio.to_thread(probe, u, {})
        prompts = self._prompts_for(run_cfg, level, r)
        abort = asyncio.Event()
        reason: list[str] = []
        loop = asyncio.get_running_loop()
        if t.engines:

            def died(replica: str) -> Callable[[EngineError], None]:
                def on_exit(err: EngineError) -> None:
                    reason.append(replica + str(err))
                    loop.call_soon_threadsafe(abort.set)

                return on_exit

            many = len(t.engines) > 1
            for k, e in enumerate(t.engines):  # any replica dying fails the level
                e.add_exit_callback(died(f"replica {k}: " if many else ""))
        progress = Progress(total=run_cfg.requests)
        if self.events.on_level_start:
            self.events.on_level_start(t.cfg.name, level, r, progress)
        prom: list[dict[str, Any]] = []
        gpu: list[dict[str, Any]] = []
        metrics_url = t.engine.metrics_url if t.engine is not None else f"{url}/metrics"
        scraper = asyncio.ensure_future(
            scrape_loop(metrics_url, self.nvml, self.config.scrape_interval_s, prom, gpu)
        )
        run_id = new_run_id()
        from crossover.calibration.floor import resolve_client_floor

        floor, _ = resolve_client_floor(self.config.client_floor, level.concurrency)
        try:
            outcome = await execute(
                run_cfg,
                self.store,
                run_id=run_id,
                key=run_key(t.cfg.name, level, r),
                version=t.info.version,
                tokenizer=self._tokenizer,
                prompts=prompts,
                progress=progress,
                abort=abort,
                abort_reason=lambda: reason[0] if reason else None,
                client_floor=floor,
                metrics_url=metrics_url,
            )
        finally:
            scraper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await scraper
        for s in prom:
            self.store.add_sample(run_id, "prometheus", s["t_s"], s["values"])
        for g in gpu:
            self.store.add_sample(run_id, "gpu", g["t_s"], g)
        self.ran += 1
        engine_gone = (
            outcome.status == "done"
            and bool(t.engines)
            and outcome.summary.requests.failed > 0
            and any(
                await asyncio.gather(*(asyncio.to_thread(e.exited_within, 2.0) for e in t.engines))
            )
        )
        if engine_gone:
            # the engine died, and every request left failed before its watcher said so
            why = reason[0] if reason else f"{t.cfg.name}'s engine exited during the level"
            outcome.summary.problems.append(
                Problem(code="engine_died", severity="error", count=1, message=why)
            )
            outcome.summary.verdict = "invalid"
            outcome.status = "failed"
            reason[:] = [why]
            self.store.finish_run(run_id, "failed", outcome.summary.to_json_dict())
        if outcome.status == "failed":
            self.failed_levels.append(
                f"{t.cfg.name} {level.label} r={r}: {reason[0] if reason else ''}"
            )
        if self.events.on_level_done:
            self.events.on_level_done(t.cfg.name, level, r, outcome.summary, outcome.status)
        self.write_sweep_file()

    # --- the whole sweep --------------------------------------------------
    async def _measure(self, levels: list[Level], main_pass: bool = True) -> None:
        for t in self.targets:
            if self.only is not None and t.cfg.name not in self.only:
                continue
            mine = levels
            if main_pass and t.cfg.concurrency:
                mine = [Level("concurrency", c) for c in t.cfg.concurrency]
            # repeat-major: a whole curve first, then the next repeat, so repeats are
            # apart in time (drift shows as spread) and a cut-short sweep has full curves
            todo = [
                (c, r)
                for r in range(self.config.repeats)
                for c in mine
                if not self._done(t.cfg.name, c, r)
            ]
            self.skipped += len(mine) * self.config.repeats - len(todo)
            for c, r in levels_skipped(mine, self.config.repeats, todo):
                if self.events.on_skip:
                    self.events.on_skip(t.cfg.name, c, r)
            try:
                for c, r in todo:
                    try:
                        await self._level(t, c, r)
                    except EngineError:
                        # the engine would not start: the rest of this target cannot run
                        break
            finally:
                await self._stop_engine(t)

    async def run(self) -> SweepOutcome:
        await self._measure(self.config.levels())
        findings = analyze_sweep(self.sweep_file())
        if self.config.refine:  # along concurrency only (the config says so)
            spent = 0
            measured = set(self.config.concurrency or []) | set(self._measured_levels())
            while spent < self.config.refine_budget:
                left = self.config.refine_budget - spent
                width = self.config.refine_width
                # crossovers first: an inconclusive bracket (often a metric where the two
                # targets are equal within noise) gets only what they leave of the budget
                new = propose_refinement(
                    findings,
                    measured,
                    target_rel_width=width,
                    budget=left,
                    include_inconclusive=False,
                ) or propose_refinement(findings, measured, target_rel_width=width, budget=left)
                if not new:
                    break
                await self._measure([Level("concurrency", c) for c in new], main_pass=False)
                spent += len(new)
                measured |= set(new)
                findings = analyze_sweep(self.sweep_file())
        sweep = self.write_sweep_file()
        return SweepOutcome(sweep, analyze_sweep(sweep), self.ran, self.skipped, self.failed_levels)

    def _measured_levels(self) -> list[int]:
        out = []
        for row in self.store.runs():
            if row.key and row.status == "done":
                c = parse_run_key(row.key)[1].concurrency
                if c is not None:
                    out.append(c)
        return out

    # --- the sweep file ---------------------------------------------------
    def sweep_file(self) -> SweepFile:
        runs: list[SweepRun] = []
        by_target = {t.cfg.name for t in self.targets}
        for row in self.store.runs():
            if row.key is None or row.summary is None or row.status not in ("done", "failed"):
                continue
            name, level, repeat = parse_run_key(row.key)
            if name not in by_target:
                continue
            samples = self.store.samples(row.run_id)
            prom = [
                ServerMetricsSample(t_s=t, values=d) for s, t, d in samples if s == "prometheus"
            ]
            gpus = [GpuSample.model_validate(d) for s, _, d in samples if s == "gpu"]
            runs.append(
                SweepRun(
                    target=name,
                    concurrency=level.concurrency,
                    rate=level.rate,
                    repeat=repeat,
                    summary=RunSummary.model_validate(row.summary),
                    server_metrics=prom or None,
                    gpu=gpus or None,
                )
            )
        # a run repeated after a failure: keep the latest per key
        latest: dict[tuple[str, str, float, int], SweepRun] = {}
        for run in runs:
            latest[(run.target, run.axis, run.level, run.repeat)] = run
        runs = sorted(latest.values(), key=lambda x: (x.target, x.axis, x.level, x.repeat))
        infos = self._target_infos()
        roofline = list(self.config.roofline)
        for t in self.targets:
            if t.cfg.roofline:
                roofline.append(
                    RooflineFacts.model_validate({"target": t.cfg.name, **t.cfg.roofline})
                )
        sweep = SweepFile(
            targets=infos,
            runs=runs,
            roofline=roofline,
            started_at=self.started_at,
            workload={
                **self.config.identity(),
                "concurrency": self.config.concurrency,
                **({"rates": self.config.rates} if self.config.rates is not None else {}),
                **(
                    {"duration_s_per_level": self.config.duration_s_per_level}
                    if self.config.rates is not None
                    else {}
                ),
                "repeats": self.config.repeats,
                "name": self.config.name,
            },
        )
        xs, inc = findings_to_schema(analyze_sweep(sweep))
        sweep.crossovers, sweep.inconclusive = xs, inc
        return sweep

    def _target_infos(self) -> list[TargetInfo]:
        stored: dict[str, Any] = self.store.get_meta("targets") or {}
        for t in self.targets:
            if t.info.engine is not None or t.info.url is not None:
                stored[t.cfg.name] = t.info.model_dump(mode="json")
            elif t.cfg.launch is None and t.cfg.name not in stored:
                urls = t.cfg.base_urls
                replicas = {"replicas": len(urls), "replica_urls": urls} if len(urls) > 1 else {}
                stored[t.cfg.name] = TargetInfo(
                    name=t.cfg.name,
                    engine=t.cfg.engine,
                    url=urls[0],
                    model=t.cfg.model,
                    settings=replicas,
                ).model_dump()
        self.store.set_meta("targets", stored)
        return [
            TargetInfo.model_validate(stored[t.cfg.name])
            if t.cfg.name in stored
            else TargetInfo(name=t.cfg.name)
            for t in self.targets
        ]

    def write_sweep_file(self) -> SweepFile:
        sweep = self.sweep_file()
        sweep.write(self.out / "sweep.json")
        return sweep

    def close(self) -> None:
        self.store.close()


async def _stop_all(engines: list[Any]) -> None:
    """Stop every replica, all at once (each waits for its own process group)."""
    await asyncio.gather(*(asyncio.to_thread(e.stop) for e in engines))


def levels_skipped(
    levels: list[Level], repeats: int, todo: list[tuple[Level, int]]
) -> list[tuple[Level, int]]:
    want = set(todo)
    return [(c, r) for c in levels for r in range(repeats) if (c, r) not in want]
