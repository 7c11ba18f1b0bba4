"""The synthetic tiny model in the real llama-server: it loads, generates, and tokenizes
exactly as the HF tokenizer written beside it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crossover.models.synth import SynthResult, ensure_synth
from tests.models.llama_server import llama_server, post

pytestmark = pytest.mark.llamacpp

SAMPLES = [
    "Hello world",
    "The quick brown fox jumps over 13 lazy dogs, doesn't it? 3.14159 and 1234567!",
    "  leading spaces,\ttabs\nnew lines\n\n  and   runs   of spaces  ",
    "Unicode: café, naïve, 東京, emoji 🙂, math ∑x²",
    "<|begin_of_text|>special token text in the prompt",
]


@pytest.fixture(scope="module")
def tiny() -> SynthResult:
    return ensure_synth("tiny-llama", ("gguf", "hf"))


@pytest.fixture(scope="module")
def server(tiny: SynthResult, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    assert tiny.gguf is not None
    log = tmp_path_factory.mktemp("server") / "llama-server.log"
    with llama_server(tiny.gguf, log) as base:
        yield base


def test_tiny_model_generates(server: str) -> None:
    out = post(server + "/completion", {"prompt": "Hello", "n_predict": 8, "ignore_eos": True})
    assert out["tokens_predicted"] == 8


@pytest.fixture(scope="module")
def hf_tokenizer(tiny: SynthResult) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny.hf_dir))


@pytest.mark.parametrize("text", SAMPLES)
def test_hf_tokenizer_matches_llama_server(server: str, hf_tokenizer: Any, text: str) -> None:
    tok = hf_tokenizer
    plain = post(server + "/tokenize", {"content": text})["tokens"]
    assert tok(text, add_special_tokens=False)["input_ids"] == plain
    with_bos = post(server + "/tokenize", {"content": text, "add_special": True})["tokens"]
    assert tok(text)["input_ids"] == with_bos


def test_cached_synth_is_reused(tiny: SynthResult) -> None:
    started = time.monotonic()
    again = ensure_synth("tiny-llama", ("gguf", "hf"))
    assert time.monotonic() - started < 1.0
    assert again.gguf == tiny.gguf
    assert Path(str(again.hf_dir)).is_dir()
