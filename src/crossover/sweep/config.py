"""The sweep's one validated config, from flags or a YAML file.

A target is a URL to measure, several URLs of identical replicas (``urls:``, the load sent
round robin), or an engine to launch (``launch:`` holds the ``crossover.engines`` launch
config, plus ``replicas`` and ``gpus_per_replica``). The shape ``crossover advise
--emit-sweep`` writes is accepted as it is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from crossover import defaults
from crossover.analysis.schema import Axis, RooflineFacts, level_label
from crossover.config import (
    TimeoutsConfig,
    base_url,
    normalize_shape,
    shape_conflict,
    trace_lengths,
)
from crossover.dialects import DIALECTS
from crossover.errors import UsageError, unknown_choice, validation_line
from crossover.transport import Transport
from crossover.workload.sessions import Sessions
from crossover.workload.shape import LengthDist, SharedPrefix, shape_specs, trace_specs

if TYPE_CHECKING:
    from crossover.engines.config import EngineConfig


@dataclass(frozen=True, order=True)
class Level:
    """One level of a sweep: ``value`` concurrent requests (closed loop), or ``value``
    requests/s arriving as a Poisson process (open loop, ``axis`` ``rate``)."""

    axis: Axis
    value: float  # an int for concurrency

    @property
    def label(self) -> str:
        return level_label(self.axis, self.value)

    @property
    def concurrency(self) -> int | None:
        return int(self.value) if self.axis == "concurrency" else None

    @property
    def rate(self) -> float | None:
        return float(self.value) if self.axis == "rate" else None

    @property
    def key(self) -> str:
        """Its part of a run key: ``c=4`` (as sweeps always wrote) or ``rate=2.5``."""
        if self.axis == "concurrency":
            return f"c={int(self.value)}"
        return f"rate={float(self.value):.12g}"

    @classmethod
    def from_key(cls, part: str) -> Level:
        if part.startswith("rate="):
            return cls("rate", float(part[5:]))
        if part.startswith("c="):
            return cls("concurrency", int(part[2:]))
        raise ValueError(f"not a level: {part!r}")


class TargetConfig(BaseModel):
    model_config = {"extra": "forbid"}

    name: str = Field(
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_.+-]+$",
        description="the target's name in tables, charts and --only (letters, digits, _.+-)",
    )
    url: str | None = Field(
        None, description="base URL of a running server (http://host:8000, no /v1); or launch"
    )
    urls: list[str] | None = Field(
        None,
        min_length=1,
        description="base URLs of identical running replicas, instead of url: request i goes "
        "to replica i mod N (data parallelism)",
    )
    engine: str | None = Field(
        None,
        description="request dialect of a URL target (openai, vllm, sglang, trtllm, triton, "
        "llamacpp, transformers); for a launched target, the engine to launch",
    )
    model: str | None = Field(
        None,
        description="model name sent in requests (default: for a URL target, the one "
        "model its server lists; for launch, the launched model's path)",
    )
    launch: dict[str, Any] | None = Field(
        None, description="launch this engine instead of measuring a URL: the keys below"
    )
    roofline: dict[str, Any] | None = Field(
        None, description="this target's roofline facts (the keys of roofline, below)"
    )
    concurrency: list[int] | None = Field(
        None,
        min_length=1,
        description="this target's own levels (default: the sweep's), e.g. one engine goes further",
    )
    transport: Transport | None = Field(
        None,
        description="this target's HTTP client (default: the sweep's transport), e.g. two "
        "targets on one engine that differ only in the client",
    )
    resources: dict[str, float] | None = Field(
        None,
        description="with --ray: the Ray resources this target's actor (its engine and load) "
        "asks for, e.g. {GPU: 2} or {CPU: 4, node-b: 1} (custom ones as `ray start "
        "--resources` names them); default CPU 1 and, for a launched engine, GPU = "
        "replicas x gpus_per_replica, else tp x pp (GPU: 0 for an engine on CPU)",
    )

    @field_validator("resources")
    @classmethod
    def _resources(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        if v is not None and any(not q >= 0 or math.isinf(q) for q in v.values()):
            raise ValueError("resources: each amount must be a number, 0 or more")
        return v

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        return base_url(v) if v is not None else None

    @field_validator("urls")
    @classmethod
    def _urls(cls, v: list[str] | None) -> list[str] | None:
        return [base_url(u) for u in v] if v is not None else None

    @field_validator("concurrency")
    @classmethod
    def _levels(cls, v: list[int] | None) -> list[int] | None:
        if v is not None and any(c < 1 for c in v):
            raise ValueError("concurrency levels must be at least 1")
        return sorted(set(v)) if v is not None else None

    @model_validator(mode="after")
    def _one_kind(self) -> TargetConfig:
        kinds = [k for k in ("url", "urls", "launch") if getattr(self, k) is not None]
        if not kinds:
            raise ValueError(f"target {self.name}: give either url or launch")
        if len(kinds) > 1:
            raise ValueError(
                f"target {self.name}: give one of url, urls or launch, not {' and '.join(kinds)}"
            )
        remote = self.launch is None
        if remote and self.engine is not None and self.engine not in DIALECTS:
            raise ValueError(unknown_choice("engine", self.engine, DIALECTS))
        if self.launch is not None and self.engine is None and "engine" not in self.launch:
            raise ValueError(f"target {self.name}: launch needs an engine")
        return self

    @property
    def base_urls(self) -> list[str]:
        """The running server's base URLs: one for ``url``, N for ``urls``, none for launch."""
        if self.urls is not None:
            return list(self.urls)
        return [self.url] if self.url is not None else []


class ReplicasConfig(BaseModel):
    """The keys of a ``launch:`` block that say how many copies of the engine to start."""

    model_config = {"extra": "forbid"}

    replicas: int = Field(
        1,
        ge=1,
        description="identical copies of the engine, each on its own port; the load goes "
        "round robin over them (request i to replica i mod N)",
    )
    gpus_per_replica: int | None = Field(
        None,
        ge=1,
        description="replica k gets CUDA_VISIBLE_DEVICES = GPUs k*K .. k*K+K-1 (K this value); "
        "not with CUDA_VISIBLE_DEVICES in env",
    )


#: keys of a ``launch:`` block that are the sweep's, not the engine's
REPLICA_KEYS: tuple[str, ...] = tuple(ReplicasConfig.model_fields)


class SweepConfig(BaseModel):
    model_config = {"extra": "forbid"}

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
        description="or scale with the level: max(min_requests_per_level, k x level)",
    )
    min_requests_per_level: int = Field(
        2, ge=1, description="the floor of requests_per_concurrency"
    )
    duration_s_per_level: float | None = Field(
        None, gt=0, description="or measure each level for this many seconds"
    )
    warmup_requests: int | None = Field(
        None,
        ge=0,
        description=f"warm-up requests per level (default: {defaults.LEVEL_WARMUP_HELP})",
    )
    warmup_every_level: bool = Field(
        True,
        description="false: warm up only the first level after each engine start (slow engines)",
    )
    repeats: int = Field(1, ge=1, le=100, description="runs per level; intervals need 2 or more")
    output_tokens: int = Field(
        ...,
        ge=1,
        description="exactly this many tokens per request, or a distribution each request "
        "draws its own exact N from (uniform:64-512, lognormal:256,128,16-1024, ...)",
    )
    input_tokens: int | None = Field(
        200,
        ge=1,
        description="prompt length in tokens, or a distribution; null with prompts_file: "
        "each prompt as written (the dataset's own lengths)",
    )
    input_lengths: LengthDist | None = Field(
        None, description="per-request prompt lengths (or give input_tokens a distribution)"
    )
    output_lengths: LengthDist | None = Field(
        None, description="per-request output lengths (or give output_tokens a distribution)"
    )
    shared_prefix: SharedPrefix | None = Field(
        None, description="PxL[:random]: P shared prefixes of L tokens before each prompt"
    )
    trace: Path | None = Field(
        None,
        description="replay this Mooncake-style JSONL trace at every level: with rates, "
        "each rate is the trace's mean arrival rate scaled to it (its speed factor)",
    )
    trace_block_tokens: int = Field(
        512, ge=1, description="tokens per hash_ids block of the trace (Mooncake: 512)"
    )
    sessions: Sessions | None = Field(
        None,
        description="multi-turn sessions {turns: T, think_s: S}: each turn carries its "
        "session's history; concurrency and rates then count sessions",
    )
    endpoint: str = Field("completions", description="completions or chat")
    seed: int = Field(0, description="seed of the prompts")
    prompts_file: Path | None = Field(
        None, description="prompts from a JSONL or ShareGPT file instead of synthetic ones"
    )
    tokenizer: str | None = Field(
        None, description="HF tokenizer folder or GGUF file for exact prompt lengths"
    )
    refine: bool = Field(
        False, description="measure between bracketing levels to narrow crossovers"
    )
    interleave: bool = Field(
        False,
        description="every target's engine up together, each level's repeat measured "
        "target after target (A, B, then B, A): a shared machine's drifting load moves "
        "both alike; the engines must fit side by side",
    )
    refine_budget: int = Field(8, ge=1, description="extra levels refine may add")
    refine_width: float = Field(
        0.25,
        gt=0,
        description="refine narrows a crossover until its interval is this fraction of its level",
    )
    timeouts: TimeoutsConfig = Field(
        default_factory=TimeoutsConfig, description="per-request limits (keys below)"
    )
    allowed_failures: int = Field(
        0, ge=0, description="failed requests a run may have and still be valid"
    )
    workers: Annotated[int, Field(ge=1, le=256)] | Literal["auto"] = Field(
        1,
        description="load processes per level (as crossover run --workers); auto: sized per "
        "level from its streams and the target's previous level's client loop lag; with "
        "--ray they are Ray actors spread over the cluster's nodes, each node's records "
        "timed by its own clock",
    )

    @field_validator("workers", mode="before")
    @classmethod
    def _workers_form(cls, v: object) -> object:
        # one message for a bad form, not pydantic's one per member of the union
        if isinstance(v, str) and v != "auto":
            try:
                return int(v)
            except ValueError:
                raise ValueError(f"expected a number or auto, got {v!r}") from None
        return v

    transport: Transport = Field(
        "aiohttp",
        description="the HTTP client of every level (as crossover run --transport): aiohttp "
        "or lean; https URLs use aiohttp",
    )
    scrape_interval_s: float = Field(
        1.0, gt=0, description="seconds between scrapes of the engine's Prometheus metrics"
    )
    slo: str | dict[str, float] | None = Field(
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
        return sorted(set(v))

    @field_validator("slo")
    @classmethod
    def _slo(cls, v: str | dict[str, float] | None) -> str | None:
        if v is None:
            return None
        from crossover.analysis.slo import parse_slo

        text = v if isinstance(v, str) else ",".join(f"{k}={x}" for k, x in v.items())
        try:
            return ",".join(f"{t.path}={t.limit:g}" for t in parse_slo(text))
        except UsageError as exc:
            raise ValueError(str(exc).removeprefix("--slo: ")) from None

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, v: str) -> str:
        if v not in ("completions", "chat"):
            raise ValueError(f"endpoint {v!r}: completions or chat")
        return v

    def per_request_slo(self) -> dict[str, float]:
        """What one request must meet to count as goodput (``RunConfig.slo``)."""
        if self.slo is None:
            return {}
        from crossover.analysis.slo import parse_slo, per_request_limits

        return per_request_limits(parse_slo(str(self.slo)))

    @field_validator("targets")
    @classmethod
    def _unique(cls, v: list[TargetConfig]) -> list[TargetConfig]:
        names = [t.name for t in v]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"target names must be unique: {', '.join(sorted(dup))}")
        return v

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, data: Any) -> Any:
        return trace_lengths(normalize_shape(data))

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
        conflict = shape_conflict(
            trace=self.trace,
            sessions=self.sessions,
            prompts_file=self.prompts_file,
            input_lengths=self.input_lengths,
            output_lengths=self.output_lengths,
            shared_prefix=self.shared_prefix,
        )
        if conflict is not None:
            raise ValueError(conflict)
        return self

    def trace_speed(self, rate: float) -> float:
        """The speed factor that makes the trace's mean arrival rate ``rate``."""
        from crossover.workload.trace import read_trace

        assert self.trace is not None
        return rate / read_trace(self.trace).mean_rate(1.0)

    @property
    def axis(self) -> Axis:
        return "rate" if self.rates is not None else "concurrency"

    def levels(self) -> list[Level]:
        """The sweep's base levels, in increasing order."""
        if self.rates is not None:
            return [Level("rate", r) for r in self.rates]
        return [Level("concurrency", c) for c in self.concurrency or []]

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
        }

    def shape(self) -> dict[str, str]:
        """The per-request shape in compact form ({} for fixed lengths, no prefix)."""
        out = shape_specs(
            input_lengths=self.input_lengths,
            output_lengths=self.output_lengths,
            shared_prefix=self.shared_prefix,
            sessions=self.sessions,
        )
        return out | trace_specs(self.trace, self.trace_block_tokens)


def load_sweep_config(path: Path, overrides: dict[str, Any] | None = None) -> SweepConfig:
    if not path.is_file():
        raise UsageError(f"sweep config {path} does not exist")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"{path}: not valid YAML{where}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text") from None
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
    "output_tokens": "--output-tokens",
    "input_tokens": "--input-tokens",
    "repeats": "--repeats",
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
    for i, target in enumerate(cfg.targets):
        if target.launch is not None:
            launch_config(target, where, f"targets.{i}.launch")
            replicas_config(target, where, f"targets.{i}.launch")
    return cfg


def ray_resources(target: TargetConfig) -> dict[str, float]:
    """The Ray resources a target's actor asks for: its ``resources:``, over the defaults
    (CPU 1 for the load; a launched engine's GPUs: replicas x gpus_per_replica, else
    tp x pp, per replica)."""
    out: dict[str, float] = {"CPU": 1.0}
    if target.launch is not None:
        ecfg = launch_config(target)
        reps = replicas_config(target)
        per = reps.gpus_per_replica or ecfg.tp * ecfg.pp
        out["GPU"] = float(reps.replicas * per)
    out.update(target.resources or {})
    return {k: v for k, v in out.items() if v > 0}


def launch_config(
    target: TargetConfig, where: str | None = None, loc: str = "launch"
) -> EngineConfig:
    """The target's ``launch:`` block as an ``EngineConfig`` (its ``engine`` defaults to the
    target's); a mistake is one ``UsageError`` line naming the key and the closest valid one."""
    from crossover.engines.config import EngineConfig

    launch = {k: v for k, v in (target.launch or {}).items() if k not in REPLICA_KEYS}
    launch.setdefault("engine", target.engine)
    try:
        return EngineConfig.model_validate(launch)
    except ValidationError as exc:
        where = where or f"target {target.name}"
        raise UsageError(validation_line(exc, where, model=EngineConfig, loc_prefix=loc)) from None


def replicas_config(
    target: TargetConfig, where: str | None = None, loc: str = "launch"
) -> ReplicasConfig:
    """How many replicas of the target's launched engine to start, and their GPUs; a
    mistake (or CUDA_VISIBLE_DEVICES in env beside gpus_per_replica) is one ``UsageError``."""
    where = where or f"target {target.name}"
    launch = target.launch or {}
    try:
        reps = ReplicasConfig.model_validate({k: launch[k] for k in REPLICA_KEYS if k in launch})
    except ValidationError as exc:
        raise UsageError(
            validation_line(exc, where, model=ReplicasConfig, loc_prefix=loc)
        ) from None
    env = launch.get("env") or {}
    if reps.gpus_per_replica is not None and "CUDA_VISIBLE_DEVICES" in env:
        raise UsageError(
            f"{where}: {loc}: gpus_per_replica and env CUDA_VISIBLE_DEVICES both choose the "
            "GPUs; give one of them"
        )
    return reps
