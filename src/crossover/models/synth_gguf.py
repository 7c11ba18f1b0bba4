"""Write a random-weight GGUF of a real shape with a real tokenizer, tensor by tensor.

The tokenizer's key/values are copied from a vocab-only GGUF of the llama.cpp tree
(padded with ``[PADn]`` tokens when the architecture's embedding is larger than
the tokenizer, as llama.cpp's own converter does for Qwen). Norms and biases are
F32 as llama.cpp's converter writes them; matrices F16 or BF16.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from crossover.errors import UsageError
from crossover.models.gguf_meta import ARRAY, GGUFValue, read_gguf_metadata, vocab_tokens
from crossover.models.random_weights import RANDOM_WEIGHTS_NOTICE, WeightSource, word_rows
from crossover.models.shapes import ArchShape
from crossover.models.tensors import MATRIX_KINDS, tensor_specs

_TOKEN_TYPE_UNUSED = 5


def tokenizer_kv(vocab_path: Path, n_vocab: int) -> dict[str, GGUFValue]:
    """The vocab file's ``tokenizer.*`` key/values, padded to ``n_vocab`` tokens."""
    kv = read_gguf_metadata(vocab_path, "tokenizer.")
    tokens = kv.get("tokenizer.ggml.tokens")
    if tokens is None or tokens.vtype != ARRAY:
        raise UsageError(f"{vocab_path} has no tokenizer.ggml.tokens")
    n_tok = len(tokens.value)
    if n_tok > n_vocab:
        raise UsageError(
            f"the tokenizer in {vocab_path.name} has {n_tok} tokens, more than vocab_size {n_vocab}"
        )
    if n_tok < n_vocab:
        pad = n_vocab - n_tok
        kv["tokenizer.ggml.tokens"] = GGUFValue(
            list(tokens.value) + [f"[PAD{i}]".encode() for i in range(n_tok, n_vocab)],
            tokens.vtype,
            tokens.sub_type,
        )
        for key, fill in (
            ("tokenizer.ggml.token_type", _TOKEN_TYPE_UNUSED),
            ("tokenizer.ggml.scores", -1000.0),
        ):
            if key in kv:
                old = kv[key]
                arr = np.asarray(old.value)
                kv[key] = GGUFValue(
                    np.concatenate([arr, np.full(pad, fill, dtype=arr.dtype)]),
                    old.vtype,
                    old.sub_type,
                )
    return kv


def _plain(value: Any) -> Any:
    return value.tolist() if isinstance(value, np.ndarray) else value


def write_gguf(
    shape: ArchShape,
    vocab_path: Path,
    out_path: Path,
    dtype: str,
    seed: int = 0,
    on_tensor: Callable[[int], None] | None = None,
) -> Path:
    """Write ``out_path``; ``on_tensor(nbytes)`` is called after each tensor (progress)."""
    import gguf

    writer = gguf.GGUFWriter(str(out_path), shape.family)
    writer.add_name(f"{shape.name} (random weights)")
    writer.add_description(RANDOM_WEIGHTS_NOTICE)
    writer.add_type("model")
    writer.add_key_value("crossover.random_weights", True, gguf.GGUFValueType.BOOL)
    writer.add_key_value("crossover.shape_source", shape.source, gguf.GGUFValueType.STRING)
    writer.add_context_length(shape.ctx)
    writer.add_embedding_length(shape.hidden)
    writer.add_block_count(shape.layers)
    writer.add_feed_forward_length(shape.ffn)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.kv_heads)
    writer.add_rope_freq_base(shape.rope_theta)
    writer.add_layer_norm_rms_eps(shape.rms_eps)
    if shape.family == "llama":
        writer.add_rope_dimension_count(shape.head_dim_)
        writer.add_vocab_size(shape.vocab)
    if shape.head_dim is not None:
        writer.add_key_length(shape.head_dim)
        writer.add_value_length(shape.head_dim)
    bf16 = dtype == "bf16"
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_BF16 if bf16 else gguf.LlamaFileType.MOSTLY_F16)
    tok_kv = tokenizer_kv(vocab_path, shape.vocab)
    for key, val in tok_kv.items():
        sub = gguf.GGUFValueType(val.sub_type) if val.sub_type is not None else None
        writer.add_key_value(key, _plain(val.value), gguf.GGUFValueType(val.vtype), sub_type=sub)

    specs = tensor_specs(shape)
    raw = gguf.GGMLQuantizationType.BF16 if bf16 else gguf.GGMLQuantizationType.F16
    for spec in specs:
        if spec.kind in MATRIX_KINDS:
            n = int(np.prod(spec.shape)) * 2
            writer.add_tensor_info(
                spec.gguf_name, spec.shape, np.dtype(np.uint16), n, raw_dtype=raw
            )
        else:
            n = int(np.prod(spec.shape)) * 4
            writer.add_tensor_info(spec.gguf_name, spec.shape, np.dtype(np.float32), n)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    source = WeightSource(dtype, seed)
    tokens, model = vocab_tokens(tok_kv, vocab_path)
    keep = word_rows(tokens, model, shape.vocab)
    for spec in specs:
        data: np.ndarray[Any, Any]
        if spec.kind == "output":
            data = source.output(spec.shape, keep)
        elif spec.kind == "matrix":
            data = source.matrix(spec.shape)
        elif spec.kind == "norm":
            data = np.ones(spec.shape, np.float32)
        else:
            data = np.zeros(spec.shape, np.float32)
        writer.write_tensor_data(data)
        if on_tensor is not None:
            on_tensor(int(data.nbytes))
        del data
    writer.close()
    return out_path
