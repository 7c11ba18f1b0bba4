"""The tensor list of a llama/qwen2/qwen3moe/mixtral decoder, named for GGUF and HF.

Expert weights follow each format's layout: GGUF stores one 3-D tensor per layer and
projection (``blk.N.ffn_gate_exps``: experts x out x in, as llama.cpp's
``create_tensor`` asks for them); an HF checkpoint one 2-D tensor per expert, so a
spec of kind ``experts`` carries an HF name with an ``{e}`` field, expanded per expert.
"""

from __future__ import annotations

from dataclasses import dataclass

from crossover.models.shapes import ArchShape

#: the kinds stored as 16-bit (or Q8_0) matrices; the rest are float32 in GGUF
MATRIX_KINDS = ("embed", "matrix", "experts", "output")
#: the kinds ``--dtype q8_0`` quantizes; the embedding and the output projection stay
#: 16-bit (the output's zero rows are the whole-word recipe, random_weights.word_rows)
Q8_KINDS = ("matrix", "experts")
Q8_BLOCK = 32  # weights per Q8_0 block: an f16 scale and 32 int8 (34 bytes)
Q8_BLOCK_BYTES = 34

_HF_EXPERTS = {
    # (GGUF projection, HF per-expert name) per family; HF is (out, in) per expert
    "qwen3moe": ("mlp.gate", "mlp.experts.{e}.gate_proj", "mlp.experts.{e}.up_proj",
                 "mlp.experts.{e}.down_proj"),
    "mixtral": ("block_sparse_moe.gate", "block_sparse_moe.experts.{e}.w1",
                "block_sparse_moe.experts.{e}.w3", "block_sparse_moe.experts.{e}.w2"),
}  # fmt: skip


@dataclass(frozen=True)
class TensorSpec:
    gguf_name: str
    hf_name: str  # with "{e}" for kind "experts" (one HF tensor per expert)
    shape: tuple[int, ...]  # row-major (out, in) or (experts, out, in), as numpy sees it
    #: "embed", "matrix", "experts" (3-D, experts first), "output" (the untied output
    #: projection: a matrix whose rows of tokens that are not whole words are zero, see
    #: random_weights.word_rows), "router" (random, float32 in GGUF), "norm" (ones) or
    #: "bias" (zeros)
    kind: str

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


def gguf_nbytes(spec: TensorSpec, dtype: str) -> int:
    """Bytes of ``spec``'s data in a GGUF of ``dtype`` (f16, bf16 or q8_0)."""
    if spec.kind not in MATRIX_KINDS:
        return spec.numel * 4
    if dtype == "q8_0" and spec.kind in Q8_KINDS:
        return spec.numel // Q8_BLOCK * Q8_BLOCK_BYTES
    return spec.numel * 2


def _ffn(shape: ArchShape, g: str, p: str) -> list[TensorSpec]:
    h, f = shape.hidden, shape.ffn
    if shape.experts is None or shape.expert_ffn is None:
        return [
            TensorSpec(g + "ffn_gate.weight", p + "mlp.gate_proj.weight", (f, h), "matrix"),
            TensorSpec(g + "ffn_up.weight", p + "mlp.up_proj.weight", (f, h), "matrix"),
            TensorSpec(g + "ffn_down.weight", p + "mlp.down_proj.weight", (h, f), "matrix"),
        ]
    n, ef = shape.experts, shape.expert_ffn
    router, gate, up, down = (p + name for name in _HF_EXPERTS[shape.family])
    return [
        TensorSpec(g + "ffn_gate_inp.weight", router + ".weight", (n, h), "router"),
        TensorSpec(g + "ffn_gate_exps.weight", gate + ".weight", (n, ef, h), "experts"),
        TensorSpec(g + "ffn_up_exps.weight", up + ".weight", (n, ef, h), "experts"),
        TensorSpec(g + "ffn_down_exps.weight", down + ".weight", (n, h, ef), "experts"),
    ]


def tensor_specs(shape: ArchShape) -> list[TensorSpec]:
    h, hd, v = shape.hidden, shape.head_dim_, shape.vocab
    q, kv = shape.heads * hd, shape.kv_heads * hd
    specs = [TensorSpec("token_embd.weight", "model.embed_tokens.weight", (v, h), "embed")]
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
        if shape.qk_norm:
            specs += [
                TensorSpec(g + "attn_q_norm.weight", p + "self_attn.q_norm.weight", (hd,), "norm"),
                TensorSpec(g + "attn_k_norm.weight", p + "self_attn.k_norm.weight", (hd,), "norm"),
            ]
        specs += [
            TensorSpec(g + "attn_output.weight", p + "self_attn.o_proj.weight", (h, q), "matrix"),
            TensorSpec(g + "ffn_norm.weight", p + "post_attention_layernorm.weight", (h,), "norm"),
            *_ffn(shape, g, p),
        ]
    specs.append(TensorSpec("output_norm.weight", "model.norm.weight", (h,), "norm"))
    if not shape.tie_embeddings:
        specs.append(TensorSpec("output.weight", "lm_head.weight", (v, h), "output"))
    return specs
