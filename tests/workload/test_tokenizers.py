"""``--tokenizer FILE.gguf``: the GGUF's vocabulary as crossover's own tokenizer.json,
built without torch (transformers 5's GGUF reader imports torch, which the
``tokenizers`` extra does not install: there it failed with "Could not import module
'read_gguf_metadata'")."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from crossover.builds.cache import CACHE_ENV
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


def test_two_gguf_files_of_one_name_get_their_own_tokenizers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tokenizer cache is keyed by the file's name: another vocabulary in a file of the
    same name (two folders' ``model.gguf``) must not be read with the first's."""
    vocabs = [vocab_gguf("ggml-vocab-llama-bpe.gguf"), vocab_gguf("ggml-vocab-qwen2.gguf")]
    text = "Hello world, crossover counts tokens."
    truth = [load_tokenizer(str(v)).encode(text) for v in vocabs]  # under their own names
    assert truth[0] != truth[1]
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))  # the copies: built afresh
    files = []
    for folder, vocab in zip(("a", "b"), vocabs, strict=True):
        (tmp_path / folder).mkdir()
        files.append(tmp_path / folder / "model.gguf")
        shutil.copy(vocab, files[-1])
    assert [load_tokenizer(str(f)).encode(text) for f in files] == truth
    assert load_tokenizer(str(files[0])).encode(text) == truth[0]  # each its own, cached
