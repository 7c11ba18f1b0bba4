"""aiohttp handlers: execute a request's plan on the wire, on an absolute schedule.

One task per stream (aiohttp's handler task) sleeps to absolute deadlines in
``perf_counter_ns`` time, so lateness never accumulates: a late chunk is followed by an
on-time one. Every chunk carries ``crossover_emit_ns``, the ``perf_counter_ns()`` taken just
before it was written (CLOCK_MONOTONIC on Linux, shared by all processes of a machine).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from typing import Any

import orjson
from aiohttp import web

from crossover.calibration.config import CalibrationConfig
from crossover.calibration.plan import BadRequest, GenerationRequest, Plan, make_plan
from crossover.calibration.plan import parse_request as parse_generation
from crossover.calibration.prefixcache import PrefixCache
from crossover.calibration.state import RequestTruth, ServerState
from crossover.calibration.tokenizer import chat_template_count, chat_token_ids
from crossover.calibration.wire import Emitter

CONFIG_KEY: web.AppKey[CalibrationConfig] = web.AppKey("calibration_config", CalibrationConfig)
STATE_KEY: web.AppKey[ServerState] = web.AppKey("calibration_state", ServerState)
CLOSING_KEY: web.AppKey[asyncio.Event] = web.AppKey("calibration_closing", asyncio.Event)

_SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
#: the content_type fault: an SSE body labelled as plain text
_PLAIN_HEADERS = {"Content-Type": "text/plain; charset=utf-8", "Cache-Control": "no-cache"}
_DONE = b"data: [DONE]\n\n"  # after [DONE] (data_after_done): the default framing
_MALFORMED = b'data: {"id": "calibration", "choices": [{"text": "unterminated\n\n'
_ERROR_EVENT = (
    b'data: {"error": {"message": "calibration fault error_event", '
    b'"type": "server_error", "code": 500}}\n\n'
)
#: a chunk whose text is not UTF-8 (0xFF never occurs in UTF-8)
_UNDECODABLE = (
    b'data: {"id": "calibration", "choices": [{"index": 0, "text": " \xff\xfe", '
    b'"finish_reason": null}]}\n\n'
)


def _error(status: int, message: str, kind: str) -> web.Response:
    body = {"error": {"message": message, "type": kind, "code": status}}
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")


async def _sleep_until(deadline_ns: int) -> None:
    delay_ns = deadline_ns - time.perf_counter_ns()
    if delay_ns > 0:
        await asyncio.sleep(delay_ns / 1e9)


def _abort_with_reset(request: web.Request) -> None:
    """Drop the connection with a TCP RST (SO_LINGER 0), as a crashed server would."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    transport.abort()


#: close_after_stream: how long the server reads (and discards) what arrives after its
#: FIN before it closes the connection (cpp-httplib's ``drain_and_close_socket``: 100 ms)
DRAIN_S = 0.1


#: split_characters: the character two tokens make (2 bytes in UTF-8, as Cyrillic is)
SPLIT_CHARACTER = " \u0416"


class Handlers:
    """The routes of one application; config and state come from the app."""

    def __init__(self, config: CalibrationConfig, state: ServerState) -> None:
        self.config = config
        self.state = state
        block = config.prefix_cache_block_tokens
        self.prefix = PrefixCache(block) if block else None
        #: connections closing after a streamed response (close_after_stream), each set
        #: once closed: a request that arrives on one is never answered
        self.closing: dict[asyncio.BaseTransport, asyncio.Event] = {}

    def close_after(self, request: web.Request) -> None:
        """close_after_stream: the FIN ``close_after_stream_ms`` after the response, then
        ``DRAIN_S`` of reading what arrives, then the close (as llama-server does)."""
        transport = request.transport
        if transport is None or transport in self.closing:
            return
        closed = self.closing[transport] = asyncio.Event()
        loop = asyncio.get_running_loop()

        def fin() -> None:
            sock = transport.get_extra_info("socket")
            if sock is not None and not transport.is_closing():
                try:
                    sock.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
            loop.call_later(DRAIN_S, close)

        def close() -> None:
            transport.close()
            closed.set()
            self.closing.pop(transport, None)

        loop.call_later(self.config.close_after_stream_ms / 1e3, fin)

    # --- small endpoints -------------------------------------------------
    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": self.config.version})

    async def models(self, request: web.Request) -> web.Response:
        model = {"id": self.config.model_name, "object": "model", "owned_by": "crossover"}
        return web.json_response({"object": "list", "data": [model]})

    async def tokenize(self, request: web.Request) -> web.Response:
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return _error(400, "body is not valid JSON", "invalid_request_error")
        if not isinstance(body, dict):
            return _error(400, "body must be a JSON object", "invalid_request_error")
        if isinstance(body.get("messages"), list):
            cfg = self.config
            template = chat_template_count(
                body["messages"], cfg.chat_template_tokens, cfg.chat_message_tokens
            )
            ids = chat_token_ids(body["messages"], template)
        else:
            text = body.get("content", body.get("prompt"))
            if not isinstance(text, str):
                return _error(400, "content must be a string", "invalid_request_error")
            ids = self.state.vocabulary.learn(text)
        return web.json_response({"tokens": ids, "count": len(ids)})

    async def detokenize(self, request: web.Request) -> web.Response:
        """``{"tokens": [...]}`` -> ``{"content": "..."}`` (llama.cpp's and vLLM's shape)."""
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return _error(400, "body is not valid JSON", "invalid_request_error")
        ids = body.get("tokens") if isinstance(body, dict) else None
        if not isinstance(ids, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in ids
        ):
            return _error(400, "tokens must be a list of integers", "invalid_request_error")
        vocab = self.state.vocabulary
        vocab.learn(self.config.token_text)
        return web.json_response({"content": vocab.text(ids)})

    async def metrics(self, request: web.Request) -> web.Response:
        text = self.state.prometheus_text(self.config.model_name)
        return web.Response(text=text, content_type="text/plain", charset="utf-8")

    async def truth(self, request: web.Request) -> web.Response:
        return web.Response(
            body=orjson.dumps(self.state.truth_dict()), content_type="application/json"
        )

    async def reset(self, request: web.Request) -> web.Response:
        self.state.reset()
        return web.json_response({"status": "reset"})

    # --- generation -------------------------------------------------------
    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=False)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=True)

    async def _generate(self, request: web.Request, chat: bool) -> web.StreamResponse:
        arrival = time.perf_counter_ns()
        cfg, state = self.config, self.state
        closed = self.closing.get(request.transport) if request.transport else None
        if closed is not None:
            # the connection closes after its streamed response: read, never answered
            await request.read()
            await closed.wait()
            raise asyncio.CancelledError
        try:
            req = parse_generation(orjson.loads(await request.read()), chat, cfg)
        except orjson.JSONDecodeError:
            return _error(400, "body is not valid JSON", "invalid_request_error")
        except BadRequest as exc:
            return _error(400, str(exc), "invalid_request_error")
        faults = cfg.faults_for(state.next_index)
        rec = state.start("chat" if chat else "completions", req.stream, sorted(faults), arrival)
        rec.prompt_tokens, rec.max_tokens = req.prompt_tokens, req.max_tokens
        if "never_answer" in faults:
            rec.status = 0
            await request.app[CLOSING_KEY].wait()
            raise asyncio.CancelledError
        if "drop_request" in faults or "drop_request_rst" in faults:
            # the request was read and dropped: the connection closes with no response
            rec.status, rec.done = 0, True
            if "drop_request_rst" in faults:
                _abort_with_reset(request)
            elif request.transport is not None:
                request.transport.close()
            raise asyncio.CancelledError
        for code in (500, 429):
            if f"http_{code}" in faults:
                rec.status, rec.done = code, True
                state.errors_total += 1
                err = _error(code, f"calibration fault http_{code}", "server_error")
                if code == 429:
                    err.headers["Retry-After"] = "1"
                return err
        if "counter_reset" in faults:  # the engine's counter starts again from zero
            state.generation_tokens_total = 0
            state.generation_created = time.time()
        if "other_model_tokens" in faults:  # another model's work on the same server
            state.other_model_tokens += 10 * req.max_tokens
        plan = make_plan(req, faults, cfg)
        if self.prefix is not None:
            rec.cached_tokens = self.prefix.lookup_and_insert(req.tokens)
        state.prompt_tokens_total += req.prompt_tokens
        state.admit()
        try:
            if req.stream and "not_streamed" not in faults:
                resp = await self._stream(request, req, plan, faults, rec)
            else:
                resp = await self._whole(request, req, plan, faults, rec)
            rec.done = True
            return resp
        except ConnectionError:
            # the client went away (it stops reading at a broken event, or timed out):
            # end quietly, as aiohttp does for a disconnect, not with a logged traceback
            rec.client_disconnected = True
            raise asyncio.CancelledError from None
        finally:
            if rec.first_emit_ns is None:
                state.waiting -= 1
            else:
                state.running -= 1

    def _ttft_ns(self, req: GenerationRequest, cached: int | None = None) -> int:
        cfg = self.config
        others = self.state.active - 1
        ms = (
            cfg.ttft_ms
            + cfg.ttft_per_stream_ms * others
            + cfg.ttft_per_prompt_token_ms * max(0, req.prompt_tokens - (cached or 0))
        )
        return int(ms * 1e6)

    def _gap_ns(self) -> int:
        cfg = self.config
        return int((cfg.itl_ms + cfg.itl_per_stream_ms * (self.state.active - 1)) * 1e6)

    def _mark_first(self, rec: RequestTruth, deadline_ns: int, emit_ns: int) -> None:
        self.state.waiting -= 1
        self.state.running += 1
        rec.first_deadline_ns, rec.first_emit_ns = deadline_ns, emit_ns

    async def _stream(
        self,
        request: web.Request,
        req: GenerationRequest,
        plan: Plan,
        faults: frozenset[str],
        rec: RequestTruth,
    ) -> web.StreamResponse:
        cfg, state = self.config, self.state
        resp = web.StreamResponse(
            headers=_PLAIN_HEADERS if "content_type" in faults else _SSE_HEADERS
        )
        if "connection_close" in faults:
            resp.force_close()
        out = Emitter(resp, req, rec, faults, cfg.split_event_bytes, cfg.burst_tokens)
        due = rec.arrival_ns + self._ttft_ns(req, rec.cached_tokens)
        if "slow_headers" in faults:
            await asyncio.sleep(cfg.slow_headers_s)
        await resp.prepare(request)
        role_first = req.chat and "role_chunk" in faults
        if role_first:
            await out.write(out.chunk(None, None, True, time.perf_counter_ns()))
            due += int(cfg.role_chunk_delay_ms * 1e6)
        sent = 0
        k = plan.tokens_per_chunk
        broke = False
        while sent < plan.tokens:
            if sent == plan.break_after and not broke:
                broke = True
                due += await self._break(out, plan)
            size = 1 if sent == 0 else min(k, plan.tokens - sent)
            if sent < plan.break_after and plan.breaks:
                size = min(size, plan.break_after - sent)
            if sent:
                due += self._gap_ns() * size
                if "heartbeats" in faults:
                    await out.write(out.heartbeat())
            await _sleep_until(due)
            now = time.perf_counter_ns()
            last = sent + size == plan.tokens
            # whitespace_chunks: every second chunk carries a space where its words were
            blank = plan.whitespace and rec.chunks_sent % 2 == 1
            # split_characters: tokens in pairs, the first one's chunk with no text (its
            # bytes begin a character) and the second's with the whole character
            text = cfg.token_text * size
            if "split_characters" in faults and size == 1:
                if sent % 2 == 0 and not last:
                    text = ""
                elif sent % 2 == 1:
                    text = SPLIT_CHARACTER
            # data_after_finish: the finish reason halfway, the rest of the tokens after it
            early = "data_after_finish" in faults
            finish_now = sent + size == max(1, plan.tokens // 2) if early else last
            data = out.chunk(
                " " if blank else text,
                plan.finish_reason if finish_now else None,
                req.chat and sent == 0 and not role_first,
                now,
                cfg.oversized_event_bytes if plan.oversized and sent == plan.break_after else 0,
                size,
            )
            await out.write(data, size)
            lag = now - due
            state.add_lag(lag, sent == 0)
            rec.max_lag_ns = max(rec.max_lag_ns, lag)
            if sent == 0:
                self._mark_first(rec, due, now)
            rec.last_deadline_ns, rec.last_emit_ns = due, now
            sent += size
            rec.tokens_sent = sent
            rec.chunks_sent += 1
            state.generation_tokens_total += 0 if blank else size
        await out.flush()
        if plan.reset:
            _abort_with_reset(request)
            return resp
        rec.finish_reason = plan.finish_reason
        if not plan.cut:
            if plan.usage_completion_tokens is not None and (
                req.include_usage or cfg.stream_usage_always
            ):
                await out.write(
                    out.usage(
                        plan.usage_prompt_tokens,
                        plan.usage_completion_tokens,
                        plan.total_extra,
                        cached=rec.cached_tokens,
                    )
                )
            await out.write(out.done())
            if plan.after_done:
                # the response is over; a broken server (or proxy) sends more anyway
                await out.write(out.chunk(cfg.token_text, None, False, time.perf_counter_ns()))
                await out.write(_DONE)
        await resp.write_eof()
        if "close_after_stream" in faults:
            self.close_after(request)
        return resp

    async def _break(self, out: Emitter, plan: Plan) -> int:
        """What happens after half the tokens; returns how much later the rest is due."""
        cfg = self.config
        delay_ns = 0
        if plan.stall:
            delay_ns = int(cfg.stall_s * 1e9)
            await asyncio.sleep(cfg.stall_s)
        if plan.heartbeat_stall:
            # no token for stall_s, only comments: bytes, not progress
            delay_ns = int(cfg.stall_s * 1e9)
            end = time.perf_counter_ns() + delay_ns
            while time.perf_counter_ns() < end:
                await out.write(out.heartbeat())
                await asyncio.sleep(cfg.heartbeat_ms / 1e3)
        if plan.malformed:
            await out.write(_MALFORMED)
        if plan.error_event:
            await out.write(_ERROR_EVENT)
        if plan.undecodable:
            await out.write(_UNDECODABLE)
        return delay_ns

    async def _whole(
        self,
        request: web.Request,
        req: GenerationRequest,
        plan: Plan,
        faults: frozenset[str],
        rec: RequestTruth,
    ) -> web.StreamResponse:
        cfg, state = self.config, self.state
        first = rec.arrival_ns + self._ttft_ns(req, rec.cached_tokens)
        done = first + self._gap_ns() * (plan.tokens - 1)
        if plan.stall:
            done += int(cfg.stall_s * 1e9)
        if "slow_headers" in faults:
            done = max(done, rec.arrival_ns + int(cfg.slow_headers_s * 1e9))
        await _sleep_until(done)
        now = time.perf_counter_ns()
        self._mark_first(rec, first, now)
        state.add_lag(now - done, True)
        rec.last_deadline_ns, rec.last_emit_ns = done, now
        rec.tokens_sent, rec.chunks_sent = plan.tokens, 1
        rec.finish_reason = plan.finish_reason
        state.generation_tokens_total += plan.tokens
        text = cfg.token_text * plan.tokens
        choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": plan.finish_reason}
        if req.chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        body: dict[str, Any] = {
            "id": rec.id,
            "object": "chat.completion" if req.chat else "text_completion",
            "created": int(time.time()),
            "model": req.model,
            "choices": [choice],
            "crossover_emit_ns": now,
        }
        if plan.usage_completion_tokens is not None and plan.usage_prompt_tokens is not None:
            body["usage"] = {
                "prompt_tokens": plan.usage_prompt_tokens,
                "completion_tokens": plan.usage_completion_tokens,
                "total_tokens": plan.usage_prompt_tokens + plan.usage_completion_tokens,
            }
            if rec.cached_tokens is not None:
                body["usage"]["prompt_tokens_details"] = {"cached_tokens": rec.cached_tokens}
        payload = orjson.dumps(body)
        if plan.malformed:
            payload = payload[: len(payload) // 2]
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        if "connection_close" in faults:
            resp.force_close()
        if plan.reset:
            _abort_with_reset(request)
            return resp
        resp.content_length = len(payload)
        await resp.prepare(request)
        if plan.cut:
            # promise the whole body, send half, close: the client sees a truncated payload
            await resp.write(payload[: len(payload) // 2])
            if request.transport is not None:
                request.transport.close()
            return resp
        await resp.write(payload)
        await resp.write_eof()
        return resp
