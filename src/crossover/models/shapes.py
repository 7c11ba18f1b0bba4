"""Architecture shapes of real models, as cited data, for random-weight checkpoints.

Each entry copies the numbers from the model's published ``config.json`` (the
source is kept beside it). Only what sets serving cost is kept: dimensions, heads,
vocabulary, RoPE base and context. RoPE *scaling* (Llama 3.1/3.2's ``llama3``
rule) is not reproduced: it changes no tensor shape and no per-token cost.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from crossover.errors import UsageError


@dataclass(frozen=True)
class ArchShape:
    """One decoder-only transformer's shape. ``family`` picks tensor names and biases."""

    name: str
    family: str  # "llama" or "qwen2"
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    rope_theta: float
    ctx: int
    rms_eps: float
    tie_embeddings: bool
    vocab_file: str  # vocab-only GGUF in llama.cpp's models/ that supplies the tokenizer
    source: str
    head_dim: int | None = None

    @property
    def head_dim_(self) -> int:
        return self.head_dim if self.head_dim is not None else self.hidden // self.heads

    def n_params(self) -> int:
        hd = self.head_dim_
        attn = self.hidden * hd * (2 * self.heads + 2 * self.kv_heads)
        if self.family == "qwen2":
            attn += hd * (self.heads + 2 * self.kv_heads)
        per_layer = attn + 3 * self.hidden * self.ffn + 2 * self.hidden
        embed = self.vocab * self.hidden * (1 if self.tie_embeddings else 2)
        return self.layers * per_layer + embed + self.hidden

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


_L3 = "ggml-vocab-llama-bpe.gguf"  # Llama 3's tokenizer (tiktoken BPE, 128256 tokens)
_L2 = "ggml-vocab-llama-spm.gguf"  # Llama 2's SentencePiece tokenizer (32000 tokens)
_QW = "ggml-vocab-qwen2.gguf"  # Qwen2/2.5's BPE tokenizer

KNOWN_SHAPES: dict[str, ArchShape] = {
    s.name: s
    for s in (
        ArchShape(
            "llama-3-8b", "llama", 4096, 32, 32, 8, 14336, 128256, 500000.0, 8192, 1e-5,
            False, _L3, "huggingface.co/meta-llama/Meta-Llama-3-8B config.json",
        ),
        ArchShape(
            "llama-3-70b", "llama", 8192, 80, 64, 8, 28672, 128256, 500000.0, 8192, 1e-5,
            False, _L3, "huggingface.co/meta-llama/Meta-Llama-3-70B config.json",
        ),
        ArchShape(
            "llama-3.2-1b", "llama", 2048, 16, 32, 8, 8192, 128256, 500000.0, 131072, 1e-5,
            True, _L3, "huggingface.co/meta-llama/Llama-3.2-1B config.json (rope_scaling omitted)",
        ),
        ArchShape(
            "llama-3.2-3b", "llama", 3072, 28, 24, 8, 8192, 128256, 500000.0, 131072, 1e-5,
            True, _L3, "huggingface.co/meta-llama/Llama-3.2-3B config.json (rope_scaling omitted)",
        ),
        ArchShape(
            "llama-2-7b", "llama", 4096, 32, 32, 32, 11008, 32000, 10000.0, 4096, 1e-5,
            False, _L2, "huggingface.co/meta-llama/Llama-2-7b-hf config.json",
        ),
        ArchShape(
            "qwen2.5-0.5b", "qwen2", 896, 24, 14, 2, 4864, 151936, 1000000.0, 32768, 1e-6,
            True, _QW, "huggingface.co/Qwen/Qwen2.5-0.5B config.json",
        ),
        ArchShape(
            "qwen2.5-7b-instruct", "qwen2", 3584, 28, 28, 4, 18944, 152064, 1000000.0, 32768,
            1e-6, False, _QW, "huggingface.co/Qwen/Qwen2.5-7B-Instruct config.json",
        ),
        # Not a real model: the smallest Llama-3-tokenizer shape that exercises every
        # tensor kind, so tests can write and serve it on a 2-core CPU in seconds.
        ArchShape(
            "tiny-llama", "llama", 256, 4, 4, 2, 768, 128256, 500000.0, 4096, 1e-5,
            True, _L3, "crossover test shape (not TinyLlama-1.1B)",
        ),
    )
}  # fmt: skip


def get_shape(name: str) -> ArchShape:
    """A known shape by name; UsageError listing the known ones otherwise."""
    try:
        return KNOWN_SHAPES[name]
    except KeyError:
        known = ", ".join(sorted(KNOWN_SHAPES))
        raise UsageError(f"unknown architecture {name!r}; known: {known}") from None


_FAMILIES = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2"}
_DEFAULT_VOCAB = {128256: _L3, 32000: _L2, 151936: _QW, 152064: _QW}


def _int(cfg: dict[str, Any], key: str, path: Path) -> int:
    val = cfg.get(key)
    if not isinstance(val, int) or isinstance(val, bool) or val <= 0:
        raise UsageError(f"{path}: {key!r} must be a positive integer, got {val!r}")
    return val


def shape_from_hf_config(path: Path, vocab_file: str | None = None) -> ArchShape:
    """An ArchShape from an HF ``config.json`` (llama, mistral or qwen2 model_type)."""
    try:
        cfg = json.loads(path.read_text())
    except OSError as exc:
        raise UsageError(f"cannot read config {path}: {exc}") from exc
    except ValueError as exc:
        raise UsageError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(cfg, dict):
        raise UsageError(f"{path}: expected a JSON object")
    model_type = cfg.get("model_type")
    family = _FAMILIES.get(str(model_type))
    if family is None:
        raise UsageError(
            f"{path}: model_type {model_type!r} is not supported (llama, mistral, qwen2)"
        )
    vocab = _int(cfg, "vocab_size", path)
    heads = _int(cfg, "num_attention_heads", path)
    vf = vocab_file or _DEFAULT_VOCAB.get(vocab)
    if vf is None:
        raise UsageError(f"{path}: no default tokenizer for vocab_size {vocab}; pass --vocab")
    head_dim = cfg.get("head_dim")
    shape = ArchShape(
        name=path.parent.name or "custom",
        family=family,
        hidden=_int(cfg, "hidden_size", path),
        layers=_int(cfg, "num_hidden_layers", path),
        heads=heads,
        kv_heads=int(cfg.get("num_key_value_heads") or heads),
        ffn=_int(cfg, "intermediate_size", path),
        vocab=vocab,
        rope_theta=float(cfg.get("rope_theta", 10000.0)),
        ctx=int(cfg.get("max_position_embeddings", 4096)),
        rms_eps=float(cfg.get("rms_norm_eps", 1e-5)),
        tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        vocab_file=vf,
        source=str(path),
        head_dim=head_dim if isinstance(head_dim, int) else None,
    )
    validate_shape(shape)
    return shape


def validate_shape(shape: ArchShape) -> ArchShape:
    """Reject shapes llama.cpp and transformers cannot build."""
    if shape.heads % shape.kv_heads:
        raise UsageError(
            f"{shape.name}: attention heads ({shape.heads}) must be a multiple of "
            f"kv heads ({shape.kv_heads})"
        )
    if shape.head_dim is None and shape.hidden % shape.heads:
        raise UsageError(f"{shape.name}: hidden ({shape.hidden}) not divisible by heads")
    return shape


def with_name(shape: ArchShape, name: str) -> ArchShape:
    return replace(shape, name=name)
