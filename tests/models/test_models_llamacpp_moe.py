"""The tiny mixture-of-experts checkpoints (Q8_0, both families) in the real
llama-server: the log shows the experts, greedy decoding gives exactly N whole-word
tokens, one streamed chunk each, and the tokenizer is the HF one written beside it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crossover.builds.llamacpp import vocab_gguf
from crossover.models.shapes import get_shape
from crossover.models.synth import ensure_synth
from tests.models.llama_server import llama_server, post, stream

pytestmark = pytest.mark.llamacpp

N = 12


@pytest.fixture(scope="module", params=["tiny-qwen3-moe", "tiny-mixtral"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str, Path]]:
    """(arch, base URL, server log) for the arch's Q8_0 GGUF."""
    arch = str(request.param)
    gguf = ensure_synth(arch, ("gguf",), "q8_0").gguf
    assert gguf is not None
    log = tmp_path_factory.mktemp(arch) / "llama-server.log"
    # -lv 4: the model's print_info lines (n_expert, file type) are logged from there
    with llama_server(gguf, log, ("-lv", "4")) as base:
        yield arch, base, log


def test_log_reports_the_experts(served: tuple[str, str, Path]) -> None:
    arch, _, log = served
    shape = get_shape(arch)
    text = log.read_text()
    assert re.search(rf"n_expert\s+= {shape.experts}\b", text), text[-3000:]
    assert re.search(rf"n_expert_used\s+= {shape.experts_used}\b", text)
    assert re.search(r"file type\s+= Q8_0", text)
    arch_name = "qwen3moe" if arch == "tiny-qwen3-moe" else "llama"
    assert re.search(rf"arch\s+= {arch_name}\b", text)


def test_greedy_gives_exactly_n_whole_word_tokens(served: tuple[str, str, Path]) -> None:
    _, base, _ = served
    body = {"prompt": "Hello", "n_predict": N, "ignore_eos": True, "temperature": 0.0}
    out = post(base + "/completion", body | {"return_tokens": True})
    assert out["tokens_predicted"] == N
    tokens = out["tokens"]
    assert len(tokens) == N
    # whole-word output rows: prompt and text re-tokenize to the prompt's and the
    # generated tokens (after the prompt: SentencePiece adds a space at the start)
    prompt = post(base + "/tokenize", {"content": "Hello"})["tokens"]
    both = post(base + "/tokenize", {"content": "Hello" + out["content"]})["tokens"]
    assert both == prompt + tokens
    again = post(base + "/completion", body)
    assert again["content"] == out["content"]  # greedy is deterministic
    chunks = [e for e in stream(base + "/completion", body) if e.get("content")]
    assert len(chunks) == N  # one printable chunk per token
    assert "".join(c["content"] for c in chunks) == out["content"]


@pytest.fixture(scope="module")
def hf_tokenizer(served: tuple[str, str, Path], tmp_path_factory: pytest.TempPathFactory) -> Any:
    from transformers import AutoTokenizer

    from crossover.models.hf_tokenizer import build_hf_tokenizer

    arch = served[0]
    out = tmp_path_factory.mktemp(arch + "-tok")
    build_hf_tokenizer(vocab_gguf(get_shape(arch).vocab_file), out)
    return AutoTokenizer.from_pretrained(str(out))


@pytest.mark.parametrize(
    "text",
    [
        "Hello world",
        "The quick brown fox jumps over 13 lazy dogs, doesn't it? 3.14159 and 1234567!",
        "  leading spaces,\ttabs\nnew lines\n\n  and   runs   of spaces  ",
        "Unicode: café, naïve, 東京, emoji 🙂, math ∑x²",
    ],
)
def test_hf_tokenizer_matches_llama_server(
    served: tuple[str, str, Path], hf_tokenizer: Any, text: str
) -> None:
    arch, base, _ = served
    if text.startswith("  ") and get_shape(arch).vocab_file == "ggml-vocab-llama-spm.gguf":
        # pre-existing, not MoE: for Llama 2's SentencePiece vocab the exported HF
        # tokenizer drops one of several leading spaces that llama.cpp keeps
        pytest.xfail("llama-spm: leading runs of spaces differ (HF 29871 vs llama.cpp 259)")
    plain = post(base + "/tokenize", {"content": text})["tokens"]
    assert hf_tokenizer(text, add_special_tokens=False)["input_ids"] == plain
    with_bos = post(base + "/tokenize", {"content": text, "add_special": True})["tokens"]
    assert hf_tokenizer(text)["input_ids"] == with_bos
