"""SLO terms such as ``ttft_ms.p99=500``: a run summary statistic and its upper limit.

One syntax for every command that takes ``--slo`` (``run``, ``sweep``, ``capacity``):
``METRIC.STAT=LIMIT`` terms separated by commas. ``METRIC=LIMIT`` (how ``run --slo``
was written before) is short for ``METRIC.max=LIMIT``: every request within the limit.
A request counts as goodput when it meets each per-request metric's tightest limit.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from crossover.analysis.schema import summary_value
from crossover.errors import UsageError
from crossover.metrics.summary import RunSummary

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
        return f"{self.metric}.{self.stat}"

    def measured(self, summary: RunSummary) -> float | None:
        return summary_value(summary, self.path)

    def __str__(self) -> str:
        return f"{self.path}<={self.limit:g}"


def parse_slo(text: str) -> list[SloTerm]:
    """``ttft_ms.p99=500,tpot_ms.p50=50``; a mistake raises a one-line ``UsageError``."""
    terms: list[SloTerm] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        metric, dot, stat = key.strip().partition(".")
        if not sep:
            raise UsageError(f"--slo: expected METRIC.STAT=LIMIT (ttft_ms.p99=500), got {part!r}")
        if not dot:
            stat = "max"  # METRIC=LIMIT: every request within the limit
        if metric not in get_args(SloMetric):
            raise UsageError(
                f"--slo: unknown metric {metric!r}; use {', '.join(get_args(SloMetric))}"
            )
        if stat not in get_args(SloStat):
            raise UsageError(
                f"--slo: unknown statistic {stat!r}; use {', '.join(get_args(SloStat))}"
            )
        try:
            limit = float(value)
        except ValueError:
            raise UsageError(f"--slo: {key}: not a number: {value!r}") from None
        if not limit > 0 or limit == float("inf"):
            raise UsageError(f"--slo: {key}: the limit must be a positive number")
        terms.append(SloTerm.model_validate({"metric": metric, "stat": stat, "limit": limit}))
    if not terms:
        raise UsageError("--slo: give at least one term, e.g. ttft_ms.p99=500")
    paths = [t.path for t in terms]
    dup = sorted({p for p in paths if paths.count(p) > 1})
    if dup:
        raise UsageError(f"--slo: {dup[0]} given twice")
    return terms


def per_request_limits(terms: list[SloTerm]) -> dict[str, float]:
    """What a single request must meet to count as goodput: the tightest limit per
    metric that a request has (TTFT, TPOT, end to end)."""
    out: dict[str, float] = {}
    for t in terms:
        if t.metric in PER_REQUEST:
            out[t.metric] = min(out.get(t.metric, t.limit), t.limit)
    return out
