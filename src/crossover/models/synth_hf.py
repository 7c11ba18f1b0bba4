"""Write a random-weight HF folder (config.json, safetensors, tokenizer) of a real shape.

Tensor names and config keys follow transformers' LlamaForCausalLM,
Qwen2ForCausalLM, Qwen3MoeForCausalLM and MixtralForCausalLM as published on the hub
(one tensor per expert), so transformers, vLLM and SGLang load the folder as they
would the real model. Weights are streamed into safetensors one tensor at a time.
``config_only`` writes the config and tokenizer without weights, for engines that
make their own (vLLM/SGLang ``--load-format dummy``).
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

_ARCH = {
    "llama": ("LlamaForCausalLM", "llama"),
    "qwen2": ("Qwen2ForCausalLM", "qwen2"),
    "qwen3moe": ("Qwen3MoeForCausalLM", "qwen3_moe"),
    "mixtral": ("MixtralForCausalLM", "mixtral"),
}
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
    if shape.full_layers is not None:
        cfg["crossover_full_layers"] = shape.full_layers
    if shape.family == "llama":
        cfg.update({"attention_bias": False, "mlp_bias": False, "pretraining_tp": 1})
    elif shape.family == "qwen3moe":
        cfg.update(
            {
                "attention_bias": False,
                "moe_intermediate_size": shape.expert_ffn,
                "num_experts": shape.experts,
                "num_experts_per_tok": shape.experts_used,
                "norm_topk_prob": True,
                "decoder_sparse_step": 1,
                "mlp_only_layers": [],
                "output_router_logits": False,
                "router_aux_loss_coef": 0.001,
                "use_sliding_window": False,
                "sliding_window": None,
                "max_window_layers": shape.layers,
                "rope_scaling": None,
            }
        )
    elif shape.family == "mixtral":
        cfg.update(
            {
                "intermediate_size": shape.expert_ffn,
                "num_local_experts": shape.experts,
                "num_experts_per_tok": shape.experts_used,
                "output_router_logits": False,
                "router_aux_loss_coef": 0.02,
                "router_jitter_noise": 0.0,
                "sliding_window": None,
            }
        )
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
    config_only: bool = False,
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
    build_hf_tokenizer(vocab_path, out_dir)
    if config_only:
        return out_dir

    source = WeightSource(dtype, seed)
    st_dtype = "BF16" if dtype == "bf16" else "F16"
    tokens, model = vocab_tokens(meta, vocab_path)
    keep = word_rows(tokens, model, shape.vocab)
    tensors: list[STensor] = []
    for spec in tensor_specs(shape):
        make: Callable[[], Any]
        if spec.kind == "experts":
            one = spec.shape[1:]
            tensors += [
                STensor(spec.hf_name.format(e=e), st_dtype, one, partial(source.matrix, one))
                for e in range(spec.shape[0])
            ]
            continue
        if spec.kind == "output":
            make = partial(source.output, spec.shape, keep)
        elif spec.kind in ("embed", "matrix", "router"):
            make = partial(source.matrix, spec.shape)
        else:
            make = partial(source.ones if spec.kind == "norm" else source.zeros, spec.shape)
        tensors.append(STensor(spec.hf_name, st_dtype, spec.shape, make))
    metadata = {
        "format": "pt",
        "crossover_random_weights": "true",
        "crossover_note": RANDOM_WEIGHTS_NOTICE,
    }
    write_sharded(out_dir, tensors, metadata, max_shard_bytes, on_tensor)
    return out_dir
