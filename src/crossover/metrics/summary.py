"""The run summary: the JSON of ``crossover run --json`` (``crossover.run/1``).

Derived from the raw records and recomputable from them (``crossover summarize``).
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, Field

from crossover.metrics.host import HostFacts
from crossover.spec.slo import SloLimits

Verdict = Literal["valid", "unverified", "invalid"]
Severity = Literal["error", "warning", "info"]

ProblemCode = Literal[
    "short_completion",
    "long_completion",
    "finish_reason",
    "usage_missing",
    "usage_mismatch",
    "prompt_tokens_mismatch",
    "http_error",
    "timeout",
    "stream_truncated",
    "connection_error",
    "malformed_event",
    "multi_token_chunks",
    "client_floor",
    "engine_died",
    # a Ray node running the target's work died mid-level (crossover sweep --ray)
    "node_lost",
    # second witnesses (docs/metrics.md, "Witnesses")
    "text_tokens_mismatch",
    "engine_tokens_mismatch",
    "engine_counter_reset",
    # a measured prompt sent before in the run: a prefix cache may have served it
    "prompts_reused",
    # a request sent again after a reused idle connection closed before any response
    "requests_retried",
    # the server closed its connection after each streamed response: requests went with
    # Connection: close, each on a connection of its own
    "server_closes_connections",
    # protocol deviations
    "not_streamed",
    "content_type",
    "error_event",
    "undecodable",
    "event_too_large",
    "data_after_done",
    "warmup_failed",
    # parts of the response checked against each other (docs/metrics.md, "Witnesses")
    "prompt_tokens_inflated",
    "usage_total_mismatch",
    "logprobs_mismatch",
    "extra_choices",
    "data_after_finish",
    # timing that is not the engine's (docs/metrics.md, "Timing")
    "grouped_delivery",
    "client_made_percentiles",
    # capacity searches: an open-loop level whose backlog kept growing
    "overloaded",
]
#: every code a run summary may carry (docs/metrics.md names each)
PROBLEM_CODES: tuple[str, ...] = get_args(ProblemCode)


class Stats(BaseModel):
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    min: float | None = None
    max: float | None = None
    count: int = 0


class Problem(BaseModel):
    code: ProblemCode
    severity: Severity
    count: int
    message: str


def add_problem(
    out: list[Problem], code: ProblemCode, severity: Severity, count: int, message: str
) -> None:
    """Append a problem, unless nothing has it (``count`` 0)."""
    if count:
        out.append(Problem(code=code, severity=severity, count=count, message=message))


class RequestCounts(BaseModel):
    sent: int
    succeeded: int
    failed: int
    matched: int
    warmup: int = 0
    warmup_failed: int = 0
    #: measured requests sent again after a reused idle pooled connection closed before
    #: any response (each retry is in its record: ``retries``, ``retry_reasons``)
    retries: int = 0


class Load(BaseModel):
    mode: Literal["concurrency", "rate"]
    concurrency: int | None = None
    rate_rps: float | None = None
    #: open loop: requests sent per second, from the first send to the last (the arrivals
    #: as they came: a Poisson schedule's own rate is ``rate_rps`` only on average); None
    #: for a closed loop and in summaries stored before it was recorded
    arriving_rps: float | None = None
    #: open loop: the seed of the arrival times (a sweep gives each repeat its own, the
    #: same for every target); None where it was the prompts' seed (``workload.seed``)
    arrival_seed: int | None = None
    achieved_concurrency: float | None = None
    workers: int = 1
    #: the client transport that sent the requests (aiohttp or lean); None for runs
    #: recorded before it was
    transport: str | None = None


class Throughput(BaseModel):
    total_tokens_per_s: float | None = None
    output_tokens_per_s: float | None = None
    requests_per_s: float | None = None


class ShortLevel(BaseModel):
    """Why an open-loop level had no steady state (``crossover.metrics.window.short_level``):
    its arrivals lasted under ``SHORT_LEVEL_REQUEST_TIMES`` request times, or it served
    more than ``SERVED_OVER_ARRIVING`` times the arrival rate. Its window's throughputs are
    kept, but they are ramp-up and drain, not a steady rate."""

    sending_s: float = Field(description="from the first send to the last")
    e2e_p50_s: float | None = Field(None, description="E2E p50 of the succeeded requests")
    #: served requests/s over the arriving ones (the window's count); None where unknown
    served_share: float | None = None
    #: how long the arrivals should last for a steady state by the request times alone:
    #: K times the E2E p50 (``crossover.metrics.window.needed_sending_s`` also sizes it on
    #: a window that served more than arrived, and is what the tools print)
    needed_s: float | None = None
    reason: str = ""


class Window(BaseModel):
    """The steady window, relative to the first send: closed loop, while the target
    concurrency is in flight; open loop, from the first completion to the last."""

    start_s: float | None = None
    end_s: float | None = None
    duration_s: float | None = None
    steady: bool = Field(False, description="False when the run never reached its target")
    #: what opened it: ``target_in_flight``, ``first_completion`` (open loop) or
    #: ``first_send`` (no steady window: the whole run); None in summaries stored before
    #: it was recorded (an open-loop one then ran from the first send to the last)
    opened_by: str | None = None
    #: an open-loop level too short for a steady state (``steady`` is then False); None
    #: when it was long enough, for a closed loop, and in summaries stored before it was
    short: ShortLevel | None = None


class Waves(BaseModel):
    """TTFT of a closed-loop level split by when requests were sent.

    The first wave is the ``concurrency`` requests sent together at the level's start; the
    later ones are sent as earlier ones finish, so how bunched they arrive depends on how
    evenly the engine finished the first wave. The level's TTFT pools both: two engines can
    swap places on it without either prefilling faster. The first wave meets every engine
    with the same arrivals (docs/metrics.md, "TTFT by wave").
    """

    first_ttft_ms: Stats = Field(default_factory=Stats)
    later_ttft_ms: Stats = Field(default_factory=Stats)
    first_requests: int = 0
    later_requests: int = 0
    later_sent_over_s: float | None = Field(
        None, description="from the first to the last send after the first wave"
    )


class Goodput(BaseModel):
    #: what one request had to meet (``RunConfig.slo``): a mapping of metric to limit
    slo: SloLimits
    requests_per_s: float | None = None
    fraction: float | None = None


class EngineInfo(BaseModel):
    name: str
    url: str
    model: str
    version: str | None = None


class WorkloadInfo(BaseModel):
    input_tokens: int | None
    output_tokens: int
    endpoint: Literal["completions", "chat"]
    prompts: str = "synthetic"
    seed: int = 0
    tokenizer: str | None = None
    #: per-request lengths and shared prefixes in compact form (``input_lengths``,
    #: ``output_lengths``, ``shared_prefix``); empty: every request the same lengths.
    #: ``input_tokens`` / ``output_tokens`` are then the distributions' nominal lengths
    shape: dict[str, str] = Field(default_factory=dict)


class TurnStats(BaseModel):
    """One turn of multi-turn sessions: its TTFT and prompt length (growing with history)."""

    turn: int
    ttft_ms: Stats = Field(default_factory=Stats)
    prompt_tokens: Stats = Field(default_factory=Stats)


class PrefixCache(BaseModel):
    """Prompt tokens the engine says it served from its prefix cache, over the measured
    requests that said (``usage.prompt_tokens_details.cached_tokens``, or llama.cpp's
    ``timings.cache_n``)."""

    requests_reporting: int = 0
    cached_tokens: int = 0
    prompt_tokens: int = 0
    #: cached / prompt tokens of the requests that reported both
    hit_fraction: float | None = None


class ClientFloor(BaseModel):
    """The client's own delivery delay at this load (from ``crossover calibrate``)."""

    delivery_p50_ms: float | None = None
    delivery_p99_ms: float | None = None
    source: str | None = None


class EngineCounter(BaseModel):
    """The engine's own generated-token counter, read just before and just after a level
    (so warm-up requests are inside it)."""

    name: str
    before: float
    #: ``before`` plus the rise summed per series over every reading (older runs: the
    #: last reading, read only before and after)
    after: float
    #: series that were reset during the level (went down, or a new ``_created``): the
    #: tokens before each reset are partly lost, so the counter is no witness then
    resets: int = 0
    #: readings taken (0: a run stored before the counter was read as a series)
    scrapes: int = 0

    @property
    def generated(self) -> float:
        return self.after - self.before


class OutputWitnesses(BaseModel):
    """Output tokens of the succeeded measured requests, summed per witness; ``None``
    where some request lacks that witness. ``stream_text`` sums the
    ``stream_text_requests`` requests whose text was re-tokenized (every one with usage
    when a tokenizer is at hand), ``logprobs`` the ``logprobs_requests`` whose every
    token-carrying chunk had logprobs."""

    usage: int | None = None
    stream_chunks: int | None = None
    stream_text: int | None = None
    stream_text_requests: int = 0
    logprobs: int | None = None
    logprobs_requests: int = 0


class WitnessCheck(BaseModel):
    """One witness asked about one count: over how many requests (a level-wide witness,
    the engine's counter, counts once), how many agreed and how many contradicted it
    (the rest neither: a lower bound that the count is above, beyond its tolerance)."""

    count: Literal["output_tokens", "prompt_tokens", "total_tokens"]
    witness: str
    asked: int
    agreed: int
    disagreed: int = 0


class PromptWitnesses(BaseModel):
    """Prompt tokens of the succeeded measured requests: the server's and the tool's."""

    usage: int | None = None
    prompts: int | None = None


class EngineWitness(BaseModel):
    """The engine's counter against what the level's succeeded requests report."""

    counter: str
    generated: float
    claimed: int


class Witnesses(BaseModel):
    output_tokens: OutputWitnesses = Field(default_factory=OutputWitnesses)
    prompt_tokens: PromptWitnesses = Field(default_factory=PromptWitnesses)
    engine: EngineWitness | None = None
    #: every witness asked, and what it said
    checks: list[WitnessCheck] = Field(default_factory=list)
    #: counts that rest on the server's word alone (no witness but usage was asked:
    #: ``"output tokens"``, ``"prompt tokens"``); the verdict line names them
    server_word: list[str] = Field(default_factory=list)


class Delivery(BaseModel):
    """How the token-carrying events of the succeeded requests arrived: ``grouped`` is how
    many came in the same delivery as the event before them (the same read, or within
    ``DELIVERY_GAP_MS`` of it), of the ``events`` after each request's first."""

    events: int = 0
    grouped: int = 0
    grouped_fraction: float | None = None


class LoopLag(BaseModel):
    """The client event loop's own lag during the measured load (ms): how late a probe
    sleeping ``interval_ms`` woke up. Chunks that arrived while the loop was held were
    stamped that late. With several workers, the probes of all of them pooled."""

    interval_ms: float
    samples: int = 0
    mean_ms: float | None = None
    p50_ms: float | None = None
    p90_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    max_ms: float | None = None
    #: wake-ups more than 1 ms late
    over_1ms: int = 0
    workers: int = 1


class RunSummary(BaseModel):
    schema_: Literal["crossover.run/1"] = Field("crossover.run/1", alias="schema")
    verdict: Verdict
    problems: list[Problem]
    requests: RequestCounts
    load: Load
    throughput: Throughput
    whole_run: Throughput = Field(default_factory=Throughput)
    window: Window = Field(default_factory=Window)
    ttft_ms: Stats
    tpot_ms: Stats
    itl_ms: Stats
    chunk_gap_ms: Stats
    e2e_ms: Stats
    queue_ms: Stats
    goodput: Goodput | None = None
    #: closed-loop runs on one clock with more requests than the concurrency
    waves: Waves | None = None
    client_floor: ClientFloor | None = None
    #: measured during the run (absent in summaries recomputed from records alone)
    client_loop: LoopLag | None = None
    #: percentiles the client's own loop lag could have made (``itl_ms.p99``, ...)
    client_made: list[str] = Field(default_factory=list)
    delivery: Delivery = Field(default_factory=Delivery)
    prompt_tokens: Stats = Field(default_factory=Stats)
    #: output lengths asked for, over the measured requests (they vary with a shape)
    expected_output_tokens: Stats = Field(default_factory=Stats)
    prefix_cache: PrefixCache | None = None
    #: per turn of multi-turn sessions (empty without sessions)
    turns: list[TurnStats] = Field(default_factory=list)
    witnesses: Witnesses = Field(default_factory=Witnesses)
    engine: EngineInfo
    workload: WorkloadInfo
    started_at: str
    duration_s: float
    #: the machine crossover ran on (``crossover run``'s JSON; a sweep keeps its own)
    host: HostFacts | None = None

    model_config = {"populate_by_name": True}

    def to_json_dict(self) -> dict[str, object]:
        return self.model_dump(mode="json", by_alias=True)
