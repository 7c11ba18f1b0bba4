"""One request's raw record: what was sent, when every token-carrying chunk arrived.

Every metric in ``crossover.metrics`` is derived from these records, so any metric
can be recomputed later from the SQLite store (``crossover summarize DB``).
Times are ``time.perf_counter_ns()`` readings of one process; ``None`` means missing.
Fields added later have defaults, so records stored by older versions still load.
"""

from __future__ import annotations

from typing import Any, Literal

import orjson
from pydantic import BaseModel, Field

ErrorKind = Literal[
    "http_error",
    "timeout",
    "connection_error",
    "stream_truncated",
    "malformed",
    # protocol deviations (the response ends where it broke the protocol)
    "not_streamed",
    "content_type",
    "error_event",
    "undecodable",
    "event_too_large",
]


class RequestRecord(BaseModel):
    """A single request as the client saw it."""

    index: int = Field(description="position in the run's request sequence")
    worker: int = 0
    #: the Ray node whose load worker sent it (``sweep --ray --workers N``); its stamps are
    #: that node's clock, compared only with records of the same node. None: this machine
    node: str | None = None
    #: the replica that served it (request index mod replicas); None with one server
    replica: int | None = None
    warmup: bool = False
    prompt_id: int | None = None
    expected_prompt_tokens: int | None = None
    expected_output_tokens: int
    # timestamps (perf_counter_ns)
    t_scheduled_ns: int | None = None
    t_send_ns: int
    t_first_ns: int | None = None
    t_last_ns: int | None = None
    t_done_ns: int | None = None
    # one entry per token-carrying chunk, in arrival order
    chunk_arrival_ns: list[int] = Field(default_factory=list)
    chunk_chars: list[int] = Field(default_factory=list)
    # tokens per chunk when the server says (token ids / per-chunk counts); else None
    chunk_tokens: list[int] | None = None
    # server emission stamps (calibration server only), same clock as the client's
    chunk_emitted_ns: list[int] | None = None
    # outcome
    status: int | None = None
    error_kind: ErrorKind | None = None
    error: str | None = None
    finish_reason: str | None = None
    saw_done: bool = False
    #: events the server sent after ``[DONE]`` (the end of the response): never parsed
    after_done_events: int = 0
    prompt_tokens: int | None = None
    #: prompt tokens the engine says it served from its prefix cache (None: not said)
    cached_prompt_tokens: int | None = None
    completion_tokens: int | None = None
    #: usage's own ``total_tokens``, as reported (checked: prompt + completion)
    total_tokens: int | None = None
    #: events that carried a choice never asked for (an index other than 0)
    other_choice_events: int = 0
    #: token-carrying chunks that came after the choice's finish reason
    after_finish_chunks: int = 0
    #: tokens the server's logprobs account for (it sent them unasked), when every
    #: token-carrying chunk had them; else None
    logprob_tokens: int | None = None
    # "usage" when the server reported it, "tokenizer" when counted client-side
    count_source: Literal["usage", "tokenizer"] | None = None
    text_chars: int = 0
    #: generated text, kept only when a tokenizer will count it (usage missing/checked)
    text: str | None = None
    #: ``text`` re-tokenized after the level: the stream's witness of the token count
    stream_tokens: int | None = None
    #: each chunk's text re-tokenized on its own and summed, wherever the stream has more
    #: than one chunk (re-encoding a whole text merges or splits tokens across chunk
    #: boundaries; a chunk never); records of older versions have it only where the
    #: whole text fell short of usage or over it
    chunk_text_tokens: int | None = None
    #: times the request was sent again: only after a reused pooled connection, closed
    #: by the server before the request was written or idle ``STALE_IDLE_S`` or more,
    #: closed before any response
    retries: int = 0
    #: why each retry was made, in order (e.g. ``"reused connection closed (FIN)"``)
    retry_reasons: list[str] = Field(default_factory=list)
    #: sent with ``Connection: close`` on a connection of its own: the run had seen the
    #: server close its connection right after a streamed response (llama-server does,
    #: though its headers keep it alive), so none was reused into that close
    connection_close: bool = False
    #: the prompt was sent before in this run (a duration or rate run that outran the
    #: prompts it could build): a prefix-caching engine may serve it from its cache
    prompt_reused: bool = False

    def to_json(self) -> bytes:
        """The record as JSON, the same as ``orjson.dumps(self.model_dump())`` at half the
        cost: the fields are JSON types already, so their dict is serialized as it is."""
        return orjson.dumps(self.__dict__, default=_dump)

    @property
    def ok(self) -> bool:
        """The request completed without a transport or HTTP error."""
        return self.error_kind is None


def _dump(value: Any) -> Any:
    """A nested model (none today) serialized the slow way."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"cannot serialize {type(value).__name__}")
