"""Write a random-weight GGUF of a real shape with a real tokenizer, tensor by tensor.

The tokenizer's key/values are copied from a vocab-only GGUF of the llama.cpp tree
(padded with ``[PADn]`` tokens when the architecture's embedding is larger than
the tokenizer, as llama.cpp's own converter does for Qwen). Norms, biases and MoE
routers are F32 as llama.cpp's converter writes them; matrices F16, BF16 or Q8_0 (the
embedding and output projection stay F16 under Q8_0). The header comes from gguf's
GGUFWriter; the tensor data is appended by ``_DataWriter`` (the spec's alignment), so
Q8_0 blocks go from a pool to the file without a per-tensor array.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from crossover.errors import UsageError
from crossover.models.gguf_meta import ARRAY, GGUFValue, read_gguf_metadata, vocab_tokens
from crossover.models.random_weights import (
    RANDOM_WEIGHTS_NOTICE,
    Q8Pool,
    WeightSource,
    word_rows,
)
from crossover.models.shapes import ArchShape
from crossover.models.tensors import (
    MATRIX_KINDS,
    Q8_BLOCK,
    Q8_KINDS,
    TensorSpec,
    gguf_nbytes,
    tensor_specs,
)

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


def vocab_size(vocab_file: str) -> int:
    """How many tokens the vocab-only GGUF ``vocab_file`` of llama.cpp's tree holds."""
    from crossover.builds.llamacpp_source import vocab_gguf

    path = vocab_gguf(vocab_file)
    tokens = read_gguf_metadata(path, "tokenizer.ggml.tokens").get("tokenizer.ggml.tokens")
    if tokens is None or tokens.vtype != ARRAY:
        raise UsageError(f"{path} has no tokenizer.ggml.tokens")
    return len(tokens.value)


def _plain(value: Any) -> Any:
    return value.tolist() if isinstance(value, np.ndarray) else value


#: GGUF ``general.architecture`` per family: Mixtral is llama.cpp's ``llama`` with
#: experts (src/models/llama.cpp), Qwen3-MoE its own ``qwen3moe``
GGUF_ARCH = {"llama": "llama", "qwen2": "qwen2", "qwen3moe": "qwen3moe", "mixtral": "llama"}


def _add_arch_kv(writer: Any, shape: ArchShape) -> None:
    writer.add_context_length(shape.ctx)
    writer.add_embedding_length(shape.hidden)
    writer.add_block_count(shape.layers)
    writer.add_feed_forward_length(shape.ffn)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.kv_heads)
    writer.add_rope_freq_base(shape.rope_theta)
    writer.add_layer_norm_rms_eps(shape.rms_eps)
    if GGUF_ARCH[shape.family] == "llama":
        writer.add_rope_dimension_count(shape.head_dim_)
        writer.add_vocab_size(shape.vocab)
    if shape.head_dim is not None:
        writer.add_key_length(shape.head_dim)
        writer.add_value_length(shape.head_dim)
    if shape.experts is not None and shape.experts_used is not None:
        writer.add_expert_count(shape.experts)
        writer.add_expert_used_count(shape.experts_used)
        if shape.family == "qwen3moe" and shape.expert_ffn is not None:
            # llama.cpp's qwen3moe reads the expert width here; llama (Mixtral) uses n_ff
            writer.add_expert_feed_forward_length(shape.expert_ffn)


def _ggml_type(spec: TensorSpec, dtype: str) -> Any:
    import gguf

    t = gguf.GGMLQuantizationType
    if spec.kind not in MATRIX_KINDS:
        return t.F32
    if dtype == "q8_0" and spec.kind in Q8_KINDS:
        return t.Q8_0
    return t.BF16 if dtype == "bf16" else t.F16


_FILE_TYPE = {"f16": "MOSTLY_F16", "bf16": "MOSTLY_BF16", "q8_0": "MOSTLY_Q8_0"}


def _check_q8(specs: list[TensorSpec]) -> None:
    for spec in specs:
        if spec.kind in Q8_KINDS and spec.shape[-1] % Q8_BLOCK:
            raise UsageError(
                f"--dtype q8_0: {spec.gguf_name} rows have {spec.shape[-1]} weights, "
                f"not a multiple of {Q8_BLOCK}"
            )


class _DataWriter:
    """Appends tensor data after the header as GGUF lays it out: the data section
    starts at a multiple of the alignment and each tensor is padded to one."""

    def __init__(self, fh: BinaryIO, align: int) -> None:
        self.fh = fh
        self.align = align
        self._pad(fh.tell())

    def _pad(self, n: int) -> None:
        if n % self.align:
            self.fh.write(b"\0" * (self.align - n % self.align))

    def tensor(self, parts: Iterable[memoryview | bytes]) -> int:
        n = 0
        for part in parts:
            self.fh.write(part)
            n += len(part)
        self._pad(n)
        return n


def _bytes_of(data: np.ndarray[Any, Any]) -> memoryview:
    return np.ascontiguousarray(data).reshape(-1).view(np.uint8).data


def write_gguf(
    shape: ArchShape,
    vocab_path: Path,
    out_path: Path,
    dtype: str,
    seed: int = 0,
    on_tensor: Callable[[int], None] | None = None,
) -> Path:
    """Write ``out_path``, one tensor in memory at a time (Q8_0: none, see Q8Pool);
    ``on_tensor(nbytes)`` is called after each tensor (progress)."""
    import gguf

    specs = tensor_specs(shape)
    if dtype == "q8_0":
        _check_q8(specs)
    writer = gguf.GGUFWriter(str(out_path), GGUF_ARCH[shape.family])
    writer.add_name(f"{shape.name} (random weights)")
    writer.add_description(RANDOM_WEIGHTS_NOTICE)
    writer.add_type("model")
    writer.add_key_value("crossover.random_weights", True, gguf.GGUFValueType.BOOL)
    writer.add_key_value("crossover.shape_source", shape.source, gguf.GGUFValueType.STRING)
    if shape.full_layers is not None:
        writer.add_key_value("crossover.full_layers", shape.full_layers, gguf.GGUFValueType.UINT32)
    _add_arch_kv(writer, shape)
    writer.add_file_type(getattr(gguf.LlamaFileType, _FILE_TYPE[dtype]))
    tok_kv = tokenizer_kv(vocab_path, shape.vocab)
    for key, val in tok_kv.items():
        sub = gguf.GGUFValueType(val.sub_type) if val.sub_type is not None else None
        writer.add_key_value(key, _plain(val.value), gguf.GGUFValueType(val.vtype), sub_type=sub)
    for spec in specs:
        # the element shape with the type's byte count: float32 here only stops the
        # writer from reading the shape as bytes (it does so for uint8)
        writer.add_tensor_info(
            spec.gguf_name,
            spec.shape,
            np.dtype(np.float32),
            gguf_nbytes(spec, dtype),
            raw_dtype=_ggml_type(spec, dtype),
        )
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    align = writer.data_alignment
    writer.close()

    source = WeightSource(dtype, seed)
    tokens, model = vocab_tokens(tok_kv, vocab_path)
    keep = word_rows(tokens, model, shape.vocab)
    q8_blocks = [s.numel // Q8_BLOCK for s in specs if dtype == "q8_0" and s.kind in Q8_KINDS]
    pool = Q8Pool(seed, min(1 << 21, max(q8_blocks))) if q8_blocks else None
    with out_path.open("ab", buffering=1 << 20) as fh:
        out = _DataWriter(fh, align)
        for spec in specs:
            if pool is not None and spec.kind in Q8_KINDS:
                n = out.tensor(pool.chunks(spec.numel // Q8_BLOCK))
            else:
                n = out.tensor([_bytes_of(_data(spec, source, keep))])
            if on_tensor is not None:
                on_tensor(n)
    return out_path


def _data(spec: TensorSpec, source: WeightSource, keep: np.ndarray[Any, Any]) -> Any:
    if spec.kind == "output":
        return source.output(spec.shape, keep)
    if spec.kind in MATRIX_KINDS:
        return source.matrix(spec.shape)
    if spec.kind == "router":
        return source.float32(spec.shape)
    if spec.kind == "norm":
        return np.ones(spec.shape, np.float32)
    return np.zeros(spec.shape, np.float32)
