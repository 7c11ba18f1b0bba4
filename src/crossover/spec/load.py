"""The load part: one level (a concurrency or a rate) and the warm-up before it.

``Level`` is how a level travels from a sweep's list to the run that measures it; the
warm-up rule (how many requests fill the slots when none are given) is
``crossover.defaults``'s, applied here only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

from crossover import defaults

#: what a sweep's levels count: requests in flight, or requests/s arriving
Axis = Literal["concurrency", "rate"]


def level_label(axis: Axis, level: float) -> str:
    """``c=4`` for a concurrency level, ``rate=2.5`` (requests/s) for a rate level."""
    return f"c={level:g}" if axis == "concurrency" else f"rate={level:g}"


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


class Warmup(BaseModel):
    """The warm-up part: requests sent, and not measured, before a level."""

    model_config = {"extra": "forbid"}

    warmup_requests: int | None = Field(
        None,
        ge=0,
        description="warm-up requests before measuring (default: a run "
        f"{defaults.RUN_WARMUP_HELP}; a sweep level {defaults.LEVEL_WARMUP_HELP}; "
        f"capacity {defaults.CAPACITY_WARMUP} before its first rate)",
    )

    def warmup_for(self, concurrency: int | None, kind: Literal["run", "level", "capacity"]) -> int:
        """The warm-up requests given, else the default rule of ``kind``."""
        if self.warmup_requests is not None:
            return self.warmup_requests
        return defaults.warmup(concurrency, kind)
