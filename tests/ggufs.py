"""A GGUF file whose header reads and that holds no tensors: what a launched stand-in
engine (the calibration server dressed as llama-server) is given as its model, since
``sweep --check`` opens a GGUF's header before anything is launched."""

from __future__ import annotations

from pathlib import Path


def stand_in_gguf(path: Path) -> Path:
    import gguf

    writer = gguf.GGUFWriter(path, "llama")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
