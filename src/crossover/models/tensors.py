"""The tensor list of a llama/qwen2 decoder, named for GGUF and for HF, in file order."""

from __future__ import annotations

from dataclasses import dataclass

from crossover.models.shapes import ArchShape

#: the kinds stored as 16-bit matrices (the rest are float32 in GGUF)
MATRIX_KINDS = ("matrix", "output")


@dataclass(frozen=True)
class TensorSpec:
    gguf_name: str
    hf_name: str
    shape: tuple[int, ...]  # row-major (out, in), as numpy and safetensors see it
    #: "matrix", "output" (the untied output projection: a matrix whose rows of tokens
    #: that are not whole words are zero, see random_weights.word_rows), "norm" (ones) or
    #: "bias" (zeros)
    kind: str


def tensor_specs(shape: ArchShape) -> list[TensorSpec]:
    h, hd, f, v = shape.hidden, shape.head_dim_, shape.ffn, shape.vocab
    q, kv = shape.heads * hd, shape.kv_heads * hd
    specs = [TensorSpec("token_embd.weight", "model.embed_tokens.weight", (v, h), "matrix")]
    for i in range(shape.layers):
        g, p = f"blk.{i}.", f"model.layers.{i}."
        specs += [
            TensorSpec(g + "attn_norm.weight", p + "input_layernorm.weight", (h,), "norm"),
            TensorSpec(g + "attn_q.weight", p + "self_attn.q_proj.weight", (q, h), "matrix"),
            TensorSpec(g + "attn_k.weight", p + "self_attn.k_proj.weight", (kv, h), "matrix"),
            TensorSpec(g + "attn_v.weight", p + "self_attn.v_proj.weight", (kv, h), "matrix"),
        ]
        if shape.family == "qwen2":
            specs += [
                TensorSpec(g + "attn_q.bias", p + "self_attn.q_proj.bias", (q,), "bias"),
                TensorSpec(g + "attn_k.bias", p + "self_attn.k_proj.bias", (kv,), "bias"),
                TensorSpec(g + "attn_v.bias", p + "self_attn.v_proj.bias", (kv,), "bias"),
            ]
        specs += [
            TensorSpec(g + "attn_output.weight", p + "self_attn.o_proj.weight", (h, q), "matrix"),
            TensorSpec(g + "ffn_norm.weight", p + "post_attention_layernorm.weight", (h,), "norm"),
            TensorSpec(g + "ffn_gate.weight", p + "mlp.gate_proj.weight", (f, h), "matrix"),
            TensorSpec(g + "ffn_up.weight", p + "mlp.up_proj.weight", (f, h), "matrix"),
            TensorSpec(g + "ffn_down.weight", p + "mlp.down_proj.weight", (h, f), "matrix"),
        ]
    specs.append(TensorSpec("output_norm.weight", "model.norm.weight", (h,), "norm"))
    if not shape.tie_embeddings:
        specs.append(TensorSpec("output.weight", "lm_head.weight", (v, h), "output"))
    return specs
