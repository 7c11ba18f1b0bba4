"""The OpenAI-compatible dialect and the engines that extend it.

Each engine gets the fields that force exactly N generated tokens and only fields
it accepts: some servers reject unknown fields with 400/422.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from crossover.dialects.base import ChunkInfo, Endpoint, RequestSpec


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class OpenAIDialect:
    """Standard fields only: ``max_tokens`` and usage. Cannot force N tokens,
    so a model that stops at EOS is caught by verification, not hidden."""

    name: str = "openai"
    has_done_sentinel: bool = True
    endpoints: tuple[Endpoint, ...] = ("completions", "chat")
    include_stream_options: bool = True

    def path(self, spec: RequestSpec) -> str:
        return "/v1/chat/completions" if spec.endpoint == "chat" else "/v1/completions"

    def matched_fields(self, n: int) -> dict[str, Any]:
        return {"max_tokens": n}

    def body(self, spec: RequestSpec) -> dict[str, Any]:
        body: dict[str, Any] = {"model": spec.model, "stream": True}
        if spec.endpoint == "chat":
            body["messages"] = [{"role": "user", "content": spec.prompt}]
        else:
            body["prompt"] = spec.prompt
        body.update(self.matched_fields(spec.output_tokens))
        if self.include_stream_options:
            body["stream_options"] = {"include_usage": True}
        return body

    def parse(self, event: dict[str, Any], endpoint: Endpoint) -> ChunkInfo:
        text = ""
        finish: str | None = None
        choices = event.get("choices")
        if isinstance(choices, list) and choices:
            choice = choices[0]
            if isinstance(choice, dict):
                if endpoint == "chat":
                    delta = choice.get("delta") or choice.get("message") or {}
                    if isinstance(delta, dict):
                        parts = [
                            delta.get(k) for k in ("content", "reasoning_content", "reasoning")
                        ]
                        text = "".join(p for p in parts if isinstance(p, str))
                else:
                    t = choice.get("text")
                    text = t if isinstance(t, str) else ""
                fr = choice.get("finish_reason")
                finish = fr if isinstance(fr, str) else None
        prompt_tokens = completion_tokens = None
        usage = event.get("usage")
        if isinstance(usage, dict):
            prompt_tokens = _int_or_none(usage.get("prompt_tokens"))
            completion_tokens = _int_or_none(usage.get("completion_tokens"))
        return ChunkInfo(
            text=text,
            finish_reason=finish,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            emitted_ns=_int_or_none(event.get("crossover_emit_ns")),
        )


@dataclass(frozen=True)
class VLLMDialect(OpenAIDialect):
    """vLLM: ``min_tokens`` + ``ignore_eos`` force the length."""

    name: str = "vllm"

    def matched_fields(self, n: int) -> dict[str, Any]:
        return {"max_tokens": n, "min_tokens": n, "ignore_eos": True}


@dataclass(frozen=True)
class SGLangDialect(VLLMDialect):
    """SGLang's OpenAI API: same fields; ``include_usage`` defaults to false there."""

    name: str = "sglang"


@dataclass(frozen=True)
class TRTLLMDialect(VLLMDialect):
    """trtllm-serve: its request models forbid unknown fields, so nothing extra."""

    name: str = "trtllm"


@dataclass(frozen=True)
class LlamaCppDialect(OpenAIDialect):
    """llama-server: ``max_tokens`` + ``ignore_eos``; it has no ``min_tokens``.

    One reported build echoed ``ignore_eos`` and still stopped at EOS, which is why
    every request is verified from usage rather than trusted.
    """

    name: str = "llamacpp"

    def matched_fields(self, n: int) -> dict[str, Any]:
        return {"max_tokens": n, "ignore_eos": True}


@dataclass(frozen=True)
class TransformersDialect(OpenAIDialect):
    """transformers serve: ``ignore_eos``/``min_tokens`` get 422; the length is forced
    through ``generation_config``, a JSON *string*."""

    name: str = "transformers"

    def matched_fields(self, n: int) -> dict[str, Any]:
        gen = json.dumps({"min_new_tokens": n, "max_new_tokens": n}, separators=(",", ":"))
        return {"max_tokens": n, "generation_config": gen}
