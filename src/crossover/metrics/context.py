"""What a run asked for: stored beside its records, so its summary can be recomputed."""

from __future__ import annotations

from pydantic import BaseModel, Field

from crossover.metrics.summary import ClientFloor, EngineInfo
from crossover.spec.slo import Slo, SloLimits


class RunContext(BaseModel):
    """What the run asked for; stored beside the records."""

    model_config = {"frozen": True}

    mode: str
    output_tokens: int
    endpoint: str
    engine: EngineInfo
    started_at: str
    concurrency: int | None = None
    rate_rps: float | None = None
    input_tokens: int | None = None
    prompts: str = "synthetic"
    seed: int = 0
    #: open loop: the seed of the arrival times, where not ``seed`` (a sweep's repeat)
    arrival_seed: int | None = None
    tokenizer: str | None = None
    #: the dialect reports a finish reason (Triton's stream does not)
    expects_finish_reason: bool = True
    allowed_failures: int = 0
    #: what one request had to meet to count as goodput (``RunConfig.slo``)
    slo: SloLimits = Field(default_factory=Slo)
    client_floor: ClientFloor | None = None
    #: flag latency percentiles within this multiple of the client floor
    floor_multiple: float = 3.0
    workers: int = 1
    #: the client that sent the requests (``RunConfig.transport``); None: not recorded
    transport: str | None = None
    #: tokens the chat template adds around a prompt, counted with the tokenizer (chat
    #: endpoint only; None where the tokenizer cannot apply the template)
    chat_template_tokens: int | None = None
    #: with sessions on the chat endpoint: the template's tokens around turn t's history
    #: (its 2t + 1 messages, each with a role header), by turn; None where not counted
    chat_template_by_turn: list[int] | None = None
    #: the per-request shape (``RunConfig.workload_shape``): input_lengths,
    #: output_lengths, shared_prefix in compact form; empty when lengths are fixed
    shape: dict[str, str] = Field(default_factory=dict)
    #: turns per session (request i is turn i mod turns); None: no sessions
    turns: int | None = None
