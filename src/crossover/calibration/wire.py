"""How one response's events look on the wire: the JSON of each chunk and the SSE framing.

The default is what vLLM sends (``data: {...}`` and a blank line, LF). The wire faults
change only the form, each one allowed by the SSE or JSON specifications or seen from a
real server, so an honest client must read them as the same stream: CR or CRLF line
ends, the spec's other spellings (``data:`` without a space, data over several lines,
``id``/``event``/``retry`` fields, comments, a BOM), a last event without its blank line,
fields present with ``null``, integers written as floats, fields nobody asked for,
heartbeat comments, a repeated ``[DONE]``, none at all. Others change what the stream
says (whitespace chunks, choices never asked for, logprobs, token ids, characters split
over two tokens as vLLM streams them: ``""`` then the character) or when it is delivered
(bursts).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
from aiohttp import web

from crossover.calibration.plan import GenerationRequest
from crossover.calibration.state import RequestTruth

_BOM = b"\xef\xbb\xbf"


class Emitter:
    """Builds and writes one response's SSE events."""

    def __init__(
        self,
        resp: web.StreamResponse,
        req: GenerationRequest,
        rec: RequestTruth,
        faults: frozenset[str],
        split: int,
        burst: int,
    ) -> None:
        self.resp = resp
        self.chat = req.chat
        self.faults = faults
        self.split = split if "split_events" in faults else 0  # 0: write whole events
        self.eol = b"\r" if "cr_lines" in faults else b"\r\n" if "crlf_lines" in faults else b"\n"
        self.variety = "sse_variety" in faults
        self.nulls = "null_fields" in faults
        self.floats = "float_ints" in faults
        self.unknown = "unknown_fields" in faults
        self.logprobs = "logprobs" in faults
        self.token_ids = "token_ids" in faults
        #: split_characters: a chunk with text "" carries a token too (vLLM's shape)
        self.splits = "split_characters" in faults
        self.started = False
        #: burst_delivery: events held until this many tokens are due, then written at once
        self.burst = burst if "burst_delivery" in faults else 0
        self.held: list[bytes] = []
        self.held_tokens = 0
        self.base: dict[str, Any] = {
            "id": rec.id,
            "object": "chat.completion.chunk" if req.chat else "text_completion",
            "created": int(time.time()),
            "model": req.model,
        }
        if self.nulls:
            self.base |= {"system_fingerprint": None, "error": None, "usage": None}
        if self.unknown:
            self.base |= {"x_vendor": {"queue": [1, 2], "note": "ignored"}}

    def _num(self, n: int) -> int | float:
        return float(n) if self.floats else n

    def _choice(
        self, index: int, text: str | None, finish: str | None, role: bool, tokens: int
    ) -> dict[str, Any]:
        if self.chat:
            delta: dict[str, Any] = {"role": "assistant"} if role else {}
            if text is not None:
                delta["content"] = text
            if self.nulls:
                delta.setdefault("role", None)
                delta |= {"tool_calls": None, "reasoning_content": None}
            choice: dict[str, Any] = {"index": self._num(index), "delta": delta}
        else:
            choice = {"index": self._num(index), "text": text or ""}
        # a chunk carries tokens when it has text, or, split_characters, none yet
        carries = text is not None and (bool(text) or self.splits)
        choice["logprobs"] = self._logprobs(text, tokens) if self.logprobs and carries else None
        if self.token_ids and carries:
            choice["token_ids"] = [7] * tokens
        choice["finish_reason"] = finish
        if self.nulls:
            choice["stop_reason"] = None
        if self.unknown:
            choice["matched_stop"] = 2
        return choice

    def _logprobs(self, text: str | None, tokens: int) -> dict[str, Any]:
        """One entry per token of the chunk (chat: ``content``; completions: ``tokens``)."""
        words = (text or "").split() or [""]
        words = (words * tokens)[:tokens]
        if self.chat:
            return {"content": [{"token": w, "logprob": -0.5, "top_logprobs": []} for w in words]}
        return {"tokens": words, "token_logprobs": [-0.5] * tokens, "top_logprobs": None}

    def chunk(
        self,
        text: str | None,
        finish: str | None,
        role: bool,
        emit_ns: int,
        pad: int = 0,
        tokens: int = 1,
    ) -> bytes:
        """One chunk (and, with ``extra_choice``, one of a second choice after it);
        ``pad`` > 0 adds a ``padding`` field so its data is ``pad`` bytes long."""
        choices = [self._choice(0, text, finish, role, tokens)]
        if "choices_per_event" in self.faults and text:
            choices.append(self._choice(1, text, finish, role, tokens))
        obj = {**self.base, "choices": choices, "crossover_emit_ns": emit_ns}
        if pad:  # the event's data is exactly ``pad`` bytes (or as small as it can be)
            obj["padding"] = ""
            obj["padding"] = "x" * max(0, pad - len(orjson.dumps(obj)))
        out = self.event(obj)
        if "extra_choice" in self.faults and text:
            other = [self._choice(1, text, finish, role, tokens)]
            out += self.event({**self.base, "choices": other, "crossover_emit_ns": emit_ns})
        return out

    def usage(
        self,
        prompt: int | None,
        completion: int | None,
        total_extra: int = 0,
        cached: int | None = None,
    ) -> bytes:
        usage: dict[str, Any] = {
            "prompt_tokens": None if prompt is None else self._num(prompt),
            "completion_tokens": None if completion is None else self._num(completion),
            "total_tokens": self._num((prompt or 0) + (completion or 0) + total_extra),
        }
        if self.nulls:
            usage["completion_tokens_details"] = None
        if self.unknown:
            usage["prompt_tokens_details"] = {"cached_tokens": 0}
        if cached is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        obj = {**self.base, "choices": [], "usage": usage}
        return self.event(obj | {"crossover_emit_ns": time.perf_counter_ns()})

    def event(self, obj: dict[str, Any]) -> bytes:
        return self.frame(orjson.dumps(obj))

    def frame(self, data: bytes, last: bool = False) -> bytes:
        """``data`` as one SSE event in this response's framing; ``last`` with the
        ``no_final_blank_line`` fault: without any line end after it."""
        eol = self.eol
        if self.variety:
            # the spec's other spellings: a comment, id/event/retry fields, "data:" with no
            # space, the data split over two lines (joined by the client with an LF, which
            # JSON takes as whitespace: split after a comma between members)
            cut = data.find(b',"') + 1
            body = (
                b"data:" + data if cut <= 0 else b"data:" + data[:cut] + eol + b"data:" + data[cut:]
            )
            head = b": variety" + eol + b"id: 7" + eol + b"event: message" + eol + b"retry: 3000"
            out = head + eol + body + eol
        else:
            out = b"data: " + data + eol
        if last and "no_final_blank_line" in self.faults:
            return out[: -len(eol)]
        return out + eol

    def done(self) -> bytes:
        if "no_done" in self.faults:
            return b""
        out = self.frame(b"[DONE]", last="repeated_done" not in self.faults)
        if "repeated_done" in self.faults:
            out += self.frame(b"[DONE]", last=True)
        return out

    def heartbeat(self) -> bytes:
        return b": keep-alive" + self.eol + self.eol

    async def write(self, data: bytes, tokens: int = 0) -> None:
        """Write ``data``; with ``burst_delivery``, token events are held until ``burst``
        tokens are due, then written together (``flush`` writes what is left)."""
        if self.burst and tokens:
            self.held.append(data)
            self.held_tokens += tokens
            if self.held_tokens >= self.burst:
                await self.flush()
            return
        if self.held:
            await self.flush()
        await self._send(data)

    async def flush(self) -> None:
        data, self.held, self.held_tokens = b"".join(self.held), [], 0
        if data:
            await self._send(data)

    async def _send(self, data: bytes) -> None:
        if not self.started:
            self.started = True
            if self.variety:
                data = _BOM + data
        if not self.split:
            await self.resp.write(data)
            return
        data = b": ping\r\n\r\n" + data.replace(b"\n", b"\r\n")
        for i in range(0, len(data), self.split):
            await self.resp.write(data[i : i + self.split])
            await asyncio.sleep(0)
