"""Request dialects: one per wire format. Each builds a body and parses a chunk (pure).

An engine's spec holds the dialect it speaks, named after it; the registry
(``crossover.engines.registry.dialect``) finds a dialect by name, the plain ``openai``
one included.
"""

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

__all__ = [
    "ChunkInfo",
    "Dialect",
    "Endpoint",
    "LlamaCppDialect",
    "OpenAIDialect",
    "RequestSpec",
    "SGLangDialect",
    "TRTLLMDialect",
    "TransformersDialect",
    "TritonDialect",
    "VLLMDialect",
]
