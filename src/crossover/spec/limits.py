"""What a request or a run may take before it counts as failed: the per-request
``Timeouts`` (the only one; the transport reads it as it is), the size of one SSE event,
and the failed requests a run may have and still be valid."""

from __future__ import annotations

from pydantic import BaseModel, Field

from crossover.transport.reader import Timeouts
from crossover.transport.sse import MAX_EVENT_BYTES

__all__ = ["Limits", "Timeouts"]


class Limits(BaseModel):
    """The limits part of a run, a sweep or a capacity search."""

    model_config = {"extra": "forbid"}

    timeouts: Timeouts = Field(
        default_factory=Timeouts, description="per-request limits (keys below)"
    )
    allowed_failures: int = Field(
        0, ge=0, description="failed requests a run may have and still be valid"
    )
    max_event_bytes: int = Field(
        MAX_EVENT_BYTES,
        ge=1024,
        le=1024**3,
        description="one SSE event (or a line still waiting for its end) may hold at most "
        "this many bytes",
    )
