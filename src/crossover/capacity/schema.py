"""``crossover capacity --json`` (``"schema": "crossover.capacity/1"``) as pydantic models.

``max_rate_rps`` is the highest measured rate that met every SLO term (``None`` if none
did); ``interval`` is ``[max_rate_rps, the lowest measured rate that missed]`` (either end
``None`` when the search ran into ``--min-rate`` or ``--max-rate``); ``levels`` holds every
rate tried, in the order tried, with its run summary and each term's measured value.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from crossover.capacity.search import Verdict
from crossover.metrics.summary import RunSummary
from crossover.spec.slo import Slo

CAPACITY_SCHEMA = "crossover.capacity/1"


class SloCheck(BaseModel):
    term: str
    limit: float
    measured: float | None
    met: bool


class CapacityLevel(BaseModel):
    rate_rps: float
    #: with a trace: its speed factor at this rate (rate / the trace's own mean rate)
    trace_speed: float | None = None
    met: bool
    #: stopped early: the requests in flight kept growing over the level
    overloaded: bool = False
    checks: list[SloCheck] = Field(default_factory=list)
    #: wall time spent on the level, warm-up included
    seconds: float
    run_id: str | None = None
    summary: RunSummary | None = None
    #: measured by an earlier search of the same settings in this folder (resumed)
    kept: bool = False

    def invalid_reason(self) -> str | None:
        """Why the level's run is invalid, in a few words (``None``: it is not, or it was
        stopped as overloaded, a measured miss). An invalid level measured nothing the
        SLO can be judged on; the search counts it as a miss, and says so."""
        s = self.summary
        if s is None or s.verdict != "invalid" or self.overloaded:
            return None
        errors = [p for p in s.problems if p.severity == "error" and p.code != "overloaded"]
        if errors:
            more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
            return errors[0].message + more
        if s.requests.sent == 0:
            return "no request was sent within the level (too short for its rate)"
        if s.requests.sent == 1:
            return "its one request failed"
        return f"none of its {s.requests.sent} requests succeeded"


class CapacityFile(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    schema_: Literal["crossover.capacity/1"] = Field(default="crossover.capacity/1", alias="schema")
    target: dict[str, Any]
    #: written as a list of terms (``metric``, ``stat``, ``limit``)
    slo: Slo
    precision: float
    verdict: Verdict
    max_rate_rps: float | None
    interval: tuple[float | None, float | None]
    #: requests/s meeting every per-request term at the capacity level
    goodput_rps: float | None = None
    levels: list[CapacityLevel]
    seconds: float
    workload: dict[str, Any] = Field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(self.model_dump(by_alias=True, mode="json"), indent=2) + "\n"


class CapacitySet(BaseModel):
    """``crossover capacity --config sweep.yaml``: one search per target, side by side;
    each entry is a whole ``crossover.capacity/1`` document (``target.name`` set)."""

    model_config = ConfigDict(populate_by_name=True)

    schema_: Literal["crossover.capacity/1"] = Field(default="crossover.capacity/1", alias="schema")
    targets: list[CapacityFile]

    def to_json(self) -> str:
        return json.dumps(self.model_dump(by_alias=True, mode="json"), indent=2) + "\n"
