"""Optional heavy dependencies, imported the way crossover uses them."""

from __future__ import annotations

import os
from types import ModuleType


def import_transformers() -> ModuleType:
    """``transformers`` (raises ImportError when absent), without the advisory line it
    prints on import where PyTorch is missing: crossover uses only its tokenizers and
    GGUF converter, which need no PyTorch, so the line would only mislead. The variable
    is set for the import alone: an engine crossover launches keeps its own warnings."""
    key = "TRANSFORMERS_NO_ADVISORY_WARNINGS"
    before = os.environ.get(key)
    os.environ[key] = "1"
    try:
        import transformers
    finally:
        if before is None:
            del os.environ[key]
        else:
            os.environ[key] = before
    return transformers
