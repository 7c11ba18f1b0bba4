"""Run a sweep: every target over every level and repeat, resumably.

Targets run one after another (one engine at a time, so one GPU is enough);
each launched engine is started once and reused across its levels. Every run is
committed to ``DIR/sweep.db`` as it finishes and ``DIR/sweep.json`` is rewritten
after each, so an interrupted sweep loses at most the level in flight; the same
command again skips the runs already done (each has a key target|level|repeat).
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
from crossover.sweep.config import SweepConfig, TargetConfig, launch_config
from crossover.sweep.scrape import NVMLSampler, scrape_loop
from crossover.workload import Prompt, Tokenizer


def run_key(target: str, concurrency: int, repeat: int) -> str:
    return f"{target}|c={concurrency}|r={repeat}"


@dataclass
class SweepEvents:
    """Hooks for the CLI's progress display; all optional."""

    on_level_start: Callable[[str, int, int, Progress], None] | None = None
    on_level_done: Callable[[str, int, int, RunSummary, str], None] | None = None
    on_skip: Callable[[str, int, int], None] | None = None
    on_engine: Callable[[str, str], None] | None = None


@dataclass
class _Target:
    cfg: TargetConfig
    info: TargetInfo
    engine: Any = None  # RunningEngine while launched
    restarts: int = 0
    warm: bool = False  # this engine instance has had its warm-up


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
        if only is not None:
            unknown = sorted(only - {t.name for t in config.targets})
            if unknown:
                raise UsageError(
                    f"--only: no target named {unknown[0]!r}; the config has "
                    + ", ".join(t.name for t in config.targets)
                )
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

    def _done(self, target: str, c: int, r: int) -> bool:
        row = self.store.finished_by_key(run_key(target, c, r))
        if row is None:
            return False
        # with redo_invalid a run that did not verify is measured again (it stays stored)
        return not (self.redo_invalid and (row.summary or {}).get("verdict") != "valid")

    # --- engines ----------------------------------------------------------
    async def _ensure_engine(self, t: _Target) -> tuple[str, str, str]:
        """(url, dialect, model) for requests; launches the engine if needed."""
        if t.cfg.url is not None:
            return t.cfg.url.rstrip("/"), t.cfg.engine or "openai", t.cfg.model or ""
        from crossover.engines.adapters import get_adapter
        from crossover.engines.lifecycle import start

        ecfg = launch_config(t.cfg)
        adapter = get_adapter(ecfg.engine)
        if t.engine is None or not t.engine.alive():
            if t.engine is not None:
                await asyncio.to_thread(t.engine.stop)
                t.restarts += 1
            log = self.out / "engines" / f"{t.cfg.name}.log"
            if t.restarts:
                log = self.out / "engines" / f"{t.cfg.name}.restart{t.restarts}.log"
            if self.events.on_engine:
                self.events.on_engine(t.cfg.name, f"starting {adapter.display_name} (log {log})")
            # started from this (the main) thread, not a worker thread: only then does the
            # engine get PR_SET_PDEATHSIG, so a SIGKILLed sweep does not leave it running
            engine = start(ecfg, log)
            try:
                await engine.await_healthy(ecfg.health_timeout_s)
                engine.version = await asyncio.to_thread(engine.probe_version)
            except BaseException:
                await asyncio.to_thread(engine.stop)
                raise
            t.engine = engine
            t.warm = False
            settings = t.engine.effective_settings()
            t.info = TargetInfo(
                name=t.cfg.name,
                engine=ecfg.engine,
                url=t.engine.url,
                model=t.cfg.model or ecfg.model,
                version=t.engine.version,
                settings={k: f.value for k, f in settings.facts.items()},
            )
            if self.events.on_engine:
                self.events.on_engine(t.cfg.name, f"healthy at {t.engine.url}")
        return t.engine.url, adapter.dialect, t.cfg.model or ecfg.model

    async def _stop_engine(self, t: _Target) -> None:
        if t.engine is not None:
            await asyncio.to_thread(t.engine.stop)
            t.engine = None

    # --- one level --------------------------------------------------------
    def _run_config(self, url: str, dialect: str, model: str, c: int, warm: bool) -> RunConfig:
        cfg = self.config
        warmup = cfg.warmup_requests if cfg.warmup_requests is not None else min(c, 8)
        if warm and not cfg.warmup_every_level:
            warmup = 0
        return RunConfig(
            url=url,
            engine=dialect,
            model=model,
            endpoint=cfg.endpoint,
            concurrency=c,
            requests=cfg.requests_for(c),
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

    def _slice_length(self, c: int) -> int:
        cfg = self.config
        warm = cfg.warmup_requests if cfg.warmup_requests is not None else min(c, 8)
        return (cfg.requests_for(c) or max(64, 16 * c)) + warm

    def _prompts_for(self, run_cfg: RunConfig, c: int, r: int) -> list[Prompt]:
        """Prompts of level ``c``, repeat ``r``: the same for every target, and distinct
        from every other level's and repeat's, so no run gets prefix-cache hits from an
        earlier one (llama.cpp caches each slot's last prompt). Slices and prompts are
        kept in the database, so a resumed sweep sends exactly the same ones."""
        slices: dict[str, list[int]] = self.store.get_meta("prompt_slices") or {}
        if not slices:  # the whole base plan at once: one tokenizer fits all of it
            for lvl in self.config.concurrency:
                for rep in range(self.config.repeats):
                    start = sum(v[1] for v in slices.values())
                    slices[f"{lvl}|{rep}"] = [start, self._slice_length(lvl)]
        if f"{c}|{r}" not in slices:  # a level added by --refine
            start = sum(v[1] for v in slices.values())
            slices[f"{c}|{r}"] = [start, self._slice_length(c)]
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
        start, length = slices[f"{c}|{r}"]
        return self._prompts[start : start + length]

    async def _level(self, t: _Target, c: int, r: int) -> None:
        try:
            url, dialect, model = await self._ensure_engine(t)
        except EngineError as exc:
            self.failed_levels.append(f"{t.cfg.name} c={c}: engine failed to start: {exc}")
            raise
        run_cfg = self._run_config(url, dialect, model, c, t.warm)
        t.warm = True
        if t.cfg.url is not None:
            await asyncio.to_thread(probe, url, {})
        prompts = self._prompts_for(run_cfg, c, r)
        abort = asyncio.Event()
        reason: list[str] = []
        loop = asyncio.get_running_loop()
        if t.engine is not None:

            def died(err: EngineError) -> None:
                reason.append(str(err))
                loop.call_soon_threadsafe(abort.set)

            t.engine.add_exit_callback(died)
        progress = Progress(total=run_cfg.requests)
        if self.events.on_level_start:
            self.events.on_level_start(t.cfg.name, c, r, progress)
        prom: list[dict[str, Any]] = []
        gpu: list[dict[str, Any]] = []
        metrics_url = t.engine.metrics_url if t.engine is not None else f"{url}/metrics"
        scraper = asyncio.ensure_future(
            scrape_loop(metrics_url, self.nvml, self.config.scrape_interval_s, prom, gpu)
        )
        run_id = new_run_id()
        from crossover.calibration.floor import resolve_client_floor

        floor, _ = resolve_client_floor(self.config.client_floor, c)
        try:
            outcome = await execute(
                run_cfg,
                self.store,
                run_id=run_id,
                key=run_key(t.cfg.name, c, r),
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
            and t.engine is not None
            and outcome.summary.requests.failed > 0
            and await asyncio.to_thread(t.engine.exited_within, 2.0)
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
            self.failed_levels.append(f"{t.cfg.name} c={c} r={r}: {reason[0] if reason else ''}")
        if self.events.on_level_done:
            self.events.on_level_done(t.cfg.name, c, r, outcome.summary, outcome.status)
        self.write_sweep_file()

    # --- the whole sweep --------------------------------------------------
    async def _measure(self, levels: list[int], main_pass: bool = True) -> None:
        for t in self.targets:
            if self.only is not None and t.cfg.name not in self.only:
                continue
            mine = t.cfg.concurrency if main_pass and t.cfg.concurrency else levels
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
        levels = list(self.config.concurrency)
        await self._measure(levels)
        findings = analyze_sweep(self.sweep_file())
        if self.config.refine:
            spent = 0
            measured = set(levels) | set(self._measured_levels())
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
                await self._measure(new, main_pass=False)
                spent += len(new)
                measured |= set(new)
                findings = analyze_sweep(self.sweep_file())
        sweep = self.write_sweep_file()
        return SweepOutcome(sweep, analyze_sweep(sweep), self.ran, self.skipped, self.failed_levels)

    def _measured_levels(self) -> list[int]:
        out = []
        for row in self.store.runs():
            if row.key and row.status == "done":
                out.append(int(row.key.split("|c=")[1].split("|")[0]))
        return out

    # --- the sweep file ---------------------------------------------------
    def sweep_file(self) -> SweepFile:
        runs: list[SweepRun] = []
        by_target = {t.cfg.name for t in self.targets}
        for row in self.store.runs():
            if row.key is None or row.summary is None or row.status not in ("done", "failed"):
                continue
            name, c_part, r_part = row.key.split("|")
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
                    concurrency=int(c_part[2:]),
                    repeat=int(r_part[2:]),
                    summary=RunSummary.model_validate(row.summary),
                    server_metrics=prom or None,
                    gpu=gpus or None,
                )
            )
        # a run repeated after a failure: keep the latest per key
        latest: dict[tuple[str, int, int], SweepRun] = {}
        for run in runs:
            latest[(run.target, run.concurrency, run.repeat)] = run
        runs = sorted(latest.values(), key=lambda x: (x.target, x.concurrency, x.repeat))
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
            elif t.cfg.url is not None and t.cfg.name not in stored:
                stored[t.cfg.name] = TargetInfo(
                    name=t.cfg.name, engine=t.cfg.engine, url=t.cfg.url, model=t.cfg.model
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


def levels_skipped(
    levels: list[int], repeats: int, todo: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    want = set(todo)
    return [(c, r) for c in levels for r in range(repeats) if (c, r) not in want]
