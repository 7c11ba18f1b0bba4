"""A fast reader for a GGUF file's metadata (key/values only, tensors skipped).

``gguf.GGUFReader`` builds a numpy view per array element, which takes 10-25 s
for a Llama 3 vocab (128k tokens, 280k merges) on a small machine; this reads the
same key/values in well under a second. Values come back as Python objects with
their GGUF value type, ready for ``GGUFWriter.add_key_value``.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from crossover.errors import UsageError

# GGUFValueType numbering (gguf spec): fixed-size scalar types and their struct codes.
_SCALAR: dict[int, str] = {
    0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d",
}  # fmt: skip
_NP: dict[int, str] = {
    0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "<u1",
    10: "<u8", 11: "<i8", 12: "<f8",
}  # fmt: skip
STRING = 8
ARRAY = 9


@dataclass(frozen=True)
class GGUFValue:
    """One metadata value: ``vtype`` and (for arrays) ``sub_type`` as GGUF numbers."""

    value: Any
    vtype: int
    sub_type: int | None = None


class _Cursor:
    def __init__(self, buf: mmap.mmap) -> None:
        self.buf = buf
        self.pos = 0

    def unpack(self, fmt: str) -> Any:
        (val,) = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return val

    def string(self) -> bytes:
        n = self.unpack("Q")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def value(self, vtype: int) -> Any:
        if vtype in _SCALAR:
            return self.unpack(_SCALAR[vtype])
        if vtype == STRING:
            return self.string()
        raise UsageError(f"unsupported GGUF value type {vtype}")


def read_gguf_metadata(path: Path, prefix: str = "") -> dict[str, GGUFValue]:
    """Key/values of a GGUF file whose key starts with ``prefix``.

    Strings come back as ``bytes`` (GGUF strings are UTF-8 but tokens may not be);
    numeric arrays as numpy arrays, string arrays as lists of bytes.
    """
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise UsageError(f"cannot read GGUF file {path}: {exc}") from exc
    with fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        cur = _Cursor(buf)
        if buf[:4] != b"GGUF":
            raise UsageError(f"{path} is not a GGUF file")
        cur.pos = 4
        version = cur.unpack("I")
        if version < 2:
            raise UsageError(f"{path}: GGUF version {version} is too old")
        cur.unpack("Q")  # tensor count
        n_kv = cur.unpack("Q")
        out: dict[str, GGUFValue] = {}
        for _ in range(n_kv):
            key = cur.string().decode("utf-8")
            vtype = cur.unpack("I")
            keep = key.startswith(prefix)
            if vtype != ARRAY:
                val = cur.value(vtype)
                if keep:
                    out[key] = GGUFValue(val, vtype)
                continue
            sub = cur.unpack("I")
            count = cur.unpack("Q")
            if sub == STRING:
                items: list[bytes] = []
                pos = cur.pos
                for _ in range(count):
                    n = int.from_bytes(buf[pos : pos + 8], "little")
                    items.append(buf[pos + 8 : pos + 8 + n])
                    pos += 8 + n
                cur.pos = pos
                if keep:
                    out[key] = GGUFValue(items, vtype, sub)
            elif sub in _NP:
                dt = np.dtype(_NP[sub])
                arr = np.frombuffer(buf, dtype=dt, count=count, offset=cur.pos).copy()
                cur.pos += dt.itemsize * count
                if keep:
                    out[key] = GGUFValue(arr, vtype, sub)
            else:
                raise UsageError(f"{path}: nested GGUF arrays are not supported ({key})")
        return out


def vocab_tokens(kv: dict[str, GGUFValue], path: Path) -> tuple[list[bytes], str]:
    """The tokens and the tokenizer model name (``gpt2``, ``llama``, ...) of a vocab's
    ``tokenizer.ggml.*`` key/values, already read from ``path`` (named in the error)."""
    tokens = kv.get("tokenizer.ggml.tokens")
    model = kv.get("tokenizer.ggml.model")
    if tokens is None or tokens.vtype != ARRAY:
        raise UsageError(f"{path} has no tokenizer.ggml.tokens")
    name = model.value.decode() if model is not None and isinstance(model.value, bytes) else ""
    return list(tokens.value), name
