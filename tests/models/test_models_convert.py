"""``crossover models convert``: the real Gemma 3 270M GGUF as an HF folder, read back by
an independent numpy forward pass (``gemma3_numpy``) and compared token by token with
the pinned llama-server serving the GGUF itself."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest

from crossover.cli.app import main
from crossover.engines import engine_config, launch
from crossover.models.convert import gemma3_hf_name, to_bf16_rounded
from crossover.models.safetensors_io import read_safetensors_header

from . import gemma3_numpy

pytestmark = pytest.mark.llamacpp

PROMPTS = (
    "The history of the printing press begins in",
    "Water boils at a lower temperature on a mountain because",
    "def fibonacci(n):\n    ",
)


def _paths() -> tuple[Path, Path]:
    from crossover.builds.llamacpp import find_llama_server
    from crossover.models.gemma import find_gemma3_270m

    server, model = find_llama_server(), find_gemma3_270m()
    if server is None or model is None:
        pytest.skip("no built llama-server or no Gemma model (make engines models)")
    return server, model


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _, model = _paths()
    out = tmp_path_factory.mktemp("conv") / "gemma-hf"
    assert main(["models", "convert", str(model), "--out", str(out), "--quiet"]) == 0
    return out


def _post(url: str, body: dict[str, Any]) -> Any:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=120) as resp:
        return json.loads(resp.read())


@pytest.fixture(scope="module")
def llama_greedy(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[list[tuple[list[int], list[int]]]]:
    """(prompt tokens, 24 greedy tokens) per prompt, from llama-server on the GGUF."""
    server, model = _paths()
    config = engine_config(
        engine="llamacpp", model=str(model), executable=[str(server)], parallel=1,
        context_tokens=1024, health_timeout_s=120.0,
    )  # fmt: skip
    log = tmp_path_factory.mktemp("ls") / "llama.log"
    with launch(config, log) as engine:
        url = f"http://127.0.0.1:{engine.port}"
        out = []
        for text in PROMPTS:
            toks = _post(url + "/tokenize", {"content": text, "add_special": True})["tokens"]
            gen = _post(
                url + "/completion",
                {"prompt": toks, "n_predict": 24, "temperature": 0, "return_tokens": True,
                 "cache_prompt": False, "ignore_eos": True},
            )["tokens"]  # fmt: skip
            out.append((toks, gen))
        yield out


def _agreement(
    folder: Path, cases: list[tuple[list[int], list[int]]], adjust: Any = None
) -> tuple[float, list[float]]:
    """Teacher-forced top-1 agreement of the numpy model with llama.cpp's greedy tokens,
    and the numpy logit margin (its top minus llama's token) where they differ."""
    hits, total, margins = 0, 0, []
    for toks, gen in cases:
        lg = gemma3_numpy.logits(folder, toks + gen, adjust)
        rows = lg[len(toks) - 1 : len(toks) - 1 + len(gen)]
        for row, want in zip(rows, gen, strict=True):
            got = int(row.argmax())
            total += 1
            if got == want:
                hits += 1
            else:
                margins.append(float(row[got] - row[want]))
    return hits / total, margins


def test_every_gguf_tensor_maps_back_through_gguf_pys_own_name_table(converted: Path) -> None:
    _, model = _paths()
    reader = gguf.GGUFReader(str(model))
    table = gguf.get_tensor_name_map(gguf.MODEL_ARCH.GEMMA3, 18)
    for t in reader.tensors:
        hf = gemma3_hf_name(t.name)
        assert table.get_name(hf, try_suffixes=(".weight", ".bias")) == t.name
    header = read_safetensors_header(converted / "model.safetensors")
    names = {k for k in header if k != "__metadata__"}
    assert names == {gemma3_hf_name(t.name) for t in reader.tensors}
    assert header["model.embed_tokens.weight"]["shape"] == [262144, 640]
    assert header["model.layers.0.self_attn.q_proj.weight"]["shape"] == [1024, 640]
    assert {h["dtype"] for k, h in header.items() if k != "__metadata__"} == {"BF16"}


def test_config_is_a_valid_gemma3_text_config(converted: Path) -> None:
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(str(converted), local_files_only=True)
    assert type(cfg).__name__ == "Gemma3TextConfig"
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.head_dim) == (640, 18, 256)
    assert (cfg.num_attention_heads, cfg.num_key_value_heads) == (4, 1)
    assert cfg.layer_types.count("full_attention") == 3  # every sixth of 18
    assert cfg.tie_word_embeddings is True
    tok = json.loads((converted / "tokenizer.json").read_text())
    assert len(tok["model"]["vocab"]) >= 262_000


def test_converted_weights_predict_what_llama_server_generates(
    converted: Path, llama_greedy: list[tuple[list[int], list[int]]]
) -> None:
    agree, margins = _agreement(converted, llama_greedy)
    # llama.cpp multiplies the quantized blocks directly (8-bit activations); the numpy
    # model uses the dequantized weights in float32: near-ties may flip, nothing else
    assert agree >= 0.85, (agree, margins)
    assert all(m < 0.5 for m in margins), margins


def test_the_comparison_sees_a_wrong_conversion(
    converted: Path, llama_greedy: list[tuple[list[int], list[int]]]
) -> None:
    # the norms left as the GGUF stores them (weight + 1): what forgetting to undo
    # llama.cpp's shift would write
    def unshifted(name: str, w: gemma3_numpy.F32) -> gemma3_numpy.F32:
        return w + 1.0 if name.endswith("norm.weight") else w

    agree, _ = _agreement(converted, llama_greedy[:1], unshifted)
    assert agree < 0.5


def test_bf16_rounds_to_nearest_even() -> None:
    x = np.array([1.0, 1.0 + 2**-8, 1.0 + 3 * 2**-9, -2.5, 0.0], dtype=np.float32)
    bits = to_bf16_rounded(x)
    back = (bits.astype(np.uint32) << 16).view(np.float32)
    # 1 + 2^-8 is a tie between 1 and 1 + 2^-7: even mantissa (1.0) wins
    assert back.tolist() == [1.0, 1.0, 1.0 + 2**-7, -2.5, 0.0]


def test_refusals_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from crossover.models.synth import ensure_synth

    llama = ensure_synth("tiny-llama", ("gguf",)).gguf
    assert llama is not None
    code = main(["models", "convert", str(llama), "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "cannot be converted yet" in err and len(err.splitlines()) == 1
    code = main(["models", "convert", str(tmp_path / "none.gguf"), "--out", str(tmp_path / "y")])
    assert code == 2 and "no such file" in capsys.readouterr().err
