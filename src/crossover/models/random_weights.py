"""Random tensor data for synthetic checkpoints, produced one tensor at a time.

A small pool of N(0, 0.02) values is drawn once and tiled to each tensor's size,
so an 8B checkpoint is written with one tensor in memory at a time (the largest,
the output projection, is ~1 GB for Llama 3 8B) instead of 16 GB. Values are kept
as raw 16-bit words: IEEE half for f16, the high half of float32 for bf16.

The untied output projection keeps its random rows only for tokens that are whole
lowercase words with their leading space (`` the``, `` of``: 26,069 of Llama 3's
128,256 tokens); every other row is zero, so its logit is 0 whatever the hidden state,
while some word's random logit is positive for any hidden state in practice. Greedy
decoding then emits only whole words: each token streams as its own printable chunk,
and the text re-tokenizes to the same tokens. An engine that streams text deltas and
holds back tokens that make no printable text alone (transformers serve) would
otherwise send fewer chunks than tokens, with nothing to vouch for its count. The
work per token does not change: the rows are there, multiplied like any other.

``--dtype q8_0`` (GGUF only) writes llama.cpp's Q8_0 blocks directly (per 32 weights
an f16 scale and 32 int8) from one pool of random blocks drawn once and reused across
tensors at shifting offsets (Q8Pool), so a 30 GB file is written at disk speed with
a ~70 MB pool in memory. The int8 values are uniform over -128..127 with one scale,
0.02/73.9, so the weights have the 16-bit files' standard deviation, 0.02.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

DTYPES = ("f16", "bf16", "q8_0")
#: dtypes only a GGUF can hold (an HF folder is f16 or bf16)
GGUF_ONLY_DTYPES = ("q8_0",)
RANDOM_WEIGHTS_NOTICE = (
    "RANDOM WEIGHTS: this checkpoint has the shape of a real architecture but its "
    "weights are random noise. It produces meaningless text and is fit for serving "
    "performance measurement only (decode cost does not depend on weight values)."
)


#: whole lowercase words with the tokenizer's leading-space marker: byte-level BPE
#: (tokenizer.ggml.model "gpt2": Llama 3, Qwen2) writes the space as U+0120, SentencePiece
#: ("llama") as U+2581
_WORD = {"gpt2": re.compile("^\u0120[a-z]{2,}$"), "llama": re.compile("^\u2581[a-z]{2,}$")}


def word_rows(tokens: Sequence[bytes], model: str, n_rows: int) -> npt.NDArray[np.bool_]:
    """Which of the output projection's ``n_rows`` rows keep random values: the tokens
    that are whole words (see the module doc); all rows for an unknown tokenizer model."""
    pattern = _WORD.get(model)
    if pattern is None:
        return np.ones(n_rows, np.bool_)
    keep = np.zeros(n_rows, np.bool_)
    for i, tok in enumerate(tokens[:n_rows]):
        keep[i] = pattern.match(tok.decode("utf-8", "replace")) is not None
    return keep


def to_bf16_bits(values: npt.NDArray[np.float32]) -> npt.NDArray[np.uint16]:
    """bfloat16 bit patterns of float32 values (truncation, as the notice says)."""
    return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def to_f16_bits(values: npt.NDArray[np.float32]) -> npt.NDArray[np.uint16]:
    return values.astype(np.float16).view(np.uint16)


def dtype_bits(dtype: str, values: npt.NDArray[np.float32]) -> npt.NDArray[np.uint16]:
    return to_bf16_bits(values) if dtype == "bf16" else to_f16_bits(values)


@dataclass
class WeightSource:
    """Tiles a fixed random pool into tensors of any shape, as 16-bit words."""

    dtype: str
    seed: int = 0
    pool_size: int = 1 << 20

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        pool = (rng.standard_normal(self.pool_size, dtype=np.float32) * 0.02).astype(np.float32)
        self._pool = dtype_bits(self.dtype, pool)
        self._pool_f32 = pool
        self._offset = 0

    def matrix(self, shape: tuple[int, ...]) -> npt.NDArray[np.uint16]:
        n = int(np.prod(shape))
        # Start each tensor at a different place in the pool so tensors differ.
        start = self._offset % self._pool.size
        self._offset += 7919
        rolled = np.concatenate((self._pool[start:], self._pool[:start]))
        return np.resize(rolled, n).reshape(shape)

    def float32(self, shape: tuple[int, ...]) -> npt.NDArray[np.float32]:
        """Float32 values (GGUF's MoE routers), tiled from the same pool."""
        n = int(np.prod(shape))
        start = self._offset % self._pool_f32.size
        self._offset += 7919
        rolled = np.concatenate((self._pool_f32[start:], self._pool_f32[:start]))
        return np.resize(rolled, n).reshape(shape)

    def output(self, shape: tuple[int, ...], keep: npt.NDArray[np.bool_]) -> npt.NDArray[np.uint16]:
        """A matrix whose rows outside ``keep`` are zero (the output projection)."""
        data = self.matrix(shape)
        data[~keep[: shape[0]]] = 0
        return data

    def ones(self, shape: tuple[int, ...]) -> npt.NDArray[np.uint16]:
        return np.full(shape, dtype_bits(self.dtype, np.ones(1, np.float32))[0], np.uint16)

    def zeros(self, shape: tuple[int, ...]) -> npt.NDArray[np.uint16]:
        return np.zeros(shape, np.uint16)


_Q8_BLOCK, _Q8_BYTES = 32, 34
_Q8_STD = 73.9  # standard deviation of int8 values uniform over -128..127


@dataclass
class Q8Pool:
    """A pool of random Q8_0 blocks; ``chunks(n)`` yields ``n`` blocks' bytes as views
    into it (no copy), starting at a different block for each tensor."""

    seed: int = 0
    blocks: int = 1 << 21  # 2M blocks, 71 MB
    _raw: npt.NDArray[np.uint8] = field(init=False, repr=False)
    _offset: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed + 1)
        # uniform random bytes are uniform int8 (drawn 20x faster than normals)
        raw = np.frombuffer(rng.bytes(self.blocks * _Q8_BYTES), np.uint8).copy()
        raw = raw.reshape(self.blocks, _Q8_BYTES)
        scale = np.full(self.blocks, 0.02 / _Q8_STD, np.float16)
        raw[:, :2] = scale.view(np.uint8).reshape(self.blocks, 2)
        self._raw = raw.reshape(-1)

    def chunks(self, nblocks: int) -> Iterator[memoryview]:
        start = self._offset % self.blocks
        self._offset += 7919
        view = memoryview(self._raw)  # type: ignore[arg-type]
        while nblocks > 0:
            take = min(nblocks, self.blocks - start)
            yield view[start * _Q8_BYTES : (start + take) * _Q8_BYTES]
            nblocks -= take
            start = 0
