"""From a request body and its faults to a plan: what the stream will send and report.

Pure functions, no I/O: the handlers in ``handlers.py`` execute the plan on the wire.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import orjson

from crossover.calibration.config import CalibrationConfig
from crossover.calibration.tokenizer import (
    chat_template_count,
    chat_text,
    count_tokens,
    prompt_key_tokens,
    prompt_token_count,
)


class BadRequest(ValueError):
    """The body is not a request this server accepts (answered with HTTP 400)."""


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """The matched-work fields of one completions or chat request."""

    chat: bool
    stream: bool
    include_usage: bool
    model: str
    prompt_tokens: int
    max_tokens: int
    min_tokens: int
    ignore_eos: bool
    #: the prompt's tokens (words, or ids as text): what the prefix cache keys on
    tokens: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Plan:
    """What one response does; indices count generated tokens (0-based)."""

    tokens: int  # tokens the stream sends before it ends (or breaks)
    finish_reason: str | None  # None: the stream never says why it ended (cut, reset)
    usage_completion_tokens: int | None  # None: no usage at all
    usage_prompt_tokens: int | None
    tokens_per_chunk: int
    break_after: int = 0  # tokens sent before the stall or the bad event
    cut: bool = False  # end cleanly after `tokens`, without finish_reason, usage, [DONE]
    reset: bool = False  # drop the TCP connection after `tokens`
    stall: bool = False
    malformed: bool = False
    error_event: bool = False  # an error object at the break, then the rest
    undecodable: bool = False  # a chunk that is not UTF-8 at the break, then the rest
    oversized: bool = False  # the chunk at the break padded to oversized_event_bytes
    after_done: bool = False  # another token chunk and [DONE] after [DONE]
    heartbeat_stall: bool = False  # after break_after, only heartbeat comments for stall_s
    whitespace: bool = False  # every second chunk carries a space, no word
    total_extra: int = 0  # added to usage's total_tokens

    @property
    def breaks(self) -> bool:
        """Something happens after ``break_after`` tokens: chunks must meet that point."""
        return (
            self.stall
            or self.malformed
            or self.error_event
            or self.undecodable
            or self.oversized
            or self.heartbeat_stall
        )


def _int_field(body: Mapping[str, object], name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"{name} must be an integer")
    return value


def _generation_config(body: Mapping[str, object]) -> Mapping[str, object]:
    """transformers serve's ``generation_config``: a JSON string (or an object)."""
    raw = body.get("generation_config")
    if raw is None:
        return {}
    if isinstance(raw, str):
        try:
            raw = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise BadRequest("generation_config is not valid JSON") from None
    if not isinstance(raw, Mapping):
        raise BadRequest("generation_config must be a JSON object")
    return raw


def parse_request(body: object, chat: bool, config: CalibrationConfig) -> GenerationRequest:
    if not isinstance(body, Mapping):
        raise BadRequest("the request body must be a JSON object")
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("messages must be a non-empty list")
        prompt_tokens = count_tokens(chat_text(messages)) + chat_template_count(
            messages, config.chat_template_tokens, config.chat_message_tokens
        )
        tokens = tuple(chat_text(messages).split())
    else:
        if "prompt" not in body:
            raise BadRequest("prompt is required")
        counted = prompt_token_count(body["prompt"])
        if counted is None:
            raise BadRequest("prompt must be a string, a list of token ids, or one string")
        prompt_tokens = counted
        tokens = prompt_key_tokens(body["prompt"])
    gen = _generation_config(body)
    max_tokens = _int_field(body, "max_tokens")
    if max_tokens is None:
        max_tokens = _int_field(body, "max_completion_tokens")
    if max_tokens is None:
        n_predict = _int_field(body, "n_predict")
        max_tokens = n_predict if n_predict is not None and n_predict >= 0 else None
    if max_tokens is None:
        max_tokens = _int_field(gen, "max_new_tokens")
    if max_tokens is None:
        max_tokens = config.default_max_tokens
    if max_tokens < 1:
        raise BadRequest("max_tokens must be at least 1")
    min_tokens = _int_field(body, "min_tokens")
    if min_tokens is None:
        min_tokens = _int_field(gen, "min_new_tokens")
    stream_options = body.get("stream_options")
    include_usage = isinstance(stream_options, Mapping) and bool(
        stream_options.get("include_usage")
    )
    model = body.get("model")
    return GenerationRequest(
        chat=chat,
        stream=bool(body.get("stream", False)),
        include_usage=include_usage,
        model=model if isinstance(model, str) and model else config.model_name,
        prompt_tokens=prompt_tokens,
        max_tokens=max_tokens,
        min_tokens=max(0, min_tokens or 0),
        ignore_eos=bool(body.get("ignore_eos", False)),
        tokens=tokens,
    )


def make_plan(req: GenerationRequest, faults: frozenset[str], config: CalibrationConfig) -> Plan:
    n = req.max_tokens
    natural = config.natural_length_tokens
    if natural is None or req.ignore_eos:
        length = n
    else:
        length = min(n, max(natural, req.min_tokens))
    finish: str | None = "length" if length >= n else "stop"
    if "short_completion" in faults:
        length, finish = max(1, n // 2), "stop"
    if "long_completion" in faults:
        length, finish = n + config.long_completion_extra_tokens, "length"
    if "finish_reason" in faults:
        finish = "stop"
    half = max(1, length // 2)
    cut = "cut" in faults
    reset = "reset" in faults and not cut
    sent = half if (cut or reset or "usage_inflated" in faults) else length
    if "usage_inflated_2pct" in faults:
        # claims the whole length; the stream carried 2% fewer (rounded up to a token)
        sent = max(1, length - -(-length * 2 // 100))
    usage_completion: int | None = sent
    usage_prompt: int | None = req.prompt_tokens
    if "usage_mismatch" in faults:
        usage_completion = max(0, sent + config.usage_mismatch_delta)
    if "usage_inflated" in faults or "usage_inflated_2pct" in faults:
        usage_completion = length  # claims the whole length; the stream carried less
    if "prompt_tokens_mismatch" in faults:
        usage_prompt = req.prompt_tokens + config.prompt_tokens_extra
    if "prompt_tokens_short" in faults:
        usage_prompt = max(1, req.prompt_tokens // 2)
    if "prompt_tokens_inflated" in faults:
        usage_prompt = 2 * req.prompt_tokens
    if "usage_missing" in faults or cut or reset:
        usage_completion = usage_prompt = None
    k = config.tokens_per_chunk
    if "multi_token_chunks" in faults:
        k = max(2, k)
    return Plan(
        tokens=sent,
        finish_reason=None if (cut or reset) else finish,
        usage_completion_tokens=usage_completion,
        usage_prompt_tokens=usage_prompt,
        tokens_per_chunk=k,
        break_after=length // 2,
        cut=cut,
        reset=reset,
        stall="stall" in faults,
        malformed="malformed_json" in faults,
        error_event="error_event" in faults,
        undecodable="undecodable" in faults,
        oversized="oversized_event" in faults,
        after_done="data_after_done" in faults,
        heartbeat_stall="heartbeat_stall" in faults,
        whitespace="whitespace_chunks" in faults,
        total_extra=config.usage_total_extra if "usage_total_mismatch" in faults else 0,
    )
