"""What every dialect provides: a request body and a chunk parser, both pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

Endpoint = Literal["completions", "chat"]


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request's matched work, independent of the engine."""

    model: str
    prompt: str
    output_tokens: int
    endpoint: Endpoint = "completions"


@dataclass(frozen=True, slots=True)
class ChunkInfo:
    """What one parsed stream event says.

    ``text`` is generated text (content or reasoning); ``n_tokens`` is the number of
    tokens in this chunk when the server states it, else ``None``.
    """

    text: str = ""
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    n_tokens: int | None = None
    emitted_ns: int | None = None


class Dialect(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def has_done_sentinel(self) -> bool:
        """The stream ends with ``data: [DONE]`` (OpenAI style); Triton's does not."""
        ...

    @property
    def endpoints(self) -> tuple[Endpoint, ...]: ...

    def path(self, spec: RequestSpec) -> str: ...

    def body(self, spec: RequestSpec) -> dict[str, Any]: ...

    def parse(self, event: dict[str, Any], endpoint: Endpoint) -> ChunkInfo: ...
