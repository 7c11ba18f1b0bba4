"""``--tokenizer FILE.gguf``: the GGUF's vocabulary as crossover's own tokenizer.json,
built without torch (transformers 5's GGUF reader imports torch, which the
``tokenizers`` extra does not install: there it failed with "Could not import module
'read_gguf_metadata'")."""

from __future__ import annotations

import sys

import pytest

from crossover.builds.llamacpp import vocab_gguf
from crossover.models.hf_tokenizer import cached_hf_tokenizer
from crossover.workload.tokenizers import HFTokenizer, load_tokenizer


def test_a_gguf_tokenizer_loads_without_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    path = vocab_gguf("ggml-vocab-llama-bpe.gguf")
    tok = load_tokenizer(str(path))
    assert tok.name == f"gguf:{path}"
    text = "Hello world, crossover counts tokens."
    ids = tok.encode(text)
    assert ids and tok.decode(ids) == text
    # the same ids as the tokenizer.json models synth/convert write for that vocabulary
    assert ids == HFTokenizer(cached_hf_tokenizer(path)).encode(text)
