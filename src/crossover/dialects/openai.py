"""The OpenAI-compatible dialect and the engines that extend it.

Each engine gets the fields that force exactly N generated tokens and only fields
it accepts: some servers reject unknown fields with 400/422.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from crossover.dialects.base import ChunkInfo, Endpoint, RequestSpec


def as_int(value: object) -> int | None:
    """A JSON number that is a whole number: ``256``, or ``256.0`` (JSON has one number
    type; a server may write an integer as a float). ``None`` for anything else (null, a
    fraction, a string, a boolean)."""
    if type(value) is int:
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _choice_text(choice: dict[str, Any], chat: bool) -> str:
    """A choice's text: a chat delta's (or message's) content, a completion's ``text``."""
    if chat:
        delta = choice.get("delta") or choice.get("message") or {}
        return _delta_text(delta) if type(delta) is dict else ""
    t = choice.get("text")
    return t if type(t) is str else ""


def _delta_text(delta: dict[str, Any]) -> str:
    """Generated text of a chat delta: content and reasoning. A server that sends the
    reasoning under both of its names (``reasoning_content`` and ``reasoning``) sends it
    once."""
    content = delta.get("content")
    text = content if type(content) is str else ""
    r1, r2 = delta.get("reasoning_content"), delta.get("reasoning")
    if r1 is None and r2 is None:
        return text  # the common case: no reasoning
    if isinstance(r1, str):
        text += r1
    if isinstance(r2, str) and r2 != r1:
        text += r2
    return text


def _logprob_count(logprobs: object) -> int | None:
    """Tokens a choice's logprobs account for: chat ``{"content": [...]}``, completions
    ``{"tokens": [...]}``; ``None`` when absent or null (they are never asked for, but a
    server may send them, and then they are a witness)."""
    if not isinstance(logprobs, dict):
        return None
    for key in ("content", "tokens", "token_logprobs"):
        entries = logprobs.get(key)
        if isinstance(entries, list):
            return len(entries)
    return None


def _stated_count(choice: dict[str, Any]) -> int | None:
    """Tokens a choice states it carries, one entry per token: its logprobs, else its
    ``token_ids`` (vLLM's, with ``return_token_ids``); ``None`` when it states neither."""
    lp = choice.get("logprobs")
    if lp is not None:
        count = _logprob_count(lp)
        if count is not None:
            return count
    ids = choice.get("token_ids")
    return len(ids) if type(ids) is list else None


def token_event(event: dict[str, Any], chat: bool) -> tuple[str, str | None, int | None] | None:
    """``OpenAIDialect.parse`` for the event a stream is made of (one choice, index 0, no
    logprobs or token ids, no usage, no llama.cpp timings): its (text, finish reason, emitted_ns),
    every other field of its ``ChunkInfo`` being the default; ``None`` for any other
    event, which ``parse`` then reads. A transport's per-token path: no ``ChunkInfo``
    (a frozen dataclass, nine setattrs) and no walk over ``choices`` and ``usage``."""
    choices = event.get("choices")
    if type(choices) is not list or len(choices) != 1:
        return None
    choice = choices[0]
    if type(choice) is not dict:
        return None
    if choice.get("logprobs") is not None or choice.get("token_ids") is not None:
        return None
    idx = choice.get("index")
    if idx is not None and (type(idx) is not int or idx != 0):
        return None
    if type(event.get("usage")) is dict or type(event.get("timings")) is dict:
        return None  # isinstance in parse: a dict subclass cannot come from JSON
    fr = choice.get("finish_reason")
    return (
        _choice_text(choice, chat),
        fr if type(fr) is str else None,
        as_int(event.get("crossover_emit_ns")),
    )


@dataclass(frozen=True)
class OpenAIDialect:
    """Standard fields only: ``max_tokens`` and usage. Cannot force N tokens,
    so a model that stops at EOS is caught by verification, not hidden."""

    #: the plain dialect's name; an engine's spec names its own dialect
    name: str = "openai"
    has_done_sentinel: bool = True
    endpoints: tuple[Endpoint, ...] = ("completions", "chat")
    include_stream_options: bool = True
    server_tokenize: bool = True
    #: ``GET /v1/models`` (``crossover.dialects.discovery``)
    model_lists: tuple[str, ...] = ("models",)

    def path(self, spec: RequestSpec) -> str:
        return "/v1/chat/completions" if spec.endpoint == "chat" else "/v1/completions"

    def matched_fields(self, n: int) -> dict[str, Any]:
        return {"max_tokens": n}

    def body(self, spec: RequestSpec) -> dict[str, Any]:
        body: dict[str, Any] = {"model": spec.model, "stream": True}
        if spec.endpoint == "chat":
            turns = spec.messages or (("user", spec.prompt),)
            body["messages"] = [{"role": role, "content": text} for role, text in turns]
        else:
            body["prompt"] = spec.prompt
        body.update(self.matched_fields(spec.output_tokens))
        if self.include_stream_options:
            body["stream_options"] = {"include_usage": True}
        return body

    def parse(self, event: dict[str, Any], endpoint: Endpoint) -> ChunkInfo:
        """Every entry of ``choices``: index 0 (the one asked for; an entry without an
        index is taken by its position) gives the text, the finish reason and the stated
        token count, summed over its entries; any other index is counted in
        ``other_choices``. Fields that are null count as absent."""
        text = ""
        finish: str | None = None
        n_tokens: int | None = None
        others = 0
        choices = event.get("choices")
        if isinstance(choices, list):
            chat = endpoint == "chat"
            for pos, choice in enumerate(choices):
                if type(choice) is not dict:
                    continue
                idx = choice.get("index")
                if idx is None:
                    idx = pos
                elif idx != 0 or idx is False:
                    idx = as_int(idx)
                piece = _choice_text(choice, chat)
                fr = choice.get("finish_reason")
                if idx != 0:
                    if piece or type(fr) is str:
                        others += 1
                    continue
                text += piece
                if type(fr) is str:
                    finish = fr
                count = _stated_count(choice)
                if count is not None:
                    n_tokens = count if n_tokens is None else n_tokens + count
        prompt_tokens = completion_tokens = total_tokens = cached = None
        usage = event.get("usage")
        if isinstance(usage, dict):
            prompt_tokens = as_int(usage.get("prompt_tokens"))
            completion_tokens = as_int(usage.get("completion_tokens"))
            total_tokens = as_int(usage.get("total_tokens"))
            details = usage.get("prompt_tokens_details")
            if isinstance(details, dict):
                cached = as_int(details.get("cached_tokens"))
        timings = event.get("timings")  # llama-server: cache_n prompt tokens reused
        if cached is None and isinstance(timings, dict):
            cached = as_int(timings.get("cache_n"))
        return ChunkInfo(
            text=text,
            finish_reason=finish,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            n_tokens=n_tokens,
            emitted_ns=as_int(event.get("crossover_emit_ns")),
            total_tokens=total_tokens,
            other_choices=others,
            cached_tokens=cached,
        )


@dataclass(frozen=True)
class VLLMDialect(OpenAIDialect):
    """vLLM: ``min_tokens`` + ``ignore_eos`` force the length."""

    def matched_fields(self, n: int) -> dict[str, Any]:
        return {"max_tokens": n, "min_tokens": n, "ignore_eos": True}


@dataclass(frozen=True)
class SGLangDialect(VLLMDialect):
    """SGLang's OpenAI API: same fields; ``include_usage`` defaults to false there."""

    server_tokenize: bool = False


@dataclass(frozen=True)
class TRTLLMDialect(VLLMDialect):
    """trtllm-serve: its request models forbid unknown fields, so nothing extra."""

    server_tokenize: bool = False


@dataclass(frozen=True)
class LlamaCppDialect(OpenAIDialect):
    """llama-server: ``max_tokens`` + ``ignore_eos``; it has no ``min_tokens``.

    One reported build echoed ``ignore_eos`` and still stopped at EOS, which is why
    every request is verified from usage rather than trusted.
    """

    #: ``/props`` names the model it loaded where ``/v1/models`` does not answer
    model_lists: tuple[str, ...] = ("models", "props")

    def matched_fields(self, n: int) -> dict[str, Any]:
        return {"max_tokens": n, "ignore_eos": True}


@dataclass(frozen=True)
class TransformersDialect(OpenAIDialect):
    """transformers serve: ``ignore_eos``/``min_tokens`` get 422; the length is forced
    through ``generation_config``, a JSON *string*."""

    server_tokenize: bool = False
    #: ``/v1/models`` fails without an HF cache folder: ``/health`` is its word
    model_lists: tuple[str, ...] = ("models", "health")

    def matched_fields(self, n: int) -> dict[str, Any]:
        gen = json.dumps({"min_new_tokens": n, "max_new_tokens": n}, separators=(",", ":"))
        return {"max_tokens": n, "generation_config": gen}
