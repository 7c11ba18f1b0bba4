"""Random tensor data for synthetic checkpoints, produced one tensor at a time.

A small pool of N(0, 0.02) values is drawn once and tiled to each tensor's size,
so an 8B checkpoint is written with one tensor in memory at a time (the largest,
the output projection, is ~1 GB for Llama 3 8B) instead of 16 GB. Values are kept
as raw 16-bit words: IEEE half for f16, the high half of float32 for bf16.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

DTYPES = ("f16", "bf16")
RANDOM_WEIGHTS_NOTICE = (
    "RANDOM WEIGHTS: this checkpoint has the shape of a real architecture but its "
    "weights are random noise. It produces meaningless text and is fit for serving "
    "performance measurement only (decode cost does not depend on weight values)."
)


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
        self._offset = 0

    def matrix(self, shape: tuple[int, ...]) -> npt.NDArray[np.uint16]:
        n = int(np.prod(shape))
        # Start each tensor at a different place in the pool so tensors differ.
        start = self._offset % self._pool.size
        self._offset += 7919
        rolled = np.concatenate((self._pool[start:], self._pool[:start]))
        return np.resize(rolled, n).reshape(shape)

    def ones(self, shape: tuple[int, ...]) -> npt.NDArray[np.uint16]:
        return np.full(shape, dtype_bits(self.dtype, np.ones(1, np.float32))[0], np.uint16)

    def zeros(self, shape: tuple[int, ...]) -> npt.NDArray[np.uint16]:
        return np.zeros(shape, np.uint16)
