"""The HF tokenizer built from a vocab GGUF: llama.cpp's pre-tokenizer whatever
transformers' converter chose, and the round trip that refuses a tokenizer splitting its
own tokens (transformers 5.17 gave Llama 3's vocabulary GPT-2's regex on the H200)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crossover.errors import UsageError
from crossover.models import hf_tokenizer
from crossover.models.hf_tokenizer import round_trip_share, set_pre_tokenizer
from crossover.models.synth import SynthResult, ensure_synth

GPT2_BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                   "use_regex": True}  # fmt: skip


@pytest.fixture(scope="module")
def llama3() -> dict[str, Any]:
    tiny: SynthResult = ensure_synth("tiny-llama", ("hf",))
    assert tiny.hf_dir is not None
    data: dict[str, Any] = json.loads((tiny.hf_dir / "tokenizer.json").read_text())
    return data


def _encode(data: dict[str, Any], text: str) -> list[int]:
    from tokenizers import Tokenizer

    return list(Tokenizer.from_str(json.dumps(data)).encode(text, add_special_tokens=False).ids)


def test_gpt2_regex_splits_llama3_tokens_and_the_round_trip_sees_it(
    llama3: dict[str, Any],
) -> None:
    wrong = json.loads(json.dumps(llama3))
    wrong["pre_tokenizer"] = GPT2_BYTE_LEVEL
    assert round_trip_share(json.dumps(llama3)) == 1.0
    assert round_trip_share(json.dumps(wrong)) < 0.9  # 81% measured
    # "_contract" is one of Llama 3's tokens; GPT-2's regex cuts the "_" off first
    assert len(_encode(llama3, "_contract")) == 1
    assert len(_encode(wrong, "_contract")) == 2


def test_set_pre_tokenizer_restores_llamacpp_regex(llama3: dict[str, Any]) -> None:
    wrong = json.loads(json.dumps(llama3))
    wrong["pre_tokenizer"] = GPT2_BYTE_LEVEL
    assert set_pre_tokenizer(wrong, "llama-bpe")
    assert wrong["pre_tokenizer"] == llama3["pre_tokenizer"]
    assert round_trip_share(json.dumps(wrong)) == 1.0
    assert not set_pre_tokenizer(wrong, "some-new-pre")


def test_an_unknown_pre_that_splits_its_tokens_is_refused(
    llama3: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The build fixes what it knows and refuses, in one line, what it cannot."""
    from crossover.builds.llamacpp import vocab_gguf

    wrong = json.loads(json.dumps(llama3))
    wrong["pre_tokenizer"] = GPT2_BYTE_LEVEL
    (tmp_path / "tokenizer.json").write_text(json.dumps(wrong))
    monkeypatch.setattr(hf_tokenizer, "_PRE_REGEX", {})
    with pytest.raises(UsageError, match=r"encodes only \d+% of its own tokens"):
        hf_tokenizer._fix_and_check(vocab_gguf("ggml-vocab-llama-bpe.gguf"), tmp_path)
    monkeypatch.undo()
    hf_tokenizer._fix_and_check(vocab_gguf("ggml-vocab-llama-bpe.gguf"), tmp_path)
    fixed = json.loads((tmp_path / "tokenizer.json").read_text())
    assert fixed["pre_tokenizer"] == llama3["pre_tokenizer"]


# transformers 5.17's converter output for Llama 3's vocabulary (seen on the H200): a
# SentencePiece decoder and byte fallback on a byte-level BPE
SPM_DECODER = {"type": "Sequence", "decoders": [
    {"type": "ByteFallback"}, {"type": "Fuse"},
    {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
    {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}  # fmt: skip


def test_sentencepiece_parts_on_a_byte_level_bpe_are_replaced(
    llama3: dict[str, Any], tmp_path: Path
) -> None:
    from crossover.builds.llamacpp import vocab_gguf

    wrong = json.loads(json.dumps(llama3))
    wrong["decoder"] = SPM_DECODER
    wrong["normalizer"] = {"type": "Sequence", "normalizers": []}
    wrong["model"]["byte_fallback"] = True
    wrong["model"]["fuse_unk"] = True
    assert round_trip_share(json.dumps(wrong)) < 0.9  # 55% measured: " the" decodes to "the"
    (tmp_path / "tokenizer.json").write_text(json.dumps(wrong))
    hf_tokenizer._fix_and_check(vocab_gguf("ggml-vocab-llama-bpe.gguf"), tmp_path)
    fixed = json.loads((tmp_path / "tokenizer.json").read_text())
    assert round_trip_share(json.dumps(fixed)) == 1.0
    text = "The contract's 12345 terms,\n\n  indented _contract"
    assert _encode(fixed, text) == _encode(llama3, text)
    assert not hf_tokenizer.set_byte_level_parts(fixed)  # nothing left to change


def test_the_converter_is_found_where_this_transformers_keeps_it() -> None:
    pytest.importorskip("transformers")
    assert hf_tokenizer._gguf_converter() is not None
