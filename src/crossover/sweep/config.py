"""The sweep's one validated config, from flags or a YAML file.

A target is a URL to measure, several URLs of identical replicas (``urls:``, the load sent
round robin), or an engine to launch (``launch:`` holds the ``crossover.engines`` launch
config, plus ``replicas`` and ``gpus_per_replica``). The shape ``crossover advise
--emit-sweep`` writes is accepted as it is.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from crossover import defaults
from crossover.analysis.schema import Axis, RooflineFacts
from crossover.engines.adapters import launch_gpus
from crossover.errors import FieldError, UsageError, unknown_choice, validation_line
from crossover.files import read_yaml
from crossover.secrets import is_secret_name, redacted_argv
from crossover.spec.limits import Limits
from crossover.spec.load import WARMUP_LEVEL, Level, Warmup
from crossover.spec.run import RunConfig, check_rate, level_run
from crossover.spec.slo import Slo, SloText
from crossover.spec.target import (
    REPLICA_KEYS,
    AfterStartConfig,
    LaunchTarget,
    ReplicasConfig,
    TargetConfig,
)
from crossover.spec.workload import Workload
from crossover.transport import TransportName

__all__ = [
    "REPLICA_KEYS",
    "AfterStartConfig",
    "LaunchTarget",
    "Level",
    "ReplicasConfig",
    "SweepConfig",
    "TargetConfig",
]

#: the most load processes of one level
MAX_WORKERS = 256


class SweepConfig(Limits, Warmup, Workload):
    name: str = Field("sweep", description="the sweep's name, shown in the report")
    targets: list[TargetConfig] = Field(
        min_length=1, description="what to measure: a list of targets (keys below)"
    )
    concurrency: list[int] | None = Field(
        None,
        min_length=1,
        description="closed-loop levels: requests in flight, e.g. [1, 4, 16] (or give rates)",
    )
    rates: list[float] | None = Field(
        None,
        min_length=1,
        description="open-loop levels: Poisson arrivals at these rates, requests/s",
    )
    requests_per_level: int | None = Field(
        None,
        ge=1,
        description=f"measured requests per level (default: {defaults.LEVEL_REQUESTS_HELP})",
    )
    requests_per_concurrency: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        description="or scale with the level: max(min_requests_per_level, k x level)",
    )
    min_requests_per_level: int = Field(
        2, ge=1, description="the floor of requests_per_concurrency"
    )
    duration_s_per_level: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        description="or measure each level for this many seconds; a rate level needs 3 "
        "request times (E2E p50) or more for a steady state, else its throughputs are "
        "flagged as ramp-up and drain (docs/metrics.md, short open-loop levels)",
    )
    warmup_every_level: bool = Field(
        True,
        description="false: warm up only the first level after each engine start (slow "
        "engines); keep it true with warmup_requests: level, so every level is warmed",
    )
    repeats: int = Field(1, ge=1, le=100, description="runs per level; intervals need 2 or more")
    refine: bool = Field(
        False, description="measure between bracketing levels to narrow crossovers"
    )
    interleave: bool = Field(
        False,
        description="every target's engine up together, each level's repeat measured "
        "target after target (A, B, then B, A): a shared machine's drifting load moves "
        "both alike; the engines must fit side by side",
    )
    restart_between_repeats: bool = Field(
        False,
        description="measure each repeat in its own engine start: every launched target "
        "runs all its levels of repeat 0, its engine is stopped and started again (with "
        "its warm-up, as a first start), then all levels of repeat 1, ...; the interval "
        "over repeats then holds the start-to-start variation (memory layout, kernel "
        "choices, compiled graphs) that repeats on one start miss. Costs one engine start "
        "per repeat per target; launched targets only (a URL target is refused); with "
        "interleave every engine is stopped after each repeat and all start again. A "
        "resume must keep it: a sweep resumed with it switched, either way, is refused "
        "(its intervals would mix the two kinds of repeat). On an H100 a new start moved "
        "a level's throughput by 0.3% and TTFT p50 by 6.8% (median; "
        "[results/h100/moe-warm-restart](results/h100/moe-warm-restart/README.md))",
    )
    refine_budget: int = Field(8, ge=1, description="extra levels refine may add")
    refine_width: float = Field(
        0.25,
        gt=0,
        description="refine narrows a crossover until its interval is this fraction of its level",
    )
    workers: Annotated[int, Field(ge=1, le=MAX_WORKERS)] | Literal["auto"] = Field(
        1,
        description="load processes per level (as crossover run --workers); auto: sized per "
        "level from its streams and the target's previous level's client loop lag (before "
        "its first level, the idle-loop probe crossover run --workers auto takes); with "
        "--ray they are Ray actors spread over the cluster's nodes, each node's records "
        "timed by its own clock",
    )

    @field_validator("workers", mode="before")
    @classmethod
    def _workers_form(cls, v: object) -> object:
        # one message for a bad form, not pydantic's one per member of the union
        if isinstance(v, str) and v != "auto":
            try:
                v = int(v)
            except ValueError:
                raise ValueError(f"expected a number or auto, got {v!r}") from None
        if isinstance(v, bool):  # YAML's `workers: yes` was read as 1
            raise ValueError(f"expected a number or auto, got {v}")
        # a number out of range too (pydantic named each member: workers.constrained-int)
        if isinstance(v, int) and not 1 <= v <= MAX_WORKERS:
            raise ValueError(f"1 to {MAX_WORKERS} load processes, or auto; got {v}")
        return v

    transport: TransportName = Field(
        "aiohttp",
        description="the HTTP client of every level (as crossover run --transport): aiohttp "
        "or lean; https URLs use aiohttp",
    )
    scrape_interval_s: float = Field(
        1.0, gt=0, description="seconds between scrapes of the engine's Prometheus metrics"
    )
    slo: SloText | None = Field(
        None,
        description="SLO terms for goodput, as capacity --slo takes them: "
        "'ttft_ms.p99=500,tpot_ms.p50=50' or {ttft_ms.p99: 500}; a request counts as "
        "goodput when it meets each term's limit",
    )
    client_floor: str = Field(
        "auto",
        description="the client's own delay to compare latencies with: auto (cached by "
        "`crossover calibrate`), off, or a floor JSON file",
    )
    roofline: list[RooflineFacts] = Field(
        default_factory=list, description="roofline facts per target (keys below)"
    )

    @field_validator("concurrency")
    @classmethod
    def _levels(cls, v: list[int] | None) -> list[int] | None:
        if v is None:
            return None
        if any(c < 1 for c in v):
            raise ValueError("concurrency levels must be at least 1")
        return sorted(set(v))

    @field_validator("rates")
    @classmethod
    def _rates(cls, v: list[float] | None) -> list[float] | None:
        if v is None:
            return None
        if any(not r > 0 or math.isinf(r) for r in v):
            raise ValueError("each rate must be a positive number of requests/s")
        for r in v:
            check_rate(r)
        return sorted(set(v))

    @field_validator("slo")
    @classmethod
    def _slo(cls, v: Slo | None) -> Slo | None:
        if v is not None and not v:
            raise ValueError("give at least one term, e.g. ttft_ms.p99=500")
        return v

    def per_request_slo(self) -> Slo:
        """What one request must meet to count as goodput (``RunConfig.slo``)."""
        return self.slo.per_request() if self.slo is not None else Slo()

    @field_validator("targets")
    @classmethod
    def _unique(cls, v: list[TargetConfig]) -> list[TargetConfig]:
        names = [t.name for t in v]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"target names must be unique: {', '.join(sorted(dup))}")
        return v

    @model_validator(mode="after")
    def _budget(self) -> SweepConfig:
        budgets = [
            self.requests_per_level,
            self.requests_per_concurrency,
            self.duration_s_per_level,
        ]
        if sum(b is not None for b in budgets) > 1:
            raise ValueError(
                "give one of requests_per_level, requests_per_concurrency, duration_s_per_level"
            )
        if (self.concurrency is None) == (self.rates is None):
            raise ValueError("give either concurrency levels or rates, not both")
        if self.warmup_requests == WARMUP_LEVEL and not self.warmup_every_level:
            raise ValueError(
                "warmup_requests: level warms each level with its own wave; with "
                "warmup_every_level: false only the first level after a start would be"
            )
        if self.rates is not None:
            if self.refine:
                raise ValueError("refine works along concurrency only; not with rates")
            if self.requests_per_concurrency is not None:
                raise ValueError("requests_per_concurrency does not apply to rates")
            own = [t.name for t in self.targets if t.concurrency is not None]
            if own:
                raise ValueError(f"target {own[0]}: own concurrency levels in a rate sweep")
        if self.trace is not None and self.rates is None:
            raise ValueError("a trace sets its own arrivals: give rates (its scaled mean rate)")
        if self.restart_between_repeats:
            urls = [t.name for t in self.targets if t.launch is None]
            if urls:
                raise FieldError(
                    "restart_between_repeats",
                    f"target {urls[0]} is a URL: crossover restarts only the engines it "
                    "launches (launch:), so its repeats would share one start; measure "
                    "URL targets without restart_between_repeats",
                )
        return self

    def engine_starts_planned(self) -> int:
        """How many times each launched target's engine starts in a whole sweep (no death,
        no resume): once, or once per repeat with ``restart_between_repeats``."""
        return self.repeats if self.restart_between_repeats else 1

    def trace_speed(self, rate: float) -> float:
        """The speed factor that makes the trace's mean arrival rate ``rate``."""
        from crossover.workload.trace import read_trace

        assert self.trace is not None
        return rate / read_trace(self.trace).mean_rate(1.0)

    def level_run(
        self,
        level: Level,
        urls: list[str],
        dialect: str,
        model: str,
        *,
        warmup: int | None = None,
        workers: int = 1,
        transport: TransportName | None = None,
    ) -> RunConfig:
        """The run of one level (``spec.run.level_run``, the constructor capacity uses
        too): a combination ``crossover run`` refuses raises its ``ValidationError``."""
        return level_run(
            self,
            url=urls[0],
            urls=urls if len(urls) > 1 else [],
            engine=dialect,
            model=model,
            concurrency=level.concurrency,
            # a trace sets its own arrivals: the level's rate is its scaled mean rate
            rate_rps=None if self.trace is not None else level.rate,
            trace_speed=self.trace_speed(level.rate) if self.trace and level.rate else 1.0,
            requests=self.requests_for_level(level),
            duration_s=self.duration_s_per_level,
            warmup_requests=self.warmup_for(level.concurrency, "level")
            if warmup is None
            else warmup,
            workers=workers,
            transport=transport or self.transport,
            slo=self.per_request_slo(),
        )

    def level_refusal(self, target: TargetConfig, dialect: str) -> str | None:
        """Why a level of ``target`` would be refused as ``crossover run`` refuses it (None:
        none would), found before anything is measured: every base level is built as the
        sweep will build it, with a stand-in URL where the target launches an engine."""
        urls = target.base_urls or ["http://127.0.0.1:8000"]
        for level in self.levels_of(target):
            try:
                self.level_run(level, urls, dialect, target.model or "m")
            except ValidationError as exc:
                return validation_line(exc)
        return None

    @property
    def axis(self) -> Axis:
        return "rate" if self.rates is not None else "concurrency"

    def levels(self) -> list[Level]:
        """The sweep's base levels, in increasing order."""
        if self.rates is not None:
            return [Level("rate", r) for r in self.rates]
        return [Level("concurrency", c) for c in self.concurrency or []]

    def levels_of(self, target: TargetConfig) -> list[Level]:
        """``target``'s base levels: its own ``concurrency``, else the sweep's."""
        return [Level("concurrency", c) for c in target.concurrency or []] or self.levels()

    def target_named(self, name: str) -> TargetConfig:
        """The target called ``name`` (one the config has)."""
        return next(t for t in self.targets if t.name == name)

    def requests_for_level(self, level: Level) -> int | None:
        """Measured requests at ``level``; ``None`` when the level is held for a duration."""
        if level.concurrency is not None:
            return self.requests_for(level.concurrency)
        if self.duration_s_per_level is not None:
            return None
        return self.requests_per_level or defaults.level_requests(level.value)

    def requests_for(self, c: int) -> int | None:
        if self.duration_s_per_level is not None:
            return None
        if self.requests_per_concurrency is not None:
            return max(self.min_requests_per_level, math.ceil(self.requests_per_concurrency * c))
        return self.requests_per_level or defaults.level_requests(c)

    def check_only(self, only: set[str] | None) -> None:
        """Refuse a name in ``--only`` that no target has (one line, closest name)."""
        names = [t.name for t in self.targets]
        for name in sorted(only or ()):
            if name not in names:
                raise UsageError("--only: " + unknown_choice("target", name, names))

    def identity(self) -> dict[str, Any]:
        """What must not change between a sweep and its resumption."""
        return {
            "output_tokens": self.output_tokens,
            "input_tokens": self.input_tokens,
            "endpoint": self.endpoint,
            "seed": self.seed,
            "prompts_file": str(self.prompts_file) if self.prompts_file else None,
            # only when set: a fixed-length sweep keeps the identity it always had
            **self.shape(),
            # only when set, as the shape: repeats on their own starts and repeats on one
            # start measure different things, and their interval mixes the two
            **({"restart_between_repeats": True} if self.restart_between_repeats else {}),
        }

    def identity_differs(
        self, held: dict[str, Any] | None, axes: Collection[str] = ()
    ) -> list[str]:
        """The settings of :meth:`identity` in which a database's stored one (``held``;
        ``None``: a new database) differs from this config's, and the axis where the
        database's finished runs (``axes``: theirs) lie along another (a rate YAML on a
        concurrency folder was resumed into it, mixing the two): a resume refuses any."""
        other = sorted(set(axes) - {self.axis})
        along = [f"axis (its runs are along {' and '.join(other)})"] if other else []
        if held is None:
            return along
        ident = self.identity()
        # a key one holds and the other lacks differs, whatever its value (None included)
        return along + [
            k for k in {**held, **ident} if k not in held or k not in ident or ident[k] != held[k]
        ]

    def target_settings(self, t: TargetConfig, level: Level) -> dict[str, Any]:
        """The settings target ``t``'s runs at ``level`` are measured with beyond the
        workload (:meth:`identity`): how much of the level is measured and its warm-up,
        as they resolve there (``requests``: the count, ``None`` under a duration;
        ``warmup_requests``: its count; defaults applied, so a rule written another way
        that measures the same counts is the same), the HTTP client, and what the target
        is: its dialect and model, and its engine's launch settings (the environment
        without its paths, GPU choice and secrets), or a URL target's replica count. Kept
        with each run (its context's ``target_settings``; the model as the server
        answered it): a resume that changes one of a measured target's is refused
        (:meth:`settings_differ`), since its stored runs and the new ones would be read
        as repeats of one thing. Where the engine runs and how it is reached or watched
        (``TARGET_OPERATIONAL``) may change: another machine's."""
        mine: dict[str, Any] = {
            "duration_s_per_level": self.duration_s_per_level,
            "requests": self.requests_for_level(level),
            "warmup_requests": self.warmup_for(level.concurrency, "level"),
            "warmup_output_tokens": self.warmup_output_tokens or self.output_tokens,
            "warmup_every_level": self.warmup_every_level,
            "transport": t.transport or self.transport,
            "engine": t.engine or (t.launch.engine if t.launch is not None else "openai"),
            # a name left out is the one the server lists: the run keeps the one it sent
            "model": t.model,
        }
        if t.launch is not None:
            dumped = t.launch.model_dump(mode="json", exclude=set(TARGET_OPERATIONAL))
            dumped["env"] = {
                k: v for k, v in sorted(t.launch.env.items()) if not _not_compared_env(k, v)
            }
            # a secret flag's value (--api-key X) is kept nowhere in the results either
            dumped["extra_args"] = redacted_argv(dumped.get("extra_args") or [])
            mine.update({f"launch.{k}": v for k, v in dumped.items()})
        else:
            mine["replicas"] = len(t.urls) if t.urls else 1
        # as JSON keeps it (a tuple a list, 40 and 40.0 alike), so stored ones compare
        loaded: dict[str, Any] = json.loads(json.dumps(mine, default=str))
        return loaded

    def settings_differ(
        self, held: Mapping[str, Sequence[tuple[str, Mapping[str, Any]]]], targets: Collection[str]
    ) -> dict[str, list[str]]:
        """Per target of ``targets`` (those this command measures more of), the settings
        of :meth:`target_settings` in which the runs it keeps (``held``: by target, each
        valid run's place, ``c=4 r=0``, and settings; a run stored before they were kept
        has none) differ from this config's at the run's level, each as ``key was ->
        now``, with the runs that hold the old value where only some do. A key only one
        side holds (a setting crossover added since) is not compared, nor a model the
        config leaves to the server: what it was, or is, is not known."""
        out: dict[str, list[str]] = {}
        for t in self.targets:
            runs = held.get(t.name) or []
            if t.name not in targets or not runs:
                continue
            # key -> (its value then, now: as JSON) -> the runs' places
            was: dict[str, dict[tuple[str, str], list[str]]] = {}
            for place, stored in runs:
                level = Level.from_key(place.split()[0])
                now = self.target_settings(t, level)
                if now["model"] is None:
                    del now["model"]
                run = self._as_resolved(stored, level)
                for k, v in now.items():
                    if k in run and run[k] != v:
                        pair = (_shown(run[k]), _shown(v))
                        was.setdefault(k, {}).setdefault(pair, []).append(place)
            diff = []
            for k, pairs in was.items():
                places = [p for ps in pairs.values() for p in ps]
                at = "" if len(places) == len(runs) else f" ({runs_at(places, len(runs))})"
                if len({to for _, to in pairs}) == 1:
                    then = " or ".join(dict.fromkeys(old for old, _ in pairs))
                    diff.append(f"{k} {then} -> {next(iter(pairs))[1]}{at}")
                else:  # a count that resolves per level: each change with its levels
                    diff.append(f"{k} {_per_level(pairs)}")
            if diff:
                out[t.name] = diff
        return out

    def same_settings(self, t: TargetConfig, place: str, run: Any) -> bool:
        """Whether the run at ``place`` (``c=4 r=0``) stored with ``run`` (its
        ``target_settings``) was measured as ``t`` is now there; one stored before they
        were kept (no mapping) is taken as it was."""
        if not isinstance(run, Mapping):
            return True
        return not self.settings_differ({t.name: [(place, run)]}, {t.name})

    def _as_resolved(self, run: Mapping[str, Any], level: Level) -> Mapping[str, Any]:
        """A run's stored settings with its counts as :meth:`target_settings` keeps them
        now. A run stored by crossover before they were resolved (0.x of 2026-12-07) kept
        the keys as written (``requests_per_level``, ``requests_per_concurrency``,
        ``min_requests_per_level``, ``warmup_requests: level``, a ``warmup_output_tokens``
        left out): resolved here by this config's own rule, so it compares as one stored
        now would."""
        if isinstance(run.get("launch.extra_args"), list):
            # kept before a secret flag's value was redacted: compared as kept now (and
            # never shown in a refusal)
            run = {**run, "launch.extra_args": redacted_argv(run["launch.extra_args"])}
        if "requests" in run or "requests_per_level" not in run:
            return run
        old = {k: run.get(k) for k in _WRITTEN_COUNTS}
        old["min_requests_per_level"] = old["min_requests_per_level"] or 1
        as_then = self.model_copy(
            update={**old, "duration_s_per_level": run.get("duration_s_per_level")}
        )
        fresh = {k: v for k, v in run.items() if k not in _WRITTEN_COUNTS}
        fresh["requests"] = as_then.requests_for_level(level)
        fresh["warmup_requests"] = as_then.warmup_for(level.concurrency, "level")
        fresh["warmup_output_tokens"] = run.get("warmup_output_tokens") or self.output_tokens
        return fresh


#: the count keys a run's settings held as written before they were kept resolved
_WRITTEN_COUNTS: tuple[str, ...] = (
    "requests_per_level",
    "requests_per_concurrency",
    "min_requests_per_level",
    "warmup_requests",
)


def _per_level(pairs: Mapping[tuple[str, str], Sequence[str]]) -> str:
    """``16 -> 24 at c=1 and c=2, 32 -> 48 at c=8``: each change of a setting that
    resolves per level with the levels it is at, the first four changes named."""
    said = []
    for (old, to), places in pairs.items():
        levels = list(dict.fromkeys(p.split()[0] for p in places))
        said.append(f"{old} -> {to} at {' and '.join(levels)}")
    return ", ".join(said[:4]) + (f" and {len(said) - 4} more" if len(said) > 4 else "")


#: a launch block's keys that say where the engine runs and how it is reached or watched,
#: not what is measured (a resume on another machine may change them): not compared
TARGET_OPERATIONAL: tuple[str, ...] = (
    "host",
    "port",
    "health_timeout_s",
    "gc_warning_s",
    "executable",
)


def _not_compared_env(key: str, value: str) -> bool:
    """An engine environment variable that says where things are or which GPUs, not how
    the engine runs (a path, which another machine's may differ from; the GPU choice), or
    that holds a secret (an API token: kept nowhere in the results)."""
    return (
        key == "CUDA_VISIBLE_DEVICES"
        or value.startswith(("/", "~", "./", "../"))
        or is_secret_name(key)
    )


def _shown(value: Any) -> str:
    """A setting's value in a refusal: as JSON writes it, cut to 40 characters."""
    text = f"{value:g}" if isinstance(value, float) else json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def runs_at(places: Sequence[str], of: int) -> str:
    """``3 of its 7 runs: c=1 r=1, c=2 r=1, c=4 r=0``, the first four places named."""
    shown = ", ".join(places[:4]) + (f" and {len(places) - 4} more" if len(places) > 4 else "")
    return f"{len(places)} of its {of} runs: {shown}"


def settings_refusal(out: Path | str, differ: dict[str, list[str]], command: str) -> str:
    """The one line a resume with changed target settings is refused with, its way out
    as ``command`` (sweep, decide, demo) has it."""
    what = ", ".join(f"{name} ({'; '.join(d)})" for name, d in differ.items())
    return (
        f"{out} holds runs measured with other settings: {what}; use another --out, the "
        f"settings they were measured with{way_out(out, sorted(differ), command)}"
    )


def way_out(out: Path | str, names: Sequence[str], command: str, under: str = "") -> str:
    """How a refused resume measures targets ``names`` again, as ``command`` (sweep,
    decide, demo) has it: ``, or --redo A to measure it again`` and ``under`` (what it is
    measured under then), decide's sweep command on the folder, the demo's ``--fresh``."""
    redo_flags = " ".join(f"--redo {n}" for n in names)
    them = "it" if len(names) == 1 else "them"
    if command == "demo":
        return ", or --fresh to start the demo over"
    if command == "sweep":
        return f", or {redo_flags} to measure {them} again{under}"
    return (
        f", or measure {them} again with crossover sweep --out {out} --only "
        f"{','.join(names)} {redo_flags} and the same --config"
    )


def load_sweep_config(path: Path, overrides: dict[str, Any] | None = None) -> SweepConfig:
    if not path.is_file():
        what = "is a folder, not a file" if path.is_dir() else "does not exist"
        raise UsageError(f"sweep config {path} {what}")
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a mapping at the top level")
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    data.update(given)
    return _validated(data, str(path), {k: v for k, v in FLAG_NAMES.items() if k in given})


#: the flags of ``crossover sweep`` that set a key of the config
FLAG_NAMES: dict[str, str] = {
    "concurrency": "--concurrency",
    "rates": "--rates",
    "requests_per_level": "--requests-per-level",
    "duration_s_per_level": "--duration-s-per-level",
    "warmup_requests": "--warmup",
    "warmup_output_tokens": "--warmup-output-tokens",
    "output_tokens": "--output-tokens",
    "input_tokens": "--input-tokens",
    "repeats": "--repeats",
    "restart_between_repeats": "--restart-between-repeats",
    "tokenizer": "--tokenizer",
    "seed": "--seed",
    "refine_budget": "--refine-budget",
    "workers": "--workers",
    "transport": "--transport",
    "slo": "--slo",
    "endpoint": "--endpoint",
    "trace": "--trace",
    "shared_prefix": "--shared-prefix",
    "prompts_file": "--prompts",
    "sessions": "--turns",
}


def build_sweep_config(data: dict[str, Any], flags: set[str] | None = None) -> SweepConfig:
    """The config from ``crossover sweep``'s flags: a mistake names the flag (``flags``:
    the keys that came from one, default all)."""
    names = {k: v for k, v in FLAG_NAMES.items() if flags is None or k in flags}
    return _validated(data, "sweep", names)


def _validated(
    data: dict[str, Any], where: str, names: dict[str, str] | None = None
) -> SweepConfig:
    """The whole config, each target's launch block included, or one ``UsageError`` line:
    nothing is measured or written for a config that would fail later. ``names``: keys
    that came from flags, named as the flags in a message (``where`` then says nothing)."""
    try:
        cfg = SweepConfig.model_validate(data)
    except ValidationError as exc:
        loc = str(exc.errors()[0]["loc"][0]) if exc.errors() and exc.errors()[0]["loc"] else ""
        if names and loc in names:
            raise UsageError(validation_line(exc, names=names)) from None
        raise UsageError(validation_line(exc, where, model=SweepConfig, names=names)) from None
    return cfg


def ray_resources(target: TargetConfig) -> dict[str, float]:
    """The Ray resources a target's actor asks for: its ``resources:``, over the defaults
    (CPU 1 for the load; a launched engine's GPUs). The one actor starts every replica
    of the target (``TargetSession`` on the node), under the ``CUDA_VISIBLE_DEVICES``
    Ray gives it: with ``gpus_per_replica`` replica k gets the k-th slice of those, so
    replicas x gpus_per_replica; without it every replica sees all of them, as they do
    without Ray, so one launch's GPUs (its adapter's ``launch_gpus``, read from the
    command it builds, ``extra_args`` included: what the sweep's GPU check counts), else
    the config's tp x pp."""
    out: dict[str, float] = {"CPU": 1.0}
    if (launch := target.launch) is not None:
        if launch.gpus_per_replica is not None:
            out["GPU"] = float(launch.replicas * launch.gpus_per_replica)
        else:
            ask = launch_gpus(launch.engine_config())
            out["GPU"] = float(ask.count if ask is not None else launch.tp * launch.pp)
    out.update(target.resources or {})
    return {k: v for k, v in out.items() if v > 0}
