"""``crossover models requantize``: the pinned llama.cpp's llama-quantize, built on demand,
makes another quantization of the real Gemma 3 270M (``make test`` provides the model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossover.cli.app import main

pytestmark = pytest.mark.llamacpp


def test_requantize_writes_a_gguf_of_the_asked_type(tmp_path: Path) -> None:
    from gguf import GGUFReader

    from crossover.models.gemma import find_gemma3_270m

    model = find_gemma3_270m()
    if model is None:
        pytest.skip("no Gemma model (make models)")
    out = tmp_path / "q8.gguf"
    assert (
        main(["models", "requantize", str(model), "--type", "q8_0", "--out", str(out), "-q"]) == 0
    )
    reader = GGUFReader(out)
    field = reader.fields["general.file_type"]
    assert int(field.parts[field.data[0]][0]) == 7  # LLAMA_FTYPE_MOSTLY_Q8_0
    kinds = {t.tensor_type.name for t in reader.tensors}
    assert "Q8_0" in kinds and "Q4_K" not in kinds


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--type", "Q9_X"], "--type 'Q9_X': one of"),
        (["--type", "Q8_0", "--out", "/nope/x.gguf"], "no such folder"),
    ],
)
def test_requantize_bad_input(
    args: list[str], needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "m.gguf"
    src.write_bytes(b"GGUF")
    full = ["models", "requantize", str(src), *args]
    if "--out" not in args:
        full += ["--out", str(tmp_path / "o.gguf")]
    assert main(full) == 2
    assert needle in capsys.readouterr().err
