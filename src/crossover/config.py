"""Validated settings, built once at the edge (CLI or config file) and passed down."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

from pydantic import BaseModel, Field, field_validator, model_validator

from crossover import defaults
from crossover.dialects import DIALECTS
from crossover.errors import FieldError, unknown_choice
from crossover.transport import Transport
from crossover.transport.sse import MAX_EVENT_BYTES
from crossover.workload.sessions import Sessions
from crossover.workload.shape import (
    LengthDist,
    SharedPrefix,
    parse_length,
    parse_shared_prefix,
    shape_specs,
    trace_specs,
)


def base_url(v: str) -> str:
    """The server's base URL (``http://host:8000``), checked: crossover adds the API path
    (``/v1/completions``, ``/v2/models/...``) itself, so a URL ending in one would 404."""
    p = urlparse(v)
    if p.scheme not in ("http", "https") or not p.hostname:
        raise ValueError(f"not an http(s) URL: {v!r}")
    v = v.rstrip("/")
    last = p.path.rstrip("/").rsplit("/", 1)[-1]
    if last in ("v1", "v2"):
        raise ValueError(
            f"{v!r} ends in /{last}: give the server's base URL, {v.removesuffix('/' + last)!r}"
            " (crossover adds the API path itself)"
        )
    return v


class TimeoutsConfig(BaseModel):
    """Per-request limits; each ends the request as ``timeout`` (``crossover run --help``)."""

    model_config = {"extra": "forbid"}  # a typo (conect_s) must not pass as the default

    connect_s: float = Field(
        10.0,
        gt=0,
        description="a new connection: DNS and the TCP (and TLS) connect; inside "
        "first_token_s. The connections opened before the load (a GET of /health each) "
        "are given up after twice this",
    )
    first_token_s: float = Field(
        300.0,
        gt=0,
        description="from just before the request is sent to the first chunk carrying "
        "generated text",
    )
    gap_s: float = Field(60.0, gt=0, description="between chunks after the first token")
    total_s: float = Field(1800.0, gt=0, description="from send to the end of the stream")


def normalize_shape(data: Any) -> Any:
    """Lengths and prefixes in their compact forms (``crossover.workload.shape``), for
    ``RunConfig`` and the sweep's YAML: ``output_tokens: uniform:64-512`` means
    ``output_lengths``, and ``output_tokens`` becomes that distribution's nominal length
    (its mean); the same for ``input_tokens``."""
    if not isinstance(data, dict):
        return data
    data = dict(data)
    given: dict[str, str] = {}  # the key each distribution was given under, for its errors
    for n_key, d_key in (("output_tokens", "output_lengths"), ("input_tokens", "input_lengths")):
        v = data.get(n_key)
        given[d_key] = d_key
        if isinstance(v, str) and v.strip().isdigit():
            data[n_key] = int(v)
        elif isinstance(v, str | dict):
            if data.get(d_key) is not None:
                raise ValueError(f"give {n_key} as a distribution or {d_key}, not both")
            data[d_key], data[n_key] = v, None
            given[d_key] = n_key
    for key in ("input_lengths", "output_lengths"):
        if data.get(key) is not None:
            try:
                data[key] = parse_length(data[key])
            except ValueError as exc:
                raise FieldError(given[key], str(exc)) from None
    if data.get("shared_prefix") is not None:
        try:
            data["shared_prefix"] = parse_shared_prefix(data["shared_prefix"])
        except ValueError as exc:
            raise FieldError("shared_prefix", str(exc)) from None
    out = data.get("output_lengths")
    if data.get("output_tokens") is None and isinstance(out, LengthDist):
        data["output_tokens"] = out.nominal()
    inp = data.get("input_lengths")
    if isinstance(inp, LengthDist):
        data["input_tokens"] = inp.nominal()
    return data


def shape_conflict(
    *,
    trace: Path | None,
    sessions: Sessions | None,
    prompts_file: Path | None,
    input_lengths: LengthDist | None,
    output_lengths: LengthDist | None,
    shared_prefix: SharedPrefix | None,
) -> str | None:
    """Why these workload parts cannot go together (None: they can), for ``RunConfig`` and
    the sweep's YAML alike."""
    if trace is not None and (
        prompts_file or input_lengths or output_lengths or shared_prefix or sessions
    ):
        return (
            "a trace sets every request's lengths and prefix blocks: not with a prompt file, "
            "input_lengths, output_lengths, shared_prefix or sessions"
        )
    if sessions is not None and (prompts_file or shared_prefix):
        return (
            "sessions build their prompts from their own history: not with a prompt file or "
            "shared_prefix"
        )
    if prompts_file is not None and (input_lengths or shared_prefix):
        return "input_lengths and shared_prefix shape synthetic prompts: not with a prompt file"
    if output_lengths is not None and output_lengths.dist == "dataset" and prompts_file is None:
        return "output lengths dataset:MAX are the prompt file's replies: give a prompt file"
    return None


def trace_lengths(data: Any) -> Any:
    """With ``trace``: its mean lengths stand for it where one number is shown (the nominal
    ``input_tokens``, and ``output_tokens`` unless given; each request still gets its own),
    for ``RunConfig``, the sweep's YAML and capacity alike."""
    if not isinstance(data, dict) or data.get("trace") is None:
        return data
    from crossover.workload.trace import read_trace

    trace = read_trace(Path(data["trace"]))
    data = {**data, "input_tokens": trace.mean_input()}
    if data.get("output_tokens") is None:
        data["output_tokens"] = trace.mean_output()
    return data


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


class RunConfig(BaseModel):
    """One load level against one endpoint (``crossover run``)."""

    model_config = {"extra": "forbid"}

    url: str
    #: base URLs of identical replicas (``url`` is the first): request i goes to replica
    #: i mod N; empty for one server
    urls: list[str] = Field(default_factory=list)
    engine: str = "openai"
    model: str
    endpoint: Literal["completions", "chat"] = "completions"
    concurrency: int | None = Field(None, ge=1, le=100_000)
    rate_rps: float | None = Field(None, gt=0)
    max_in_flight: int | None = Field(None, ge=1)
    requests: int | None = Field(None, ge=1)
    duration_s: float | None = Field(None, gt=0)
    warmup_requests: int | None = Field(None, ge=0)
    output_tokens: int = Field(..., ge=1, le=1_000_000)
    input_tokens: int | None = Field(200, ge=1, le=10_000_000)
    #: per-request lengths drawn from a distribution (``crossover.workload.shape``); each
    #: request is still forced to, and verified against, its own output length
    input_lengths: LengthDist | None = None
    output_lengths: LengthDist | None = None
    shared_prefix: SharedPrefix | None = None
    #: multi-turn sessions (``crossover.workload.sessions``): each turn carries the history
    sessions: Sessions | None = None
    #: replay this trace (``crossover.workload.trace``): its arrival times (scaled by
    #: ``trace_speed``), lengths and shared blocks; an open loop at its own pace
    trace: Path | None = None
    trace_speed: float = Field(1.0, gt=0, le=1e6)
    trace_block_tokens: int = Field(512, ge=1, le=1_000_000)
    prompts_file: Path | None = None
    tokenizer: str | None = None
    seed: int = 0
    #: an open loop's arrival times from this seed instead of ``seed`` (a sweep's repeats
    #: each draw their own arrivals, the same for every target)
    arrival_seed: int | None = None
    timeouts: TimeoutsConfig = Field(default_factory=TimeoutsConfig)
    allowed_failures: int = Field(0, ge=0)
    slo: dict[str, float] = Field(default_factory=dict)
    api_key_env: str | None = None
    workers: int = Field(1, ge=1, le=256)
    #: the client that sends the requests (``crossover.transport.client``); https URLs go
    #: through aiohttp whichever is chosen
    transport: Transport = "aiohttp"
    #: one SSE event (or a line still waiting for its end) may hold at most this much
    max_event_bytes: int = Field(MAX_EVENT_BYTES, ge=1024, le=1024**3)

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

    @field_validator("engine")
    @classmethod
    def _engine(cls, v: str) -> str:
        if v not in DIALECTS:
            raise ValueError(unknown_choice("engine", v, DIALECTS))
        return v

    @field_validator("slo")
    @classmethod
    def _slo(cls, v: dict[str, float]) -> dict[str, float]:
        for k, x in v.items():
            if k not in ("ttft_ms", "tpot_ms", "e2e_ms"):
                raise ValueError(f"unknown SLO {k!r}; use ttft_ms, tpot_ms, e2e_ms")
            if x <= 0:
                raise ValueError(f"SLO {k} must be positive")
        return v

    @model_validator(mode="after")
    def _load(self) -> RunConfig:
        if (self.concurrency is None) == (self.rate_rps is None):
            raise ValueError("give exactly one of --concurrency or --rate")
        if self.requests is None and self.duration_s is None:
            self.requests = defaults.run_requests(self.concurrency)
        if self.requests is not None and self.duration_s is not None:
            raise ValueError("give --requests or --duration-s, not both")
        if self.engine == "triton" and self.endpoint == "chat":
            raise ValueError("the triton dialect has no chat endpoint")
        if self.urls and self.urls[0] != self.url:
            raise ValueError("url must be the first of urls")
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
        if self.sessions is not None and self.duration_s is not None:
            raise ValueError("sessions count requests: --requests, not --duration-s")
        return self

    def workload_shape(self) -> dict[str, str]:
        """The per-request shape in compact form (recorded with each run; {} when the
        lengths are fixed and no prefix is shared)."""
        out = shape_specs(
            input_lengths=self.input_lengths,
            output_lengths=self.output_lengths,
            shared_prefix=self.shared_prefix,
            sessions=self.sessions,
        )
        return out | trace_specs(self.trace, self.trace_block_tokens, self.trace_speed)

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
        if self.warmup_requests is not None:
            return self.warmup_requests
        return defaults.run_warmup(self.concurrency)


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


def parse_kv(text: str, what: str) -> dict[str, str]:
    """``a=1,b=2`` -> dict; the error names the flag."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            raise ValueError(f"{what}: expected key=value, got {part!r}")
        k, v = part.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def run_seed(given: int | None) -> int:
    """The run's seed: ``--seed`` as given, else a per-run nonce, so a run's prompts are
    never the prompts an earlier run sent to the same server (a prefix-caching engine
    would serve them from its cache). The run's JSON keeps the seed it used."""
    if given is not None:
        return given
    import secrets

    return secrets.randbelow(2**31)
