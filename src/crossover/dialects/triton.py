"""Triton's generate extension against the ``tensorrt_llm`` ensemble.

``POST /v2/models/{model}/generate_stream`` with ``text_input``; responses are SSE
events of ``{"text_output": ...}``; the stream ends without a ``[DONE]`` sentinel.
Matched work: ``max_tokens`` and ``min_tokens`` (there is no ``ignore_eos`` input).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from crossover.dialects.base import ChunkInfo, Endpoint, RequestSpec
from crossover.dialects.openai import as_int


@dataclass(frozen=True)
class TritonDialect:
    name: str  # the engine spec's
    has_done_sentinel: bool = False
    endpoints: tuple[Endpoint, ...] = ("completions",)
    server_tokenize: bool = False
    #: a model's metadata, or the repository index (``crossover.dialects.discovery``)
    model_lists: tuple[str, ...] = ("repository",)

    def path(self, spec: RequestSpec) -> str:
        return f"/v2/models/{spec.model}/generate_stream"

    def body(self, spec: RequestSpec) -> dict[str, Any]:
        return {
            "text_input": spec.prompt,
            "max_tokens": spec.output_tokens,
            "min_tokens": spec.output_tokens,
            "stream": True,
            "return_num_output_tokens": True,
            "return_num_input_tokens": True,
        }

    def parse(self, event: dict[str, Any], endpoint: Endpoint) -> ChunkInfo:
        text = event.get("text_output")
        return ChunkInfo(
            text=text if isinstance(text, str) else "",
            completion_tokens=as_int(event.get("num_output_tokens")),
            prompt_tokens=as_int(event.get("num_input_tokens")),
        )
