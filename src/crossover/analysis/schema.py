"""The sweep file, ``DIR/sweep.json`` (``"schema": "crossover.sweep/1"``), as pydantic models.

The sweep runner writes exactly these models and the report reads them, so the
file format lives in one place (described in docs/interfaces.md). Fields beyond
``runs`` and ``crossovers`` (``targets``, ``server_metrics``, ``gpu``, ``roofline``,
``inconclusive``) are optional: a sweep file with only those two is valid.

A run's ``summary`` is the run summary of ``crossover run --json``
(``"schema": "crossover.run/1"``), :class:`crossover.metrics.summary.RunSummary`.
Read numbers from it by dotted path with :func:`summary_value` or
:meth:`SweepRun.value`, which return ``None`` for anything missing.

Write a sweep file with :meth:`SweepFile.write` (or ``model_dump(by_alias=True,
mode="json")``) so that the ``schema`` key is spelled as docs/interfaces.md says.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_serializer,
    field_validator,
    model_validator,
)

from crossover.files import write_atomic
from crossover.metrics.host import HostFacts as HostFacts
from crossover.metrics.host import HostGpu as HostGpu
from crossover.metrics.host import machine_count
from crossover.metrics.summary import EngineInfo, Problem, RunSummary
from crossover.spec.load import Axis as Axis
from crossover.spec.load import level_label as level_label

SWEEP_SCHEMA = "crossover.sweep/1"
RUN_SCHEMA = "crossover.run/1"


def summary_value(summary: RunSummary | Mapping[str, Any], path: str) -> float | None:
    """A number from a run summary (model or parsed JSON) by dotted path
    (``"ttft_ms.p50"``, ``"throughput.total_tokens_per_s"``, ``"load.concurrency"``).

    Returns ``None`` when any step is missing, null, or not a finite number.
    """
    node: Any = summary
    for key in path.split("."):
        if isinstance(node, BaseModel):
            node = getattr(node, key, None) if key in type(node).model_fields else None
        elif isinstance(node, Mapping):
            node = node.get(key)
        else:
            return None
    if isinstance(node, bool) or not isinstance(node, int | float):
        return None
    value = float(node)
    if value != value or value in (float("inf"), float("-inf")):
        return None
    return value


class TargetInfo(BaseModel):
    """One target of the sweep: the engine as launched, with its effective settings.

    ``settings`` holds what the engine actually ran with (read from its logs,
    ``/props``, ``/server_info`` ...), not only what was asked for, e.g.
    ``{"cuda_graphs": true, "max_num_seqs": 256, "kv_cache_dtype": "fp8"}``.
    """

    name: str
    engine: str | None = None
    url: str | None = None
    model: str | None = None
    version: str | None = None
    settings: dict[str, Any] = Field(default_factory=dict)
    #: the latest engine start (a launched target): when, and seconds to ready
    started_at: str | None = None
    ready_s: float | None = None


class EngineStart(BaseModel):
    """One start of a launched target's engine, as the sweep saw it.

    ``ready_s``: seconds from the first replica's launch to every replica answering its
    health check with its version read (what a user waits before the first request;
    the warm-up requests come after it, in the first level's records). ``stop_s``:
    seconds its stop took (SIGTERM to the process group gone), ``None`` while it is up
    or when the sweep was killed before stopping it.
    """

    target: str
    started_at: str
    ready_s: float
    replicas: int = 1
    stop_s: float | None = None


class ServerMetricsSample(BaseModel):
    """One scrape of the engine's Prometheus endpoint during a run.

    ``t_s`` is seconds since the run started; ``values`` maps a gauge name
    (with labels folded in, e.g. ``vllm:num_requests_running``) to its value.
    """

    t_s: float
    values: dict[str, float | None] = Field(default_factory=dict)


class GpuSample(BaseModel):
    """One NVML sample of one GPU during a run; absent readings are ``None``."""

    t_s: float
    index: int = 0
    util_pct: float | None = None
    mem_used_mib: float | None = None
    power_w: float | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None


class Placement(BaseModel):
    """Where a run's load (and a launched engine) ran: ``local`` (this machine, the
    sweep's own process) or ``ray`` (an actor on a node of a Ray cluster, ``--ray``)."""

    backend: Literal["local", "ray"] = "local"
    node_id: str | None = None
    node_ip: str | None = None


class RunPart(BaseModel):
    """A level measured in part: it stopped sending once what had finished settled the
    question (``crossover decide``, a sequential level)."""

    planned: int | None = None
    why: str = ""


class SweepRun(BaseModel):
    """One run of one target at one level (one repeat): a concurrency level (closed
    loop) or, in a rate sweep, an arrival rate in requests/s (open loop, Poisson);
    the other is ``None``."""

    target: str
    concurrency: int | None = Field(default=None, ge=1)
    rate: float | None = Field(default=None, gt=0)
    repeat: int = Field(default=0, ge=0)
    summary: RunSummary
    server_metrics: list[ServerMetricsSample] | None = None
    gpu: list[GpuSample] | None = None
    #: where it ran; files written before placement was recorded read as local
    placement: Placement = Field(default_factory=Placement)
    #: an open-loop level that served less than arrived, its queue growing through the
    #: level (``crossover.analysis.overload``); ``None`` for a closed-loop level. Worked
    #: out from the summary when a file does not say
    overloaded: bool | None = None
    #: a level ``crossover decide`` stopped sending once it was settled: the requests the
    #: level planned and why it stopped (its summary holds the requests it sent); ``None``
    #: for a whole level
    part: RunPart | None = None

    @field_serializer("placement")
    def _placement(self, p: Placement) -> dict[str, Any]:
        return p.model_dump(exclude_none=True)  # a local run is {"backend": "local"}

    @model_validator(mode="after")
    def _one_level(self) -> SweepRun:
        if (self.concurrency is None) == (self.rate is None):
            raise ValueError("a run has either concurrency or rate")
        if self.rate is not None and self.overloaded is None:
            from crossover.analysis.overload import is_overloaded

            self.overloaded = is_overloaded(self.summary)
        return self

    @property
    def axis(self) -> Axis:
        """What its level measures: ``concurrency`` or ``rate``."""
        return "concurrency" if self.concurrency is not None else "rate"

    @property
    def level(self) -> float:
        """Its position on its axis (an ``int`` for concurrency levels)."""
        return self.concurrency if self.concurrency is not None else (self.rate or 0.0)

    @property
    def verdict(self) -> str:
        """``valid``, ``unverified`` or ``invalid``."""
        return self.summary.verdict

    @property
    def is_valid(self) -> bool:
        """Only valid runs become points of a curve or a crossover."""
        return self.summary.verdict == "valid"

    def value(self, path: str) -> float | None:
        """A number from the summary by dotted path; see :func:`summary_value`."""
        return summary_value(self.summary, path)

    @property
    def problems(self) -> list[Problem]:
        """The problems the run's verification found."""
        return self.summary.problems

    @property
    def engine(self) -> EngineInfo:
        """The engine as the run saw it (``name``, ``url``, ``model``, ``version``)."""
        return self.summary.engine


class Crossover(BaseModel):
    """A claimed crossover: ``below`` leads under ``concurrency``, ``above`` leads over it.

    ``interval`` is where the difference's confidence band crosses zero,
    clipped to ``bracket``, the two measured levels (with significant,
    opposite leads) that enclose it. Along the rate axis of a rate sweep the
    point is ``rate`` (requests/s) and ``concurrency`` is ``None``.
    """

    metric: str
    below: str
    above: str
    concurrency: float | None = None
    interval: tuple[float, float]
    bracket: tuple[int, int] | tuple[float, float] | None = None
    rate: float | None = None


class Inconclusive(BaseModel):
    """The point estimate changes sign between ``bracket`` levels but no lead
    there is significant, so no crossover is claimed."""

    metric: str
    a: str
    b: str
    bracket: tuple[int, int] | tuple[float, float]
    reason: str
    #: ``rate`` when the bracket is in requests/s (a rate sweep)
    axis: Axis = "concurrency"


class RooflineFacts(BaseModel):
    """Facts for the concurrency-1 roofline check of one target.

    ``model_bytes``: bytes of weights read per decoded token. ``bandwidth_gb_s``:
    the GPU's measured (copy) or nominal memory bandwidth in GB/s (1e9 bytes/s).
    ``kv_bytes_per_token`` x ``context_tokens`` adds the KV cache read per token.
    """

    target: str = Field(description="the target these facts are for")
    model_bytes: float = Field(gt=0, description="bytes of weights read per decoded token")
    bandwidth_gb_s: float = Field(
        gt=0, description="the GPU's measured or nominal memory bandwidth, GB/s (1e9 bytes/s)"
    )
    kv_bytes_per_token: float | None = Field(
        default=None, ge=0, description="KV cache bytes per token of context"
    )
    context_tokens: int | None = Field(
        default=None, ge=0, description="tokens of context read per decoded token"
    )
    gpu: str | None = Field(default=None, description="the GPU's name, shown in the report")
    source: str | None = Field(default=None, description="where the figures come from")
    experts: int | None = Field(
        default=None,
        ge=1,
        description="mixture of experts: routed experts per MoE layer (with "
        "experts_per_token and expert_bytes); a step reads only the experts its batch touches",
    )
    experts_per_token: int | None = Field(
        default=None, ge=1, description="mixture of experts: experts each token is routed to"
    )
    expert_bytes: float | None = Field(
        default=None,
        ge=0,
        description="mixture of experts: bytes of all routed experts of all layers "
        "(part of model_bytes)",
    )

    @model_validator(mode="after")
    def _moe_complete(self) -> RooflineFacts:
        moe = (self.experts, self.experts_per_token, self.expert_bytes)
        if any(v is not None for v in moe) and any(v is None for v in moe):
            raise ValueError("experts, experts_per_token and expert_bytes go together")
        if self.expert_bytes is not None and self.expert_bytes > self.model_bytes:
            raise ValueError("expert_bytes is part of model_bytes: it cannot exceed it")
        if (
            self.experts is not None
            and self.experts_per_token is not None
            and self.experts_per_token > self.experts
        ):
            raise ValueError("experts_per_token cannot exceed experts")
        return self


class SweepFile(BaseModel):
    """``DIR/sweep.json``: every run of the sweep and what was found in them."""

    model_config = ConfigDict(populate_by_name=True)

    schema_: Literal["crossover.sweep/1"] = Field(default="crossover.sweep/1", alias="schema")
    targets: list[TargetInfo] = Field(default_factory=list)
    runs: list[SweepRun] = Field(default_factory=list)
    crossovers: list[Crossover] = Field(default_factory=list)
    inconclusive: list[Inconclusive] = Field(default_factory=list)
    roofline: list[RooflineFacts] = Field(default_factory=list)
    started_at: str | None = None
    workload: dict[str, Any] | None = None
    #: every engine start of the sweep's launched targets, in order (resumes included)
    engine_starts: list[EngineStart] = Field(default_factory=list)
    #: the machine the sweep started on, then each other one it resumed on
    hosts: list[HostFacts] = Field(default_factory=list)
    #: the tie margin ``crossovers`` and ``inconclusive`` were read with (``crossover sweep
    #: --tie-margin``): means within this share of each other at a level are level there;
    #: ``None`` (files written before it was kept, or a sweep without one) reads as 0
    tie_margin: float | None = Field(default=None, ge=0.0, lt=1.0)

    @field_validator("roofline", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        return [v] if isinstance(v, dict) else v

    def machines(self) -> int:
        """How many kinds of machine its runs were measured on (``hosts``; 0 before
        sweeps kept them; :meth:`HostFacts.same_kind`)."""
        return machine_count(self.hosts)

    def target_names(self) -> list[str]:
        """Targets in declared order, then any that appear only in ``runs``."""
        names = [t.name for t in self.targets]
        for run in self.runs:
            if run.target not in names:
                names.append(run.target)
        return names

    def target_rank(self) -> Callable[[str], int]:
        """A sort key for target names: each one's place in :meth:`target_names`, a name
        it lacks after them all (the findings' order: target, then level and repeat)."""
        rank = {t: i for i, t in enumerate(self.target_names())}
        return lambda name: rank.get(name, len(rank))

    def axis(self) -> Axis:
        """``rate`` for a rate sweep (every run an arrival rate), else ``concurrency``."""
        rate = any(r.rate is not None for r in self.runs)
        return "rate" if rate and all(r.rate is not None for r in self.runs) else "concurrency"

    def rate_unit(self) -> str:
        """What a rate level counts per second: ``sessions/s`` when the workload is
        multi-turn sessions (an arrival starts a session), else ``requests/s``."""
        return "sessions/s" if (self.workload or {}).get("sessions") else "requests/s"

    def target(self, name: str) -> TargetInfo | None:
        """The declared target of that name, if any."""
        return next((t for t in self.targets if t.name == name), None)

    def to_json(self) -> str:
        """The file's text, keys as docs/interfaces.md spells them."""
        return json.dumps(self.model_dump(by_alias=True, mode="json"), indent=2) + "\n"

    def write(self, path: Path) -> None:
        """Write atomically (``files.write_atomic``: temp file + rename), so an
        interrupted sweep never leaves a half-written file behind."""
        write_atomic(path, self.to_json())

    @classmethod
    def read(cls, path: Path) -> SweepFile:
        """Parse a sweep file; raises ``OSError``, ``ValueError`` or pydantic's
        ``ValidationError`` (the report turns them into one-line usage errors)."""
        return cls.model_validate_json(path.read_bytes())
