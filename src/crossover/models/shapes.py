"""Architecture shapes of real models, as cited data, for random-weight checkpoints.

Each entry copies the numbers from the model's published ``config.json`` (the
source is kept beside it). Only what sets serving cost is kept: dimensions, heads,
vocabulary, RoPE base and context, and for mixture-of-experts models the expert
count, experts per token and expert width. RoPE *scaling* (Llama 3.1/3.2's
``llama3`` rule) is not reproduced: it changes no tensor shape and no per-token cost.

Families: ``llama`` and ``qwen2`` (dense), ``qwen3moe`` (Qwen3-MoE: q/k RMS norms, a
router and ``experts`` SwiGLU experts in every layer, no shared expert) and
``mixtral`` (Llama attention with Mixtral's sparse MoE block).
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
    family: str  # "llama", "qwen2", "qwen3moe" or "mixtral" (MOE_FAMILIES)
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
    #: mixture of experts (every layer): experts per layer, routed per token, and the
    #: width of one expert's SwiGLU (``moe_intermediate_size``); None for dense models
    experts: int | None = None
    experts_used: int | None = None
    expert_ffn: int | None = None
    #: the published layer count when ``layers`` was cut (``--layers``); None if whole
    full_layers: int | None = None

    @property
    def head_dim_(self) -> int:
        return self.head_dim if self.head_dim is not None else self.hidden // self.heads

    @property
    def is_moe(self) -> bool:
        return self.experts is not None

    @property
    def qk_norm(self) -> bool:
        """Per-head RMS norms on q and k (Qwen3)."""
        return self.family == "qwen3moe"

    def _attn_params(self) -> int:
        hd = self.head_dim_
        attn = self.hidden * hd * (2 * self.heads + 2 * self.kv_heads)
        if self.family == "qwen2":
            attn += hd * (self.heads + 2 * self.kv_heads)
        if self.qk_norm:
            attn += 2 * hd
        return attn + 2 * self.hidden  # with the two RMS norms

    def _ffn_params(self, experts: int) -> int:
        if self.experts is None or self.expert_ffn is None:
            return 3 * self.hidden * self.ffn
        return self.experts * self.hidden + experts * 3 * self.hidden * self.expert_ffn

    def _embed_params(self) -> int:
        return self.vocab * self.hidden * (1 if self.tie_embeddings else 2) + self.hidden

    def n_params(self) -> int:
        """All parameters (every expert of a mixture-of-experts model)."""
        per_layer = self._attn_params() + self._ffn_params(self.experts or 0)
        return self.layers * per_layer + self._embed_params()

    def n_active_params(self) -> int:
        """Parameters used per token: attention, the router and ``experts_used``
        experts, embeddings and output (all of them for a dense model)."""
        per_layer = self._attn_params() + self._ffn_params(self.experts_used or 0)
        return self.layers * per_layer + self._embed_params()

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


MOE_FAMILIES = ("qwen3moe", "mixtral")

_L3 = "ggml-vocab-llama-bpe.gguf"  # Llama 3's tokenizer (tiktoken BPE, 128256 tokens)
_L2 = "ggml-vocab-llama-spm.gguf"  # Llama 2's SentencePiece tokenizer (32000 tokens)
_QW = "ggml-vocab-qwen2.gguf"  # Qwen2/2.5's BPE tokenizer (Qwen3 uses the same)

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
        # Qwen3-MoE: intermediate_size (6144) is the dense width no layer uses here
        # (decoder_sparse_step 1, mlp_only_layers []); norm_topk_prob true; no shared
        # expert. 30.5 B parameters, 3.3 B active.
        ArchShape(
            "qwen3-30b-a3b", "qwen3moe", 2048, 48, 32, 4, 6144, 151936, 1000000.0, 40960,
            1e-6, False, _QW,
            "huggingface.co/Qwen/Qwen3-30B-A3B config.json (Qwen2.5's tokenizer, "
            "ggml-vocab-qwen2.gguf)",
            head_dim=128, experts=128, experts_used=8, expert_ffn=768,
        ),
        # Qwen3-235B-A22B: the Qwen3-MoE layout at 94 layers, 128 experts of width 1536,
        # 8 per token, no shared expert. 235 B parameters, 22 B active.
        ArchShape(
            "qwen3-235b-a22b", "qwen3moe", 4096, 94, 64, 4, 12288, 151936, 1000000.0, 40960,
            1e-6, False, _QW,
            "huggingface.co/Qwen/Qwen3-235B-A22B config.json (Qwen2.5's tokenizer, "
            "ggml-vocab-qwen2.gguf)",
            head_dim=128, experts=128, experts_used=8, expert_ffn=1536,
        ),
        # Llama 3.3 70B: Llama 3.1 70B's shapes (rope_scaling omitted). 70.6 B parameters.
        ArchShape(
            "llama-3.3-70b", "llama", 8192, 80, 64, 8, 28672, 128256, 500000.0, 131072, 1e-5,
            False, _L3,
            "huggingface.co/meta-llama/Llama-3.3-70B-Instruct config.json (rope_scaling omitted)",
        ),
        # Mixtral: every layer a sparse block of 8 SwiGLU experts of intermediate_size.
        # 46.7 B parameters, 12.9 B active.
        ArchShape(
            "mixtral-8x7b", "mixtral", 4096, 32, 32, 8, 14336, 32000, 1000000.0, 32768,
            1e-5, False, _L2, "huggingface.co/mistralai/Mixtral-8x7B-v0.1 config.json",
            experts=8, experts_used=2, expert_ffn=14336,
        ),
        # Not a real model: the smallest Llama-3-tokenizer shape that exercises every
        # tensor kind, so tests can write and serve it on a 2-core CPU in seconds.
        ArchShape(
            "tiny-llama", "llama", 256, 4, 4, 2, 768, 128256, 500000.0, 4096, 1e-5,
            True, _L3, "crossover test shape (not TinyLlama-1.1B)",
        ),
        # Test shapes, not real models: each MoE family at a size a 2-core CPU serves in
        # seconds, untied (as the real ones) so the whole-word output rows apply; the
        # Qwen3 one keeps head_dim * heads != hidden, as Qwen3-30B-A3B has.
        ArchShape(
            "tiny-qwen3-moe", "qwen3moe", 128, 2, 4, 2, 384, 151936, 1000000.0, 4096, 1e-6,
            False, _QW, "crossover test shape (Qwen3-MoE layout, not a real model)",
            head_dim=64, experts=8, experts_used=2, expert_ffn=64,
        ),
        ArchShape(
            "tiny-mixtral", "mixtral", 128, 2, 2, 1, 256, 32000, 1000000.0, 4096, 1e-5,
            False, _L2, "crossover test shape (Mixtral layout, not a real model)",
            experts=4, experts_used=2, expert_ffn=256,
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


_FAMILIES = {
    "llama": "llama",
    "mistral": "llama",
    "qwen2": "qwen2",
    "qwen3_moe": "qwen3moe",
    "mixtral": "mixtral",
}
#: config.json keys of (experts, experts per token, expert width) per MoE family
_MOE_KEYS = {
    "qwen3moe": ("num_experts", "num_experts_per_tok", "moe_intermediate_size"),
    "mixtral": ("num_local_experts", "num_experts_per_tok", "intermediate_size"),
}
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
            f"{path}: model_type {model_type!r} is not supported ({', '.join(_FAMILIES)})"
        )
    vocab = _int(cfg, "vocab_size", path)
    heads = _int(cfg, "num_attention_heads", path)
    vf = vocab_file or _DEFAULT_VOCAB.get(vocab)
    if vf is None:
        raise UsageError(f"{path}: no default tokenizer for vocab_size {vocab}; pass --vocab")
    head_dim = cfg.get("head_dim")
    moe: dict[str, int] = {}
    if family in _MOE_KEYS:
        if family == "qwen3moe" and (
            cfg.get("mlp_only_layers") or cfg.get("decoder_sparse_step", 1) != 1
        ):
            raise UsageError(f"{path}: only all-MoE layers are supported (no mlp_only_layers)")
        n, k, width = (_int(cfg, key, path) for key in _MOE_KEYS[family])
        moe = {"experts": n, "experts_used": k, "expert_ffn": width}
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
        **moe,
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
    if shape.family in MOE_FAMILIES:
        if not (shape.experts and shape.experts_used and shape.expert_ffn):
            raise UsageError(f"{shape.name}: a {shape.family} shape needs experts, "
                             "experts_used and expert_ffn")  # fmt: skip
        if shape.experts_used > shape.experts:
            raise UsageError(
                f"{shape.name}: experts per token ({shape.experts_used}) exceeds "
                f"experts ({shape.experts})"
            )
    elif shape.is_moe:
        raise UsageError(f"{shape.name}: family {shape.family!r} has no experts")
    return shape


def with_name(shape: ArchShape, name: str) -> ArchShape:
    return replace(shape, name=name)


def with_layers(shape: ArchShape, layers: int) -> ArchShape:
    """The same per-layer shape with ``layers`` layers, named ``<name>-L<layers>`` so
    every result that uses it says so (``full_layers`` keeps the published count)."""
    if layers <= 0:
        raise UsageError(f"--layers must be a positive integer; got {layers}")
    if layers > shape.layers:
        raise UsageError(f"--layers {layers}: {shape.name} has only {shape.layers} layers")
    if layers == shape.layers:
        return shape
    full = shape.full_layers or shape.layers
    return replace(shape, name=f"{shape.name}-L{layers}", layers=layers, full_layers=full)


def with_vocab(shape: ArchShape, vocab_file: str, n_tokens: int) -> ArchShape:
    """The shape with another tokenizer (``vocab_file`` of ``n_tokens`` tokens; the
    embedding and output take its size), named ``<name>-<vocab>`` and said in ``source``:
    e.g. Qwen3-MoE with Llama 3's tokenizer, a pairing known to serve everywhere."""
    if vocab_file == shape.vocab_file:
        return shape
    tag = vocab_file.removeprefix("ggml-vocab-").removesuffix(".gguf")
    return replace(
        shape,
        name=f"{shape.name}-{tag}",
        vocab_file=vocab_file,
        vocab=n_tokens,
        source=f"{shape.source}; tokenizer replaced by {vocab_file} (vocab {n_tokens})",
    )
