"""``crossover run``'s settings: one load level against one endpoint, built from the
workload, warm-up and limits parts, and the one constructor of a sweep's or a capacity
search's level run (``level_run``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

from pydantic import AliasChoices, Field, field_validator, model_validator

from crossover import defaults
from crossover.engines import registry
from crossover.errors import UsageError, unknown_choice
from crossover.spec.limits import Limits
from crossover.spec.load import Warmup
from crossover.spec.slo import PER_REQUEST, Slo, SloLimits
from crossover.spec.workload import Workload, normalize_shape, trace_lengths
from crossover.transport import TransportName

#: the most requests in flight one run (or one calibrate level) holds
MAX_CONCURRENCY = 100_000

#: the refusal of sessions held for a duration, whoever asks (run, sweep, capacity)
SESSIONS_NOT_TIMED = "sessions count requests: give a request count, not a duration"


def base_url(v: str) -> str:
    """The server's base URL (``http://host:8000``), checked: crossover adds the API path
    (``/v1/completions``, ``/v2/models/...``) itself, so a URL ending in one would 404."""
    p = urlparse(v)
    if p.scheme not in ("http", "https") or not p.hostname:
        raise ValueError(f"not an http(s) URL: {v!r}")
    try:
        port = p.port
    except ValueError:  # :99999 or :-5: else "cannot reach ...: Connection refused" or worse
        port = 0
    if port == 0:
        raise ValueError(f"{v!r}: the port is not a TCP port; give 1 to 65535")
    v = v.rstrip("/")
    last = p.path.rstrip("/").rsplit("/", 1)[-1]
    if last in ("v1", "v2"):
        raise ValueError(
            f"{v!r} ends in /{last}: give the server's base URL, {v.removesuffix('/' + last)!r}"
            " (crossover adds the API path itself)"
        )
    return v


def engine_metrics_url(text: str, url: str) -> str | None:
    """``--metrics-url``: ``auto``, the server's ``/metrics``; ``off``; or a URL as is."""
    if text == "auto":
        return url + "/metrics"
    if text == "off":
        return None
    if not text.startswith(("http://", "https://")):
        raise UsageError(f"--metrics-url: expected auto, off or an http(s) URL, got {text!r}")
    return text


def _trace_defaults(data: Any) -> Any:
    """With ``trace``: the open loop's mean rate, the request count and the nominal
    lengths come from the trace; a rate or concurrency given as well is refused."""
    if not isinstance(data, dict) or data.get("trace") is None:
        return data
    from crossover.workload.trace import read_trace

    data = trace_lengths(data)
    trace = read_trace(Path(data["trace"]))
    speed = float(data.get("trace_speed") or 1.0)
    rate = trace.mean_rate(speed)
    given = data.get("rate_rps")
    # a config written out and read back (a worker's, a Ray actor's) holds the trace's own
    # rate: that one is no conflict
    if data.get("concurrency") is not None or (
        given is not None and not math.isclose(float(given), rate, rel_tol=1e-9)
    ):
        raise ValueError("a trace sets its own arrivals: no concurrency or rate with it")
    data = {**data, "rate_rps": rate}
    if data.get("requests") is None and data.get("duration_s") is None:
        data["requests"] = len(trace.requests)
    return data


#: the rates (requests/s) a load is given: one request in about 12 days to a million a
#: second. Outside, a schedule was never built (1e300: a schedule of 1e300 entries, a
#: hang) or held a time past a float's range (1e-300: an OverflowError)
MIN_RATE_RPS = 1e-6
MAX_RATE_RPS = 1e6


def check_rate(v: float) -> float:
    """A finite rate within ``MIN_RATE_RPS``-``MAX_RATE_RPS`` (one line otherwise)."""
    if not MIN_RATE_RPS <= v <= MAX_RATE_RPS:
        raise ValueError(
            f"a rate must be {MIN_RATE_RPS:g} to {MAX_RATE_RPS:g} requests/s, got {v:g}"
        )
    return v


class RunConfig(Limits, Warmup, Workload):
    """One load level against one endpoint (``crossover run``)."""

    url: str
    #: base URLs of identical replicas (``url`` is the first): request i goes to replica
    #: i mod N; empty for one server
    urls: list[str] = Field(default_factory=list)
    #: the request dialect (``crossover.dialects``), not the engine: a launched lmdeploy
    #: speaks ``openai``; ``engine`` is still read for it (old configs, ``--engine``)
    dialect: str = Field("openai", validation_alias=AliasChoices("dialect", "engine"))
    model: str
    concurrency: int | None = Field(None, ge=1, le=MAX_CONCURRENCY)
    # finite: an infinite rate or duration was an OverflowError at the level's start
    rate_rps: float | None = Field(None, gt=0, allow_inf_nan=False)
    max_in_flight: int | None = Field(None, ge=1)
    requests: int | None = Field(None, ge=1)
    duration_s: float | None = Field(None, gt=0, allow_inf_nan=False)
    trace_speed: float = Field(1.0, gt=0, le=1e6)
    #: an open loop's arrival times from this seed instead of ``seed`` (a sweep's repeats
    #: each draw their own arrivals, the same for every target)
    arrival_seed: int | None = None
    #: what one request must meet to count as goodput (``Slo.per_request``), written as a
    #: mapping of metric to limit
    slo: SloLimits = Field(default_factory=Slo)
    api_key_env: str | None = None
    workers: int = Field(1, ge=1, le=256)
    #: the client that sends the requests (``crossover.transport.client``); https URLs go
    #: through aiohttp whichever is chosen
    transport: TransportName = "aiohttp"

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, data: Any) -> Any:
        return _trace_defaults(normalize_shape(data))

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        return base_url(v)

    @field_validator("urls")
    @classmethod
    def _urls(cls, v: list[str]) -> list[str]:
        return [base_url(u) for u in v]

    @field_validator("rate_rps")
    @classmethod
    def _rate(cls, v: float | None) -> float | None:
        return None if v is None else check_rate(v)

    @field_validator("dialect")
    @classmethod
    def _dialect(cls, v: str) -> str:
        known = registry.dialect_of(v)  # an engine's name reads as the dialect it speaks
        if known is None:
            raise ValueError(unknown_choice("engine", v, registry.ENGINE_OR_DIALECT))
        return known

    @field_validator("slo")
    @classmethod
    def _slo(cls, v: Slo) -> Slo:
        if not v.is_per_request:
            k = next(t.path for t in v if t.metric not in PER_REQUEST or t.stat != "max")
            raise ValueError(f"unknown SLO {k!r}; use ttft_ms, tpot_ms, e2e_ms")
        return v

    @model_validator(mode="after")
    def _load(self) -> RunConfig:
        if (self.concurrency is None) == (self.rate_rps is None):
            raise ValueError("give exactly one of --concurrency or --rate")
        if self.requests is None and self.duration_s is None:
            self.requests = defaults.run_requests(self.concurrency)
        if self.requests is not None and self.duration_s is not None:
            raise ValueError("give --requests or --duration-s, not both")
        if self.endpoint not in registry.dialect(self.dialect).endpoints:
            raise ValueError(f"the {self.dialect} dialect has no {self.endpoint} endpoint")
        if self.urls and self.urls[0] != self.url:
            raise ValueError("url must be the first of urls")
        if self.sessions is not None and self.duration_s is not None:
            raise ValueError(SESSIONS_NOT_TIMED)
        return self

    def workload_shape(self) -> dict[str, str]:
        """The per-request shape in compact form (recorded with each run; {} when the
        lengths are fixed and no prefix is shared)."""
        return self.shape(self.trace_speed)

    def trace_offsets_ns(self) -> list[int] | None:
        """The trace's send offsets at ``trace_speed`` (None without a trace)."""
        if self.trace is None:
            return None
        from crossover.workload.trace import read_trace

        return read_trace(self.trace).offsets_ns(self.trace_speed)

    @property
    def replica_urls(self) -> list[str]:
        """The base URLs the load goes to, round robin: ``urls``, or ``url`` alone."""
        return self.urls or [self.url]

    def replica_for(self, index: int) -> int | None:
        """The replica that request ``index`` goes to; ``None`` with one server."""
        return index % len(self.urls) if len(self.urls) > 1 else None

    @property
    def mode(self) -> Literal["concurrency", "rate"]:
        return "concurrency" if self.concurrency is not None else "rate"

    @property
    def arrivals_seed(self) -> int:
        """The seed of an open loop's arrival times."""
        return self.seed if self.arrival_seed is None else self.arrival_seed

    @property
    def warmup(self) -> int:
        return self.warmup_for(self.concurrency, "run")


def level_run(parts: Workload, /, **load: Any) -> RunConfig:
    """The run of one level of a sweep or a capacity search: every workload, limits and
    warm-up key of ``parts`` copied by name (the warm-up count unless ``load`` sets one),
    the level's own keys (URL, dialect, level, budget) from ``load``. A combination
    ``crossover run`` refuses raises the same ``ValidationError`` here, so ``sweep
    --check`` and ``capacity`` refuse it with the same line before anything is measured."""
    keys = [*Workload.model_fields]
    for part in (Limits, Warmup):
        if isinstance(parts, part):
            keys += [*part.model_fields]
    data = {k: getattr(parts, k) for k in keys}
    return RunConfig.model_validate(data | load)


def parse_named_url(text: str, flag: str) -> tuple[str, str, dict[str, str]]:
    """``NAME=URL[,engine=E,model=M]`` (``--target``, ``--reference``, ``--candidate``) ->
    (name, URL as given, settings); a mistake is one ``UsageError`` naming ``flag``."""
    from crossover.errors import UsageError

    if "=" not in text:
        raise UsageError(f"{flag} {text!r}: expected NAME=URL[,engine=E,model=M]")
    name, rest = text.split("=", 1)
    parts = rest.split(",")
    settings: dict[str, str] = {}
    for p in parts[1:]:
        if "=" not in p:
            raise UsageError(f"{flag} {text!r}: expected key=value after the URL, got {p!r}")
        k, v = p.split("=", 1)
        if k.strip() not in ("engine", "model"):
            raise UsageError(f"{flag} {text!r}: unknown setting {k!r} (engine, model)")
        settings[k.strip()] = v.strip()
    return name.strip(), parts[0].strip(), settings


def run_seed(given: int | None) -> int:
    """The run's seed: ``--seed`` as given, else a per-run nonce, so a run's prompts are
    never the prompts an earlier run sent to the same server (a prefix-caching engine
    would serve them from its cache). The run's JSON keeps the seed it used."""
    if given is not None:
        return given
    import secrets

    return secrets.randbelow(2**31)
