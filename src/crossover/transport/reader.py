"""The read loop of one streamed response, shared by both transports.

``EventReader.take`` reads the SSE events of one read of the body (each stamped with
the arrival of the read that brought its last byte) and keeps what the record needs:
the text, the per-chunk stamps and character counts, the counts the logprobs (or token
ids) state, an event with no text that states tokens being a token-carrying chunk too,
the finish reason and usage. The record stops where the protocol says the response
ended: at ``[DONE]`` (events after it are counted in ``after_done_events``, never
parsed; a repeated ``[DONE]`` says the same again and is not counted; a connection held
open after it is dropped after ``AFTER_DONE_S``), and at the first event that breaks the
response (an error object, JSON that does not parse, an object that is not one), after
which nothing more is read. JSON is read as JSON: a field present with ``null`` is
absent (``"error": null`` is no error), unknown fields are ignored, events of a type
nobody listens to (``event: ping``) are skipped, and ``event: error`` is an error
whatever its data.

Only a token re-arms the gap limit (a comment, a heartbeat, an empty or role-only event
is bytes, not progress), and at most once per ``GAP_SLACK`` of the gap: re-arming a
timer on every read cost ~7% of the client's CPU at high concurrency.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable

import orjson
from pydantic import BaseModel, Field

from crossover.dialects.base import Dialect, Endpoint
from crossover.dialects.openai import OpenAIDialect, token_event
from crossover.records.model import ErrorKind, RequestRecord
from crossover.transport.chunked_sse import StampedEvent
from crossover.transport.protocol import bad_event, starts_like_json

__all__ = [
    "AFTER_DONE_S",
    "GAP_SLACK",
    "EventReader",
    "Timeouts",
    "clean_server_text",
    "fail",
    "keep",
]

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
MAX_ERROR_CHARS = 300
#: the gap timeout fires between gap_s and gap_s * (1 + GAP_SLACK) after the last token
GAP_SLACK = 0.01
#: after [DONE], how long the body may take to end (data after it is counted); a server
#: that holds the connection open longer is not waited for: the response was complete
AFTER_DONE_S = 1.0


def clean_server_text(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """Server strings are untrusted: drop control characters (terminal escapes), cap size."""
    text = _CONTROL.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Timeouts(BaseModel):
    """Per-request limits; each ends the request as ``timeout`` (``crossover run --help``).
    Defined once: ``crossover run``'s flags, a sweep's and capacity's ``timeouts:`` and the
    transports all read this model."""

    # conect_s must not pass as default; an infinite limit was aiohttp's OverflowError
    model_config = {"extra": "forbid", "frozen": True, "allow_inf_nan": False}

    connect_s: float = Field(
        10.0,
        gt=0,
        description="a new connection: resolving the host and the TCP (and TLS) connect; "
        "it runs inside the first-token limit, and reused keep-alive connections skip it. "
        "The connections opened before the load (a GET of /health each) are given up "
        "after twice it",
    )
    first_token_s: float = Field(
        300.0,
        gt=0,
        description="from just before the request is sent until the first chunk carrying "
        "generated text: connecting, sending, queueing, the response headers and the "
        "prefill all count (role-only chunks do not end it)",
    )
    gap_s: float = Field(
        60.0, gt=0, description="the longest gap allowed between chunks after the first token"
    )
    total_s: float = Field(
        1800.0, gt=0, description="the whole request, from send to the end of the stream"
    )


def keep(record: RequestRecord, t_last: int | None, text_chars: int) -> None:
    """Write the read loop's per-chunk locals back to the record."""
    if t_last is not None:
        record.t_last_ns = t_last
    record.text_chars += text_chars


def fail(
    record: RequestRecord, kind: ErrorKind, message: str, t_ns: int | None = None
) -> RequestRecord:
    """Mark the record failed (the first failure wins) and ended at ``t_ns`` (now if
    None) unless it had ended already."""
    if record.error_kind is None:
        record.error_kind = kind
        record.error = clean_server_text(message)
    if record.t_done_ns is None:
        record.t_done_ns = t_ns if t_ns is not None else time.perf_counter_ns()
    return record


class EventReader:
    """The read loop of one streamed response, event by event, for both transports:
    ``take`` is called with each read's events (the aiohttp transport's task after each
    read; the lean transport's ``data_received``, or its task for events that came
    before the sink was set) and keeps what the record needs in its own slots;
    ``broken`` once the stream failed a check (the record says why) and nothing more is
    read. ``finish`` writes them to the record (a pydantic model, whose
    ``__setattr__`` is slow) once, at the end."""

    __slots__ = (
        "record", "endpoint", "parse", "fast", "chat", "cm", "now", "total_deadline", "gap_s",
        "gap_armed", "rearm_every", "armed_at", "phase", "broken", "arrivals", "chars", "counts",
        "stated", "unstated", "others", "emitted", "pieces", "t_first", "t_last", "t_end",
        "after_done", "after_finish", "text_chars",
    )  # fmt: skip

    def __init__(
        self,
        record: RequestRecord,
        dialect: Dialect,
        endpoint: Endpoint,
        timeouts: Timeouts,
        keep_text: bool,
        now: Callable[[], float],
        total_deadline: float,
    ) -> None:
        self.record = record
        self.endpoint = endpoint
        self.parse = dialect.parse
        #: the OpenAI dialects' per-token shortcut, where their parse is the one it mirrors
        self.fast = (
            token_event if getattr(type(dialect), "parse", None) is OpenAIDialect.parse else None
        )
        self.chat = endpoint == "chat"
        self.cm: asyncio.Timeout | None = None
        self.now = now
        self.total_deadline = total_deadline
        gap_s = self.gap_s = timeouts.gap_s
        self.gap_armed = gap_s * (1.0 + GAP_SLACK)
        self.rearm_every = gap_s * GAP_SLACK
        self.armed_at = -1.0
        self.phase = "response headers"
        self.broken = False
        self.arrivals = record.chunk_arrival_ns
        self.chars = record.chunk_chars
        self.counts: list[int] | None = None
        self.stated = 0
        self.unstated = 0
        self.others = 0
        self.emitted: list[int] | None = None
        self.pieces: list[str] | None = [] if keep_text else None
        self.t_first: int | None = None
        self.t_last: int | None = None
        self.t_end: int | None = None
        self.after_done = 0
        self.after_finish = 0
        self.text_chars = 0

    def take(self, evs: list[StampedEvent], ended: bool) -> None:
        """``evs`` in order (``ended``: the events the body's end dispatched)."""
        cm = self.cm
        assert cm is not None
        if cm.expired():
            # the deadline passed and the task is being told: as the task's own loop,
            # which never ran again after it, read nothing more
            return
        record = self.record
        loads = orjson.loads
        tokens_here = False
        for raw, named, _id, t in evs:
            if raw[:6] == b"[DONE]":
                if self.t_end is None:
                    record.saw_done = True
                    self.t_end = t
                    self.phase = "after done"
                    cm.reschedule(
                        min(self.total_deadline, self.now() + min(self.gap_s, AFTER_DONE_S))
                    )
                continue
            if self.t_end is not None:
                self.after_done += 1
                continue
            try:
                obj = loads(raw)
            except orjson.JSONDecodeError:
                if named is not None and named not in ("message", "error"):
                    continue
                if ended and named != "error":
                    break
                if named == "error":
                    fail(record, "error_event", f"error event: {raw[:200]!r}", t)
                else:
                    fail(record, *bad_event(raw), t)
                self.broken = True
                break
            if not isinstance(obj, dict):
                if named is not None and named not in ("message", "error"):
                    continue
                fail(record, "malformed", f"event is not an object: {raw[:120]!r}", t)
                self.broken = True
                break
            err = obj.get("error")
            if named == "error" or (err and not obj.get("choices")):
                fail(record, "error_event", f"error event: {err or obj}", t)
                self.broken = True
                break
            fast = self.fast(obj, self.chat) if self.fast is not None else None
            if fast is not None:  # a token event: parse's ChunkInfo has only these three
                text, finish, emitted_ns = fast
                if text:
                    self._token(record, t, text, None, emitted_ns)
                    tokens_here = True
                if finish is not None:
                    record.finish_reason = finish
                continue
            info = self.parse(obj, self.endpoint)
            text = info.text
            n_stated = info.n_tokens
            if n_stated is not None:
                self.stated += n_stated
            if text or n_stated:
                # an event with no text that states tokens carried them (vLLM's ``""``
                # before a character its tokens split): their own arrival, their count
                self._token(record, t, text, n_stated, info.emitted_ns)
                tokens_here = True
            if info.other_choices:
                self.others += 1
            if info.finish_reason is not None:
                record.finish_reason = info.finish_reason
            if info.prompt_tokens is not None:
                record.prompt_tokens = info.prompt_tokens
            if info.cached_tokens is not None:
                record.cached_prompt_tokens = info.cached_tokens
            if info.completion_tokens is not None:
                record.completion_tokens = info.completion_tokens
                record.total_tokens = info.total_tokens
                record.count_source = "usage"
        if tokens_here and self.t_end is None:
            at = self.now()
            if at - self.armed_at >= self.rearm_every:
                self.armed_at = at
                cm.reschedule(min(self.total_deadline, at + self.gap_armed))

    def _token(
        self,
        record: RequestRecord,
        t: int,
        text: str,
        n_stated: int | None,
        emitted_ns: int | None,
    ) -> None:
        """One token-carrying event read at ``t`` (the fast path's and ``parse``'s alike)."""
        if self.t_first is None:
            self.t_first = record.t_first_ns = t
            self.phase = "next token"
        elif record.finish_reason is not None:
            self.after_finish += 1  # the choice had ended
        self.t_last = t
        self.arrivals.append(t)
        n_chars = len(text)
        self.chars.append(n_chars)
        self.text_chars += n_chars
        if self.pieces is not None:
            self.pieces.append(text)
        if n_stated is None:
            self.unstated += 1
        else:
            if self.counts is None:
                self.counts = []
            self.counts.append(n_stated)
        if emitted_ns is not None:
            if self.emitted is None:
                self.emitted = []
            self.emitted.append(emitted_ns)

    def finish(self, dialect: Dialect, head_bytes: bytes | None) -> RequestRecord:
        """Write what was read to the record and judge how the stream ended
        (``head_bytes``: the body's first bytes, None if none arrived)."""
        record = self.record
        keep(record, self.t_last, self.text_chars)
        counts, unstated = self.counts, self.unstated
        record.chunk_tokens = counts if counts is not None and not unstated else None
        record.logprob_tokens = self.stated if counts is not None and not unstated else None
        record.other_choice_events = self.others
        record.chunk_emitted_ns = self.emitted
        record.after_done_events = self.after_done
        record.after_finish_chunks = self.after_finish
        if self.pieces is not None:
            record.text = "".join(self.pieces)
        if (
            record.error_kind is None
            and not record.chunk_arrival_ns
            and not record.saw_done
            and record.finish_reason is None
            and starts_like_json(head_bytes)
        ):
            # an event-stream Content-Type over one JSON body: no event was ever sent
            fail(record, "not_streamed", "the server answered with one JSON body, not SSE events")
        if (
            record.error_kind is None
            and dialect.has_done_sentinel
            and not record.saw_done
            and record.finish_reason is None
            and record.completion_tokens is None
        ):
            # a clean end with a finish reason or usage but no [DONE] is complete
            # (transformers serve sends no [DONE], seen on the H200); neither is a cut
            fail(record, "stream_truncated", "stream ended without [DONE] or a finish reason")
        return record

    def timed_out(self, timeouts: Timeouts) -> RequestRecord | None:
        """The record of a request whose deadline passed (None: it had ended at
        ``[DONE]`` and only the wait for the body's end ran out)."""
        record = self.record
        if self.t_end is not None:
            record.t_done_ns = self.t_end  # the response was over at [DONE]
            return None
        keep(record, self.t_last, self.text_chars)
        limit = {
            "response headers": timeouts.first_token_s,
            "first token": timeouts.first_token_s,
            "next token": timeouts.gap_s,
        }[self.phase]
        if self.now() >= self.total_deadline - 0.001:
            return fail(record, "timeout", f"no end of stream within {timeouts.total_s:g} s")
        return fail(record, "timeout", f"no {self.phase} within {limit:g} s")
