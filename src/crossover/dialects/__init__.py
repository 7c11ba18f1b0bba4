"""Request dialects: one per engine. Each builds a body and parses a chunk (pure)."""

from __future__ import annotations

from crossover.dialects.base import ChunkInfo, Dialect, Endpoint, RequestSpec
from crossover.dialects.openai import (
    LlamaCppDialect,
    OpenAIDialect,
    SGLangDialect,
    TransformersDialect,
    TRTLLMDialect,
    VLLMDialect,
)
from crossover.dialects.triton import TritonDialect
from crossover.errors import UsageError, unknown_choice

#: every dialect by its own name (an engine's spec names the one it speaks)
DIALECTS: dict[str, Dialect] = {
    d.name: d
    for d in (
        OpenAIDialect(),
        VLLMDialect(),
        SGLangDialect(),
        TRTLLMDialect(),
        TritonDialect(),
        LlamaCppDialect(),
        TransformersDialect(),
    )
}


def get_dialect(name: str) -> Dialect:
    try:
        return DIALECTS[name]
    except KeyError:
        raise UsageError(unknown_choice("engine dialect", name, DIALECTS)) from None


__all__ = ["DIALECTS", "ChunkInfo", "Dialect", "Endpoint", "RequestSpec", "get_dialect"]
