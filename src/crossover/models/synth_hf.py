"""Write a random-weight HF folder (config.json, safetensors, tokenizer) of a real shape.

Tensor names and config keys follow transformers' LlamaForCausalLM and
Qwen2ForCausalLM, so transformers and vLLM load the folder as they would the real
model. Weights are streamed into safetensors one tensor at a time.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from crossover.models.gguf_meta import read_gguf_metadata, vocab_tokens
from crossover.models.hf_tokenizer import build_hf_tokenizer
from crossover.models.random_weights import RANDOM_WEIGHTS_NOTICE, WeightSource, word_rows
from crossover.models.safetensors_io import STensor, write_sharded
from crossover.models.shapes import ArchShape
from crossover.models.tensors import tensor_specs

_ARCH = {"llama": ("LlamaForCausalLM", "llama"), "qwen2": ("Qwen2ForCausalLM", "qwen2")}
_TORCH_DTYPE = {"f16": "float16", "bf16": "bfloat16"}


def hf_config(
    shape: ArchShape, dtype: str, bos_id: int | None, eos_id: int | None
) -> dict[str, Any]:
    """config.json for ``shape`` (``architectures`` set: transformers serve needs it)."""
    arch, model_type = _ARCH[shape.family]
    cfg: dict[str, Any] = {
        "architectures": [arch],
        "model_type": model_type,
        "hidden_size": shape.hidden,
        "intermediate_size": shape.ffn,
        "num_hidden_layers": shape.layers,
        "num_attention_heads": shape.heads,
        "num_key_value_heads": shape.kv_heads,
        "head_dim": shape.head_dim_,
        "vocab_size": shape.vocab,
        "max_position_embeddings": shape.ctx,
        "rope_theta": shape.rope_theta,
        "rms_norm_eps": shape.rms_eps,
        "tie_word_embeddings": shape.tie_embeddings,
        "hidden_act": "silu",
        "initializer_range": 0.02,
        "attention_dropout": 0.0,
        "use_cache": True,
        "bos_token_id": bos_id,
        "eos_token_id": eos_id,
        "torch_dtype": _TORCH_DTYPE[dtype],
        "dtype": _TORCH_DTYPE[dtype],
        "crossover_random_weights": True,
        "crossover_note": RANDOM_WEIGHTS_NOTICE,
        "crossover_shape_source": shape.source,
        "crossover_output_rows": "whole-word tokens only (random_weights.word_rows)"
        if not shape.tie_embeddings
        else "all (tied embeddings)",
    }
    if shape.family == "llama":
        cfg.update({"attention_bias": False, "mlp_bias": False, "pretraining_tp": 1})
    else:
        cfg.update(
            {
                "use_sliding_window": False,
                "sliding_window": shape.ctx,
                "max_window_layers": shape.layers,
            }
        )
    return cfg


def write_hf(
    shape: ArchShape,
    vocab_path: Path,
    out_dir: Path,
    dtype: str,
    seed: int = 0,
    on_tensor: Callable[[int], None] | None = None,
    max_shard_bytes: int = 5_000_000_000,
) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    meta = read_gguf_metadata(vocab_path, "tokenizer.ggml.")
    bos = meta.get("tokenizer.ggml.bos_token_id")
    eos = meta.get("tokenizer.ggml.eos_token_id")
    bos_id = int(bos.value) if bos is not None else None
    eos_id = int(eos.value) if eos is not None else None
    cfg = hf_config(shape, dtype, bos_id, eos_id)
    (out_dir / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    gen = {"bos_token_id": bos_id, "eos_token_id": eos_id, "do_sample": False}
    (out_dir / "generation_config.json").write_text(json.dumps(gen, indent=2) + "\n")

    source = WeightSource(dtype, seed)
    st_dtype = "BF16" if dtype == "bf16" else "F16"
    tokens, model = vocab_tokens(meta, vocab_path)
    keep = word_rows(tokens, model, shape.vocab)
    tensors: list[STensor] = []
    for spec in tensor_specs(shape):
        make: Callable[[], Any]
        if spec.kind == "output":
            make = partial(source.output, spec.shape, keep)
        else:
            fill = {"matrix": source.matrix, "norm": source.ones}.get(spec.kind, source.zeros)
            make = partial(fill, spec.shape)
        tensors.append(STensor(spec.hf_name, st_dtype, spec.shape, make))
    metadata = {
        "format": "pt",
        "crossover_random_weights": "true",
        "crossover_note": RANDOM_WEIGHTS_NOTICE,
    }
    write_sharded(out_dir, tensors, metadata, max_shard_bytes, on_tensor)
    build_hf_tokenizer(vocab_path, out_dir)
    return out_dir
