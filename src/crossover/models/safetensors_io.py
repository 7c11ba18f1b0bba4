"""Write safetensors files by hand, streaming one tensor at a time.

The format is a little-endian u64 header length, a JSON header (name -> dtype,
shape, byte offsets; padded with spaces to 8 bytes) and the raw data. Writing it
directly avoids holding a whole checkpoint in memory and needs only numpy.
Shards follow the HF layout (``model-0000i-of-0000n.safetensors`` plus
``model.safetensors.index.json``) when the total passes ``max_shard_bytes``.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class STensor:
    name: str
    dtype: str  # safetensors dtype: "F16", "BF16", "F32"
    shape: tuple[int, ...]
    make: Callable[[], np.ndarray[Any, Any]]  # produces the data when its turn comes

    @property
    def nbytes(self) -> int:
        item = 4 if self.dtype == "F32" else 2
        return int(np.prod(self.shape)) * item


def _header(tensors: list[STensor], metadata: dict[str, str]) -> bytes:
    entries: dict[str, Any] = {"__metadata__": metadata}
    offset = 0
    for t in tensors:
        entries[t.name] = {
            "dtype": t.dtype,
            "shape": list(t.shape),
            "data_offsets": [offset, offset + t.nbytes],
        }
        offset += t.nbytes
    raw = json.dumps(entries, separators=(",", ":")).encode()
    return raw + b" " * (-len(raw) % 8)


def write_safetensors(
    path: Path,
    tensors: list[STensor],
    metadata: dict[str, str],
    on_tensor: Callable[[int], None] | None = None,
) -> None:
    header = _header(tensors, metadata)
    with path.open("wb") as fh:
        fh.write(struct.pack("<Q", len(header)))
        fh.write(header)
        for t in tensors:
            data = np.ascontiguousarray(t.make())
            if data.nbytes != t.nbytes:
                raise ValueError(f"{t.name}: produced {data.nbytes} bytes, expected {t.nbytes}")
            data.tofile(fh)
            if on_tensor is not None:
                on_tensor(t.nbytes)


def _shards(tensors: Iterable[STensor], max_bytes: int) -> list[list[STensor]]:
    shards: list[list[STensor]] = [[]]
    size = 0
    for t in tensors:
        if shards[-1] and size + t.nbytes > max_bytes:
            shards.append([])
            size = 0
        shards[-1].append(t)
        size += t.nbytes
    return shards


def write_sharded(
    out_dir: Path,
    tensors: list[STensor],
    metadata: dict[str, str],
    max_shard_bytes: int = 5_000_000_000,
    on_tensor: Callable[[int], None] | None = None,
) -> list[Path]:
    """Write ``model.safetensors`` or HF-style shards plus index; returns the files."""
    shards = _shards(tensors, max_shard_bytes)
    if len(shards) == 1:
        path = out_dir / "model.safetensors"
        write_safetensors(path, shards[0], metadata, on_tensor)
        return [path]
    paths: list[Path] = []
    weight_map: dict[str, str] = {}
    for i, shard in enumerate(shards, start=1):
        name = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        write_safetensors(out_dir / name, shard, metadata, on_tensor)
        weight_map.update({t.name: name for t in shard})
        paths.append(out_dir / name)
    index = {"metadata": {"total_size": sum(t.nbytes for t in tensors)}, "weight_map": weight_map}
    (out_dir / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    return paths


def read_safetensors_header(path: Path) -> dict[str, Any]:
    """The JSON header of a safetensors file (for checks and tests)."""
    with path.open("rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        parsed: dict[str, Any] = json.loads(fh.read(n))
    return parsed
