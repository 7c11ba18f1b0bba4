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
    #: the chat endpoint's messages, ``(role, content)`` (a session's history); None: one
    #: user message of ``prompt``. Completions endpoints send ``prompt`` alone
    messages: tuple[tuple[str, str], ...] | None = None


@dataclass(frozen=True, slots=True)
class ChunkInfo:
    """What one parsed stream event says.

    ``text`` is generated text (content or reasoning) of the one choice asked for (index
    0, every entry of it in the event); ``n_tokens`` is the number of tokens in this event
    when the server states it (its logprobs entries, or its token ids), else ``None``: an
    event with no text may still carry tokens (vLLM sends ``""`` with the token that
    holds the first bytes of a character, then the character with the next). ``total_tokens`` is
    usage's own total, as reported. ``other_choices`` counts the entries of choices that
    were never asked for (an index other than 0) that carried text or a finish reason.
    """

    text: str = ""
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    n_tokens: int | None = None
    emitted_ns: int | None = None
    total_tokens: int | None = None
    other_choices: int = 0
    #: prompt tokens the engine served from its prefix cache, when it says
    #: (``usage.prompt_tokens_details.cached_tokens``; llama.cpp's ``timings.cache_n``)
    cached_tokens: int | None = None


class Dialect(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def has_done_sentinel(self) -> bool:
        """The stream ends with ``data: [DONE]`` (OpenAI style); Triton's does not."""
        ...

    @property
    def endpoints(self) -> tuple[Endpoint, ...]: ...

    @property
    def server_tokenize(self) -> bool:
        """The server has a llama.cpp- or vLLM-style ``/tokenize`` (exact prompt lengths)."""
        ...

    @property
    def model_lists(self) -> tuple[str, ...]:
        """The answers that list its models, in the order asked (``discovery``)."""
        ...

    def path(self, spec: RequestSpec) -> str: ...

    def body(self, spec: RequestSpec) -> dict[str, Any]: ...

    def parse(self, event: dict[str, Any], endpoint: Endpoint) -> ChunkInfo: ...
