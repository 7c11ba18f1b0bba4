"""The load part: one level (a concurrency or a rate) and the warm-up before it.

``Level`` is how a level travels from a sweep's list to the run that measures it; the
warm-up rule (how many requests fill the slots when none are given) is
``crossover.defaults``'s, applied here only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, Field, field_validator

from crossover import defaults
from crossover.spec.workload import MAX_OUTPUT_TOKENS

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


#: ``warmup_requests: level``: one wave of the level's own concurrency, sent at once
WARMUP_LEVEL = "level"


class Warmup(BaseModel):
    """The warm-up part: requests sent, and not measured, before a level."""

    model_config = {"extra": "forbid"}

    warmup_requests: Annotated[int, Field(ge=0)] | Literal["level"] | None = Field(
        None,
        description="warm-up requests before measuring (default: a run "
        f"{defaults.RUN_WARMUP_HELP}; a sweep level {defaults.LEVEL_WARMUP_HELP}; "
        f"capacity {defaults.CAPACITY_WARMUP} before its first rate); `level`: one wave of "
        "the level's own concurrency sent at once (c requests, c in flight), so the "
        "engine has seen the level's first burst before it is measured whatever levels "
        "ran before (an open loop: the default)",
    )

    warmup_output_tokens: Annotated[int, Field(ge=1, le=MAX_OUTPUT_TOKENS)] | None = Field(
        None,
        description="output tokens each warm-up request asks for, 1 or more (default: as "
        "the measured requests, output_tokens or the length each draws); fewer makes a "
        "`level` wave cheaper, the engine still seeing c prompts' prefill and decode at "
        "batch c, in a few steps instead of the whole output. The measured requests are "
        "unchanged, and each warm-up record is checked against its own count",
    )

    @field_validator("warmup_output_tokens", mode="before")
    @classmethod
    def _warmup_output_form(cls, v: object) -> object:
        # a bool is an int to pydantic: YAML's `yes` would ask for 1 token
        if isinstance(v, bool):
            raise ValueError(f"Input should be a whole number >= 1, got {v}")
        return v

    @field_validator("warmup_requests", mode="before")
    @classmethod
    def _warmup_form(cls, v: object) -> object:
        # one message for a bad form, not pydantic's one per member of the union
        if v is None or v == WARMUP_LEVEL:
            return v
        n: int | None = None
        if isinstance(v, bool):  # YAML's `warmup_requests: yes` was read as 1
            n = None
        elif isinstance(v, int):
            n = v
        elif isinstance(v, float) and v.is_integer():
            n = int(v)
        elif isinstance(v, str):
            try:
                n = int(v.strip())
            except ValueError:
                n = None
        if n is None or n < 0:
            shown = repr(v) if isinstance(v, str) else str(v)
            raise ValueError(f"Input should be a whole number >= 0 or level, got {shown}")
        return n

    def warmup_for(self, concurrency: int | None, kind: Literal["run", "level", "capacity"]) -> int:
        """The warm-up requests given, else the default rule of ``kind``; ``level`` is
        ``concurrency`` itself (one wave: ``defaults.warmup_concurrency`` sends them all at
        once), or the default rule where there is no concurrency (an open loop,
        capacity's rates)."""
        given = self.warmup_requests
        if isinstance(given, int):
            return given
        if given == WARMUP_LEVEL and concurrency is not None and kind != "capacity":
            return concurrency
        return defaults.warmup(concurrency, kind)
