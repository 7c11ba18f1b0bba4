"""Measure levels for the capacity search: one open-loop run per rate tried.

Glue only: the config -> the search (``search.py``) -> one ``crossover.measure.execute``
per rate (Poisson arrivals on the absolute schedule, ``queue_ms`` counted), with an
overload watcher (``overload.py``) that stops a level whose queue keeps growing -> the
``crossover.capacity/1`` file. Every run and its records go to ``DIR/capacity.db``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from crossover.analysis.schema import summary_value
from crossover.capacity.overload import OverloadDetector
from crossover.capacity.schema import CapacityFile, CapacityLevel, SloCheck
from crossover.capacity.search import search_capacity
from crossover.dialects.discovery import served_models
from crossover.engines import registry
from crossover.errors import EngineError
from crossover.measure import Progress, build_prompts, choose_tokenizer, execute, new_run_id, probe
from crossover.metrics.summary import Problem, RunSummary
from crossover.records.model import RequestRecord
from crossover.records.store import Store
from crossover.spec.limits import Limits
from crossover.spec.load import Warmup
from crossover.spec.run import MIN_RATE_RPS, RunConfig, check_rate, level_run
from crossover.spec.slo import Slo
from crossover.spec.workload import Workload, normalize_shape, trace_lengths
from crossover.tasks import alongside
from crossover.workload import Tokenizer
from crossover.workload.trace import read_trace

#: failures no lower rate can cure: the server does not speak the dialect's protocol
PROTOCOL_ERRORS = frozenset({"malformed", "not_streamed", "content_type", "undecodable"})

#: the fewest arrivals a level is planned to hold (Poisson: none at all with chance e^-8)
MIN_LEVEL_ARRIVALS = 8


def level_key(rate: float) -> str:
    """A level's key in ``capacity.db``: a resumed search finds its finished levels by it."""
    return f"capacity|rate={rate:.12g}"


class CapacityConfig(Limits, Warmup, Workload):
    """``crossover capacity``'s settings, validated once at the edge: the workload,
    warm-up and limits parts (``crossover.spec``) and the search's own keys."""

    url: str
    engine: str = "openai"
    model: str
    slo: Slo
    precision: float = Field(0.1, gt=0, le=4, allow_inf_nan=False)  # nan was "<= 4"
    #: the first rate tried (default 1, or with a trace its own mean rate: speed 1)
    # finite: an infinite rate or duration was an OverflowError at the level's start
    start_rps: float = Field(1.0, gt=0, allow_inf_nan=False)
    max_rps: float | None = Field(None, gt=0, allow_inf_nan=False)
    min_rps: float | None = Field(None, gt=0, allow_inf_nan=False)
    duration_s_per_level: float = Field(10.0, gt=0, allow_inf_nan=False)
    #: stop a level whose requests in flight keep growing
    early_stop: bool = True
    sample_interval_s: float = Field(0.2, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, data: Any) -> Any:
        data = trace_lengths(normalize_shape(data))
        if isinstance(data, dict) and data.get("start_rps") is None:
            data = {**data, "start_rps": 1.0}
            if data.get("trace") is not None:
                data["start_rps"] = read_trace(Path(data["trace"])).mean_rate(1.0)
            # a default is the user's only where they gave nothing: under a maximum they
            # gave, the search starts at that maximum (a start they give above it is refused)
            top = data.get("max_rps")
            if isinstance(top, int | float) and data["start_rps"] > top:
                data["start_rps"] = float(top)
            # and above a minimum they gave, at that minimum
            bottom = data.get("min_rps")
            if isinstance(bottom, int | float) and data["start_rps"] < bottom:
                data["start_rps"] = float(bottom)
        return data

    @field_validator("start_rps", "max_rps", "min_rps")
    @classmethod
    def _rate(cls, v: float | None) -> float | None:
        return None if v is None else check_rate(v)

    @field_validator("slo")
    @classmethod
    def _slo(cls, v: Slo) -> Slo:
        if not v:
            raise ValueError("give at least one term, e.g. ttft_ms.p99=500")
        return v

    @model_validator(mode="after")
    def _range(self) -> CapacityConfig:
        if self.max_rps is not None and self.min_rps is not None and self.min_rps >= self.max_rps:
            raise ValueError("the minimum rate must be below the maximum rate")
        # never clamped: a start above the maximum is a contradiction in what was asked,
        # and a search quietly begun elsewhere would not be the one asked for
        if self.max_rps is not None and self.start_rps > self.max_rps:
            raise ValueError(
                f"the start rate {self.start_rps:.3g} is above the maximum rate "
                f"{self.max_rps:.3g}: give a start rate at or below it"
            )
        if self.min_rps is not None and self.start_rps < self.min_rps:
            raise ValueError(
                f"the start rate {self.start_rps:.3g} is below the minimum rate "
                f"{self.min_rps:.3g}: give a start rate at or above it"
            )
        return self

    @property
    def warmup(self) -> int:
        """Closed-loop warm-up before the first level only."""
        return self.warmup_for(None, "capacity")

    def trace_speed(self, rate: float) -> float | None:
        """The trace's speed factor that makes its mean rate ``rate`` (None: no trace)."""
        if self.trace is None:
            return None
        return rate / read_trace(self.trace).mean_rate(1.0)

    def level_seconds(self, rate: float) -> float:
        """How long a level at ``rate`` runs: ``duration_s_per_level``, or long enough for
        ``MIN_LEVEL_ARRIVALS`` arrivals at that rate where that is longer. A level shorter
        than a few arrivals' time measures nothing (at 0.05 requests/s a 10 s level sends
        none 61% of the time), and halving its rate would only make the next one emptier."""
        return max(self.duration_s_per_level, MIN_LEVEL_ARRIVALS / rate)

    def run_config(self, rate: float, warmup: int, level: int = 0) -> RunConfig:
        """The run of one level (``spec.run.level_run``, the sweep's constructor too);
        ``level`` (0, 1, ...): a trace's texts are the level's own (``seed + level``), as
        every level replays the trace from its first line."""
        speed = self.trace_speed(rate)
        return level_run(
            self,
            url=self.url,
            engine=self.engine,
            model=self.model,
            rate_rps=rate,
            duration_s=self.level_seconds(rate),
            warmup_requests=warmup,
            trace_speed=speed or 1.0,
            seed=self.seed + level if speed is not None else self.seed,
            slo=self.slo.per_request(),
        )


@dataclass
class CapacityEvents:
    on_level_start: Callable[[float, Progress], None] | None = None
    on_level_done: Callable[[CapacityLevel], None] | None = None


def checks(slo: Slo, summary: RunSummary) -> list[SloCheck]:
    """Each term against the level's summary."""
    out = []
    for t in slo:
        v = summary_value(summary, t.path)
        out.append(SloCheck(term=t.path, limit=t.limit, measured=v, met=t.holds(v)))
    return out


def report_completions(progress: Progress, detector: OverloadDetector) -> None:
    """Tell ``detector`` of every measured request that completes (its TTFT, its time and
    its output tokens, counted as ``progress`` counts them), beside any listener there."""
    before = progress.listener

    def listen(r: RequestRecord) -> None:
        if before is not None:
            before(r)
        if r.warmup or not r.ok or r.t_first_ns is None or r.t_done_ns is None:
            return
        tokens = r.completion_tokens or len(r.chunk_arrival_ns)
        detector.done((r.t_first_ns - r.t_send_ns) / 1e9, (r.t_done_ns - r.t_send_ns) / 1e9, tokens)

    progress.listener = listen


def level_met(summary: RunSummary, cs: list[SloCheck], overloaded: bool) -> bool:
    """A level meets the SLO: not overloaded, not invalid, every term held."""
    return not overloaded and summary.verdict != "invalid" and all(c.met for c in cs)


class CapacityRunner:
    def __init__(self, config: CapacityConfig, out: Path, events: CapacityEvents | None = None):
        self.config = config
        self.events = events or CapacityEvents()
        out.mkdir(parents=True, exist_ok=True)
        self.store = Store(out / "capacity.db")
        self.levels: list[CapacityLevel] = []
        self._tokenizer: Tokenizer | None = None
        self._next_prompt = 0
        self._warm = False

    async def measure_level(self, rate: float) -> bool:
        """Hold ``rate`` for the level's duration; True when every SLO term is met."""
        cfg = self.config
        kept = self._kept(rate)
        if kept is not None:
            self.levels.append(kept)
            if self.events.on_level_done:
                self.events.on_level_done(kept)
            return kept.met
        started = time.perf_counter()
        first_measured = not self._warm
        warmup = 0 if self._warm else cfg.warmup
        self._warm = True
        run_cfg = cfg.run_config(rate, warmup, len(self.levels))
        if first_measured:
            self._tokenizer = await asyncio.to_thread(choose_tokenizer, run_cfg)
        count = int(rate * cfg.level_seconds(rate) * 1.5) + 16 + warmup
        # fresh prompts per level: no prefix-cache hits left by the level before. A trace
        # is replayed from its first line (request i is line i, at line i's time) with the
        # level's own texts instead (its seed: run_config)
        first = 0 if cfg.trace is not None else self._next_prompt
        prompts = await asyncio.to_thread(build_prompts, run_cfg, self._tokenizer, count, first)
        self._next_prompt += count
        progress = Progress(total=None)
        if self.events.on_level_start:
            self.events.on_level_start(rate, progress)
        stop = asyncio.Event()
        detector = OverloadDetector()
        report_completions(progress, detector)
        # what each measured request asks for, in the order sent (past the last, the
        # prompts are sent again from the first: execute's PromptFeed)
        asks = [p.output_tokens or run_cfg.output_tokens for p in prompts[: len(prompts) - warmup]]
        run_id = new_run_id()
        async with alongside(self._watch(progress, detector, stop, asks)):
            outcome = await execute(
                run_cfg,
                self.store,
                run_id=run_id,
                key=level_key(rate),
                tokenizer=self._tokenizer,
                prompts=prompts,
                progress=progress,
                stop=stop,
            )
        summary = outcome.summary
        self._refuse_broken_protocol(run_id, rate)
        overloaded = stop.is_set()
        if overloaded:
            at = detector.samples[-1][0] if detector.samples else 0.0
            summary.problems.append(
                Problem(
                    code="overloaded",
                    severity="error",
                    count=1,
                    message=f"stopped after {at:.1f} s: the requests in flight kept growing "
                    f"({detector.samples[0][1] if detector.samples else 0} -> "
                    f"{detector.samples[-1][1] if detector.samples else 0})",
                )
            )
            self.store.finish_run(run_id, outcome.status, summary.to_json_dict())
        cs = checks(cfg.slo, summary)
        met = level_met(summary, cs, overloaded)
        level = CapacityLevel(
            rate_rps=rate,
            trace_speed=cfg.trace_speed(rate),
            met=met,
            overloaded=overloaded,
            checks=cs,
            seconds=round(time.perf_counter() - started, 3),
            run_id=run_id,
            summary=summary,
        )
        self.levels.append(level)
        if self.events.on_level_done:
            self.events.on_level_done(level)
        return met

    def _kept(self, rate: float) -> CapacityLevel | None:
        """The level at ``rate`` that a search of the same settings finished before in this
        folder (one stopped by Ctrl-C, or run again): kept, not measured again. The search
        is deterministic, so a resumed one asks for the same rates in the same order."""
        row = self.store.finished_by_key(level_key(rate))
        if row is None or row.summary is None:
            return None
        cfg = self.config
        mine = cfg.run_config(rate, 0, len(self.levels)).model_dump(mode="json")
        # the warm-up (before the first level only) is no setting of a kept level's
        warm = {"warmup_requests": 0, "warmup_output_tokens": mine["warmup_output_tokens"]}
        if {**row.context.get("config", {}), **warm} != mine:
            return None  # other settings: measured anew
        try:
            summary = RunSummary.model_validate(row.summary)
        except ValueError:
            return None
        overloaded = any(p.code == "overloaded" for p in summary.problems)
        cs = checks(cfg.slo, summary)
        return CapacityLevel(
            rate_rps=rate,
            trace_speed=cfg.trace_speed(rate),
            met=level_met(summary, cs, overloaded),
            overloaded=overloaded,
            checks=cs,
            seconds=0.0,
            run_id=row.run_id,
            summary=summary,
            kept=True,
        )

    def _refuse_broken_protocol(self, run_id: str, rate: float) -> None:
        """Stop the search where every request of the level broke the dialect's protocol
        (events that are no JSON, a reply that is no stream): a lower rate cannot cure
        that, and halving to the minimum rate took minutes of ever longer levels."""
        measured = self.store.records(run_id, include_warmup=False)
        if measured and all(r.error_kind in PROTOCOL_ERRORS for r in measured):
            first = measured[0].error or measured[0].error_kind
            raise EngineError(
                f"{self.config.url}: every request at {rate:g} requests/s failed, not as "
                f"its dialect's protocol allows (first: {first}); a lower rate would not "
                "change that, so the search stops"
            )

    async def _watch(
        self,
        progress: Progress,
        detector: OverloadDetector,
        stop: asyncio.Event,
        asks: list[int],
    ) -> None:
        if not self.config.early_stop:
            return
        told = 0  # measured requests the detector was told of
        while True:
            await asyncio.sleep(self.config.sample_interval_s)
            if progress.sent == 0:
                continue  # still warming up
            for i in range(told, min(progress.sent, len(asks))):
                detector.sent(asks[i])
            told = max(told, min(progress.sent, len(asks)))
            t = (time.perf_counter_ns() - progress.started_ns) / 1e9
            if detector.add(t, progress.in_flight, progress.done + progress.failed):
                stop.set()
                return

    async def run(self) -> CapacityFile:
        cfg = self.config
        await asyncio.to_thread(probe, cfg.url, {})
        # an LLM server of its dialect, or one line before any level: at a server that is
        # none every request failed, and the search halved its rate down to the minimum
        dialect = registry.dialect(cfg.run_config(cfg.start_rps, 0).dialect)
        await asyncio.to_thread(served_models, cfg.url, dialect, cfg.model)
        started = time.perf_counter()
        result = await search_capacity(
            self.measure_level,
            start_rps=cfg.start_rps,
            precision=cfg.precision,
            max_rps=cfg.max_rps,
            # halving never goes below the lowest rate a level can be given
            min_rps=cfg.min_rps
            if cfg.min_rps is not None
            else max(cfg.start_rps / 64, MIN_RATE_RPS),
        )
        goodput = None
        if result.lo is not None:
            at = next(lv for lv in self.levels if lv.rate_rps == result.lo)
            if at.summary is not None and at.summary.goodput is not None:
                goodput = at.summary.goodput.requests_per_s
        return CapacityFile(
            target={"url": cfg.url, "engine": cfg.engine, "model": cfg.model},
            slo=cfg.slo,
            precision=cfg.precision,
            verdict=result.verdict,
            max_rate_rps=result.lo,
            interval=(result.lo, result.hi),
            goodput_rps=goodput,
            levels=self.levels,
            seconds=round(time.perf_counter() - started, 3),
            workload=self._workload(),
        )

    def _workload(self) -> dict[str, Any]:
        cfg = self.config
        return {
            "output_tokens": cfg.output_tokens,
            "input_tokens": cfg.input_tokens,
            "endpoint": cfg.endpoint,
            "seed": cfg.seed,
            "duration_s_per_level": cfg.duration_s_per_level,
            "arrivals": "poisson" if cfg.trace is None else "trace",
            **self.shape(),
        }

    def shape(self) -> dict[str, str]:
        """The per-request shape in compact form, as a run and a sweep record it."""
        return self.config.shape()

    def close(self) -> None:
        self.store.close()
