"""The SLO: terms such as ``ttft_ms.p99<=500``, a run statistic each and its upper limit.

One type wherever an SLO is held: ``run --slo``, a sweep's ``slo:``, ``capacity --slo``,
``decide --slo`` (one term), a run's goodput limits (``RunConfig.slo``, stored with each
run and its summary) and the capacity file. One syntax, read only at the edge (``parse_slo``
for a flag, the model's validator for a file): ``METRIC.STAT=LIMIT`` terms separated by
commas (``<=`` reads as ``=``); ``METRIC=LIMIT`` is short for ``METRIC.max=LIMIT``, every
request within the limit; a mapping (``{ttft_ms.p99: 500}``) reads the same way.

Each place writes the shape it always wrote: the capacity file a list of terms, a sweep
its text (``SloText``), a run's goodput limits a mapping of metric to limit
(``SloLimits``). A request counts as goodput when it meets each per-request metric's
tightest limit (``Slo.per_request``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, RootModel, model_validator

from crossover.errors import UsageError

SloMetric = Literal["ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "queue_ms"]
SloStat = Literal["mean", "p50", "p90", "p95", "p99", "max"]
#: the metrics a single request can be held to (the run's goodput counts those met)
PER_REQUEST = ("ttft_ms", "tpot_ms", "e2e_ms")


class SloTerm(BaseModel):
    """``metric.stat <= limit``, e.g. TTFT p99 at most 500 ms."""

    model_config = ConfigDict(frozen=True)

    metric: SloMetric
    stat: SloStat
    limit: float = Field(gt=0)

    @property
    def path(self) -> str:
        """``ttft_ms.p99``: where the run summary holds the statistic."""
        return f"{self.metric}.{self.stat}"

    def holds(self, value: float | None) -> bool:
        """Whether a measured ``value`` is within the limit (nothing measured: it is not)."""
        return value is not None and value <= self.limit

    def __str__(self) -> str:
        return f"{self.path}<={self.limit:g}"


def _number(x: float) -> str:
    # ``500`` rather than ``500.0``, as the text was always written; exact where ``g`` is not
    short = f"{x:g}"
    return short if float(short) == x else repr(x)


def _terms(text: str) -> list[SloTerm]:
    """``ttft_ms.p99=500,tpot_ms.p50=50`` -> its terms; a mistake is one ``ValueError``.
    ``ttft_ms=500,,tpot_ms=50`` and ``ttft_ms=500,`` are refused, not read without the
    empty item (as ``errors.parse_names`` refuses ``vllm,,sglang``)."""
    parts = [p.strip() for p in text.split(",")]
    if any(parts) and not all(parts):
        raise ValueError(f"empty item in {text!r}; give terms separated by commas")
    terms: list[SloTerm] = []
    for part in filter(None, parts):
        key, sep, value = part.replace("<=", "=").partition("=")
        metric, dot, stat = key.strip().partition(".")
        if not sep:
            raise ValueError(f"expected METRIC.STAT=LIMIT (ttft_ms.p99=500), got {part!r}")
        if not dot:
            stat = "max"  # METRIC=LIMIT: every request within the limit
        if metric not in get_args(SloMetric):
            raise ValueError(f"unknown metric {metric!r}; use {', '.join(get_args(SloMetric))}")
        if stat not in get_args(SloStat):
            raise ValueError(f"unknown statistic {stat!r}; use {', '.join(get_args(SloStat))}")
        try:
            limit = float(value)
        except ValueError:
            raise ValueError(f"{key.strip()}: not a number: {value.strip()!r}") from None
        if not limit > 0 or limit == float("inf"):
            raise ValueError(f"{key.strip()}: the limit must be a positive number")
        terms.append(SloTerm.model_validate({"metric": metric, "stat": stat, "limit": limit}))
    if not terms:
        raise ValueError("give at least one term, e.g. ttft_ms.p99=500")
    return _once(terms)


def _once(terms: list[SloTerm]) -> list[SloTerm]:
    paths = [t.path for t in terms]
    dup = sorted({p for p in paths if paths.count(p) > 1})
    if dup:
        raise ValueError(f"{dup[0]} given twice")
    return terms


class Slo(RootModel[tuple[SloTerm, ...]]):
    """The terms, in the order given; empty: no SLO. Read from text, a mapping or a list
    of terms; written as a list of terms unless the field says otherwise (``SloText``,
    ``SloLimits``)."""

    model_config = ConfigDict(frozen=True)

    root: tuple[SloTerm, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _read(cls, data: Any) -> Any:
        if isinstance(data, str):
            data = _terms(data)
        elif isinstance(data, Mapping):
            data = _terms(",".join(f"{k}={v}" for k, v in data.items())) if data else []
        return data

    @model_validator(mode="after")
    def _each_once(self) -> Slo:
        _once(list(self.root))
        return self

    def __iter__(self) -> Iterator[SloTerm]:  # type: ignore[override]
        return iter(self.root)

    def __len__(self) -> int:
        return len(self.root)

    def __bool__(self) -> bool:
        return bool(self.root)

    def __str__(self) -> str:
        return ", ".join(str(t) for t in self.root)

    def text(self) -> str:
        """The flag's syntax: ``ttft_ms.p99=500,tpot_ms.p50=50``."""
        return ",".join(f"{t.path}={_number(t.limit)}" for t in self.root)

    def limits(self) -> dict[str, float]:
        """``{ttft_ms: 500, ttft_ms.p99: 800}``: a ``max`` term under its metric's name."""
        return {(t.metric if t.stat == "max" else t.path): t.limit for t in self.root}

    def per_request(self) -> Slo:
        """What a single request must meet to count as goodput: the tightest limit per
        metric that a request has (TTFT, TPOT, end to end), as ``max`` terms."""
        tightest: dict[str, float] = {}
        for t in self.root:
            if t.metric in PER_REQUEST:
                tightest[t.metric] = min(tightest.get(t.metric, t.limit), t.limit)
        return Slo(
            tuple(
                SloTerm.model_validate({"metric": m, "stat": "max", "limit": x})
                for m, x in tightest.items()
            )
        )

    @property
    def is_per_request(self) -> bool:
        """Every term holds each request: a per-request metric's ``max``."""
        return all(t.metric in PER_REQUEST and t.stat == "max" for t in self.root)


#: an SLO written as its text (a sweep's ``slo:``, ``sweep.json``'s workload)
SloText = Annotated[Slo, PlainSerializer(lambda s: s.text(), return_type=str)]
#: an SLO written as a mapping of metric to limit (a run's goodput limits)
SloLimits = Annotated[Slo, PlainSerializer(lambda s: s.limits(), return_type=dict[str, float])]


def parse_slo(text: str, flag: str = "--slo") -> Slo:
    """``ttft_ms.p99=500,tpot_ms.p50=50`` from ``flag``; a mistake is a one-line
    ``UsageError`` naming the flag."""
    try:
        return Slo(tuple(_terms(text)))
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from None
