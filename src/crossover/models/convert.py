"""A GGUF checkpoint as an HF folder (safetensors, ``config.json``, tokenizer), so engines
that load HF checkpoints (vLLM, SGLang, transformers) serve the same weights llama.cpp
serves from the GGUF.

Every tensor is dequantized with gguf-py (``gguf.quants.dequantize``: Q4_K, Q5_0, Q6_K,
Q8_0, ... to float32) and written in the chosen dtype, one at a time. What llama.cpp's
own HF -> GGUF conversion changed is undone, from its pinned source
(``conversion/gemma.py``, ``Gemma3Model``):

* Gemma 3's RMSNorm multiplies by ``1 + weight``; the GGUF stores ``weight + 1``
  (``norm_shift``), so 1 is subtracted from every ``*norm.weight`` again;
* the names are llama.cpp's (``blk.N.attn_q``, ...), mapped back to
  ``Gemma3ForCausalLM``'s (``model.layers.N.self_attn.q_proj``, ...); the test checks the
  map against gguf-py's own HF -> GGUF name table;
* what the GGUF does not carry comes from llama.cpp's loader for the architecture
  (``src/llama-model.cpp``): sliding-window layers use a RoPE base of 10,000, every sixth
  layer is global (``set_swa_pattern(6)``), and attention scales by ``1/sqrt(head_dim)``
  (``query_pre_attn_scalar = head_dim``) below 27B. The output head is tied to the
  embeddings (the GGUF has no ``output.weight``).

The weights are those of the GGUF, quantization error included: a BF16 folder converted
from a Q4_K_M file is that Q4_K_M model in BF16, the reference a BF16-vs-FP8 comparison
on vLLM needs. Gemma 3 (text) is the architecture converted; others are refused by name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from crossover.errors import UsageError
from crossover.models.hf_tokenizer import build_hf_tokenizer
from crossover.models.random_weights import to_f16_bits
from crossover.models.safetensors_io import STensor, write_sharded

#: output dtypes: their safetensors names
DTYPES = {"bf16": "BF16", "f16": "F16", "f32": "F32"}
SUPPORTED = ("gemma3",)

_GEMMA3_LAYER = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_GEMMA3_TOP = {"token_embd": "model.embed_tokens", "output_norm": "model.norm"}
_BLOCK = re.compile(r"blk\.(\d+)\.(\w+)\.weight")

#: llama.cpp's loader for gemma3 (src/llama-model.cpp): the sliding-window layers' RoPE
#: base and the pattern of global layers, neither stored in the GGUF
GEMMA3_ROPE_LOCAL_BASE = 10_000.0
GEMMA3_SWA_PATTERN = 6


def gemma3_hf_name(gguf_name: str) -> str:
    """``blk.3.attn_q.weight`` -> ``model.layers.3.self_attn.q_proj.weight``."""
    if gguf_name.endswith(".weight") and gguf_name[: -len(".weight")] in _GEMMA3_TOP:
        return _GEMMA3_TOP[gguf_name[: -len(".weight")]] + ".weight"
    m = _BLOCK.fullmatch(gguf_name)
    if m is None or m.group(2) not in _GEMMA3_LAYER:
        raise UsageError(f"gemma3: no HF name for GGUF tensor {gguf_name!r}")
    return f"model.layers.{m.group(1)}.{_GEMMA3_LAYER[m.group(2)]}.weight"


def _field(fields: dict[str, Any], key: str) -> Any:
    f = fields.get(key)
    return None if f is None else f.contents()


def gemma3_config(fields: dict[str, Any], vocab_size: int, torch_dtype: str) -> dict[str, Any]:
    """``config.json`` of ``Gemma3ForCausalLM`` from the GGUF's key/values."""

    def need(key: str) -> Any:
        value = _field(fields, f"gemma3.{key}")
        if value is None:
            raise UsageError(f"gemma3: the GGUF has no gemma3.{key}")
        return value

    layers = int(need("block_count"))
    head_dim = int(need("attention.key_length"))
    window = _field(fields, "gemma3.attention.sliding_window")
    layer_types = [
        "full_attention" if (i + 1) % GEMMA3_SWA_PATTERN == 0 else "sliding_attention"
        for i in range(layers)
    ]
    return {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        "vocab_size": vocab_size,
        "hidden_size": int(need("embedding_length")),
        "intermediate_size": int(need("feed_forward_length")),
        "num_hidden_layers": layers,
        "num_attention_heads": int(need("attention.head_count")),
        "num_key_value_heads": int(need("attention.head_count_kv")),
        "head_dim": head_dim,
        "query_pre_attn_scalar": head_dim,
        "max_position_embeddings": int(need("context_length")),
        "rms_norm_eps": float(need("attention.layer_norm_rms_epsilon")),
        "rope_theta": float(need("rope.freq_base")),
        "rope_local_base_freq": GEMMA3_ROPE_LOCAL_BASE,
        "rope_scaling": None,
        "sliding_window": int(window) if window is not None else None,
        "layer_types": layer_types,
        "hidden_activation": "gelu_pytorch_tanh",
        "attn_logit_softcapping": None,
        "final_logit_softcapping": _field(fields, "gemma3.final_logit_softcapping"),
        "attention_bias": False,
        "attention_dropout": 0.0,
        "tie_word_embeddings": True,
        "bos_token_id": _field(fields, "tokenizer.ggml.bos_token_id"),
        "eos_token_id": _field(fields, "tokenizer.ggml.eos_token_id"),
        "pad_token_id": _field(fields, "tokenizer.ggml.padding_token_id"),
        "torch_dtype": torch_dtype,
    }


@dataclass(frozen=True)
class ConvertResult:
    out_dir: Path
    architecture: str
    tensors: int
    bytes: int
    files: list[Path]


def to_bf16_rounded(values: npt.NDArray[np.float32]) -> npt.NDArray[np.uint16]:
    """bfloat16 bit patterns of float32 values, rounded to nearest even (not truncated:
    these are real weights)."""
    bits = values.astype(np.float32).view(np.uint32)
    rounded = bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    return (rounded >> np.uint32(16)).astype(np.uint16)


def convert_gguf_to_hf(
    gguf_path: Path, out_dir: Path, dtype: str = "bf16", progress: bool = False
) -> ConvertResult:
    """Write ``out_dir`` (safetensors, ``config.json``, ``generation_config.json``,
    tokenizer) from ``gguf_path``, with a progress bar on stderr when ``progress``."""
    import gguf
    from rich.console import Console

    from crossover.models.synth import _progress

    if dtype not in DTYPES:
        raise UsageError(f"unknown dtype {dtype!r} (known: {', '.join(DTYPES)})")
    st_dtype = DTYPES[dtype]
    try:
        reader = gguf.GGUFReader(str(gguf_path))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{gguf_path}: not a readable GGUF file ({exc})") from None
    arch = str(_field(reader.fields, "general.architecture"))
    if arch not in SUPPORTED:
        raise UsageError(
            f"{gguf_path}: architecture {arch!r} cannot be converted yet "
            f"(supported: {', '.join(SUPPORTED)})"
        )
    by_name = {t.name: t for t in reader.tensors}
    if "token_embd.weight" not in by_name:
        raise UsageError(f"{gguf_path}: no token_embd.weight")
    if "output.weight" in by_name:
        raise UsageError(f"{gguf_path}: an untied output head is not supported for {arch}")
    vocab_size = int(by_name["token_embd.weight"].data.shape[0])

    def maker(t: Any, shift: float) -> Callable[[], npt.NDArray[Any]]:
        def make() -> npt.NDArray[Any]:
            values = np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32)
            if shift:
                values = values - np.float32(shift)
            if dtype == "f32":
                return values
            return to_bf16_rounded(values) if dtype == "bf16" else to_f16_bits(values)

        return make

    tensors: list[STensor] = []
    for t in reader.tensors:
        hf = gemma3_hf_name(t.name)
        shape = tuple(int(n) for n in reversed([int(x) for x in t.shape]))
        shift = 1.0 if t.name.endswith("norm.weight") else 0.0
        tensors.append(STensor(hf, st_dtype, shape, maker(t, shift)))
    tensors.sort(key=lambda s: _order(s.name))

    out_dir.mkdir(parents=True, exist_ok=True)
    total = sum(s.nbytes for s in tensors)
    console = Console(stderr=True, highlight=False)
    with _progress(console, f"{gguf_path.name} -> {dtype}", total, progress) as advance:
        files = write_sharded(out_dir, tensors, {"format": "pt"}, on_tensor=advance)
    torch_dtype = {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}[dtype]
    config = gemma3_config(reader.fields, vocab_size, torch_dtype)
    (out_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    generation = {
        "bos_token_id": config["bos_token_id"],
        "eos_token_id": config["eos_token_id"],
        "pad_token_id": config["pad_token_id"],
    }
    (out_dir / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    build_hf_tokenizer(gguf_path, out_dir)
    return ConvertResult(out_dir, arch, len(tensors), total, [*files])


def _order(name: str) -> tuple[int, str]:
    """Embeddings, then layer by layer, then the final norm (the order HF writes)."""
    m = re.match(r"model\.layers\.(\d+)\.", name)
    if m:
        return (1 + int(m.group(1)), name)
    return (0, name) if "embed" in name else (10**6, name)
