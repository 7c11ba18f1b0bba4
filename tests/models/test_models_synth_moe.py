"""Mixture-of-experts random-weight checkpoints: shapes, GGUF layout and Q8_0 blocks,
HF folders (full and config-only), the layer cut, and the CLI's refusals."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from crossover.builds.llamacpp import vocab_gguf
from crossover.cli.app import main
from crossover.errors import UsageError
from crossover.models.gguf_meta import read_gguf_metadata
from crossover.models.safetensors_io import read_safetensors_header
from crossover.models.shapes import (
    KNOWN_SHAPES,
    ArchShape,
    get_shape,
    shape_from_hf_config,
    with_layers,
)
from crossover.models.synth_gguf import write_gguf
from crossover.models.tensors import tensor_specs
from tests.errlines import one_line_error

MOE = ("tiny-qwen3-moe", "tiny-mixtral")


def _synth(tmp: Path, *args: str) -> int:
    return main(["models", "synth", "--out", str(tmp), "-q", *args])


def test_moe_shapes_match_published_parameter_counts() -> None:
    # Qwen3-30B-A3B: 30.5 B total, 3.3 B activated (model card); Mixtral 8x7B: 46.7 B
    # total, 12.9 B per token (Mistral's announcement).
    qwen, mixtral = get_shape("qwen3-30b-a3b"), get_shape("mixtral-8x7b")
    assert round(qwen.n_params() / 1e9, 1) == 30.5
    assert round(qwen.n_active_params() / 1e9, 1) == 3.4  # 3.35: "3.3B" in the card
    assert round(mixtral.n_params() / 1e9, 1) == 46.7
    assert round(mixtral.n_active_params() / 1e9, 1) == 12.9
    assert (qwen.experts, qwen.experts_used, qwen.expert_ffn, qwen.head_dim) == (128, 8, 768, 128)
    assert (mixtral.experts, mixtral.experts_used, mixtral.expert_ffn) == (8, 2, 14336)
    assert "huggingface.co/Qwen/Qwen3-30B-A3B" in qwen.source
    for name in MOE:
        assert "test shape" in KNOWN_SHAPES[name].source
        assert not KNOWN_SHAPES[name].tie_embeddings  # the whole-word output rows apply
    dense = get_shape("llama-3-8b")
    assert dense.n_active_params() == dense.n_params()


@pytest.mark.parametrize(
    ("arch", "gguf_arch"), [("tiny-qwen3-moe", "QWEN3MOE"), ("tiny-mixtral", "LLAMA")]
)
def test_gguf_tensor_names_are_llama_cpps(arch: str, gguf_arch: str) -> None:
    """Every name is one gguf-py lists for the architecture (what llama.cpp loads)."""
    from gguf.constants import MODEL_ARCH, MODEL_TENSORS, TENSOR_NAMES

    allowed = {TENSOR_NAMES[t] for t in MODEL_TENSORS[MODEL_ARCH[gguf_arch]]}
    shape = get_shape(arch)
    specs = tensor_specs(shape)
    for spec in specs:
        base = spec.gguf_name.rsplit(".", 1)[0]
        assert base.replace("blk.0.", "blk.{bid}.").replace("blk.1.", "blk.{bid}.") in allowed
    by = {s.gguf_name: s for s in specs}
    n, ef, h = shape.experts, shape.expert_ffn, shape.hidden
    assert by["blk.1.ffn_gate_exps.weight"].shape == (n, ef, h)
    assert by["blk.1.ffn_down_exps.weight"].shape == (n, h, ef)
    assert by["blk.0.ffn_gate_inp.weight"].kind == "router"


def test_q8_0_gguf_parses_back(tmp_path: Path) -> None:
    """gguf's reader dequantizes the Q8_0 experts to finite N(0, ~0.02) weights of the
    right shape; embedding and output stay F16, norms and router F32."""
    import gguf
    from gguf.quants import dequantize

    assert _synth(tmp_path, "--arch", "tiny-mixtral", "--dtype", "q8_0") == 0
    shape = get_shape("tiny-mixtral")
    reader = gguf.GGUFReader(tmp_path / "tiny-mixtral-q8_0.gguf")
    tensors = {t.name: t for t in reader.tensors}
    q8 = gguf.GGMLQuantizationType.Q8_0
    down = tensors["blk.1.ffn_down_exps.weight"]
    assert down.tensor_type == q8
    assert [int(d) for d in down.shape] == [256, 128, 4]  # GGUF order: innermost first
    w = dequantize(down.data, down.tensor_type)
    assert w.shape == (4, 128, 256)
    assert np.isfinite(w).all()
    assert 0.015 < float(w.std()) < 0.025
    assert tensors["blk.0.attn_q.weight"].tensor_type == q8
    for name in ("token_embd.weight", "output.weight"):
        assert tensors[name].tensor_type == gguf.GGMLQuantizationType.F16
    for name in ("blk.0.ffn_gate_inp.weight", "blk.0.attn_norm.weight"):
        assert tensors[name].tensor_type == gguf.GGMLQuantizationType.F32
    router = np.asarray(tensors["blk.0.ffn_gate_inp.weight"].data)
    assert router.shape == (4, 128) and router.std() > 0.01
    fields = reader.fields
    assert fields["general.architecture"].contents() == "llama"
    assert fields["llama.expert_count"].contents() == shape.experts
    assert fields["llama.expert_used_count"].contents() == shape.experts_used
    assert fields["general.file_type"].contents() == gguf.LlamaFileType.MOSTLY_Q8_0
    readme = (tmp_path / "README.txt").read_text()
    assert "pool of random blocks" in readme and "RANDOM WEIGHTS" in readme


def test_qwen3moe_gguf_metadata(tmp_path: Path) -> None:
    shape = get_shape("tiny-qwen3-moe")
    path = write_gguf(shape, vocab_gguf(shape.vocab_file), tmp_path / "q.gguf", "q8_0")
    meta = read_gguf_metadata(path, "qwen3moe.")
    assert meta["qwen3moe.expert_count"].value == 8
    assert meta["qwen3moe.expert_used_count"].value == 2
    assert meta["qwen3moe.expert_feed_forward_length"].value == 64
    assert meta["qwen3moe.attention.key_length"].value == 64  # head_dim, not hidden/heads
    assert read_gguf_metadata(path, "general.arch")["general.architecture"].value == b"qwen3moe"


def test_q8_0_is_streamed_not_held(tmp_path: Path) -> None:
    """The experts (36 MB of Q8_0 per tensor here) come from a pool, not an array."""
    shape = ArchShape(
        "stream-moe", "mixtral", 1024, 4, 8, 2, 2048, 32000, 1e6, 2048, 1e-5, False,
        "ggml-vocab-llama-spm.gguf", "test", experts=32, experts_used=2, expert_ffn=1024,
    )  # fmt: skip
    vocab = vocab_gguf(shape.vocab_file)
    tracemalloc.start()
    try:
        path = write_gguf(shape, vocab, tmp_path / "s.gguf", "q8_0")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    total = path.stat().st_size
    assert total > 500e6
    assert peak < 0.4 * total  # the pool (36 MB) and one F16 embedding (65 MB)


def test_q8_0_needs_rows_of_whole_blocks(tmp_path: Path) -> None:
    shape = ArchShape(
        "odd", "mixtral", 100, 1, 2, 1, 64, 32000, 1e6, 512, 1e-5, False,
        "ggml-vocab-llama-spm.gguf", "test", experts=2, experts_used=1, expert_ffn=64,
    )  # fmt: skip
    with pytest.raises(UsageError, match="multiple of 32"):
        write_gguf(shape, vocab_gguf(shape.vocab_file), tmp_path / "o.gguf", "q8_0")


@pytest.mark.parametrize("arch", MOE)
def test_hf_moe_config_and_tensor_names(tmp_path: Path, arch: str) -> None:
    assert _synth(tmp_path, "--arch", arch, "--format", "hf", "--dtype", "bf16") == 0
    shape = get_shape(arch)
    cfg = json.loads((tmp_path / "hf" / "config.json").read_text())
    header = read_safetensors_header(tmp_path / "hf" / "model.safetensors")
    n, ef, h = shape.experts, shape.expert_ffn, shape.hidden
    if arch == "tiny-qwen3-moe":
        assert cfg["architectures"] == ["Qwen3MoeForCausalLM"]
        assert cfg["model_type"] == "qwen3_moe"
        assert (cfg["num_experts"], cfg["num_experts_per_tok"]) == (n, shape.experts_used)
        assert cfg["moe_intermediate_size"] == ef
        assert cfg["norm_topk_prob"] is True and cfg["mlp_only_layers"] == []
        assert cfg["head_dim"] == 64
        moe, gate, up, down = "mlp", "gate_proj", "up_proj", "down_proj"
        assert header["model.layers.1.self_attn.q_norm.weight"]["shape"] == [64]
        assert header["model.layers.1.self_attn.k_norm.weight"]["shape"] == [64]
    else:
        assert cfg["architectures"] == ["MixtralForCausalLM"]
        assert cfg["model_type"] == "mixtral"
        assert (cfg["num_local_experts"], cfg["num_experts_per_tok"]) == (n, shape.experts_used)
        assert cfg["intermediate_size"] == ef
        moe, gate, up, down = "block_sparse_moe", "w1", "w3", "w2"
    p = f"model.layers.1.{moe}."
    assert header[p + "gate.weight"]["shape"] == [n, h]
    assert header[p + f"experts.{n - 1}.{gate}.weight"]["shape"] == [ef, h]
    assert header[p + f"experts.{n - 1}.{up}.weight"]["shape"] == [ef, h]
    assert header[p + f"experts.0.{down}.weight"]["shape"] == [h, ef]
    assert f"model.layers.0.{moe}.experts.{n}.{gate}.weight" not in header
    assert header["lm_head.weight"]["shape"] == [shape.vocab, h]
    # the config reads back as the same shape
    back = shape_from_hf_config(tmp_path / "hf" / "config.json", shape.vocab_file)
    assert (back.family, back.experts, back.experts_used, back.expert_ffn) == (
        shape.family, n, shape.experts_used, ef,
    )  # fmt: skip


@pytest.mark.parametrize("arch", MOE)
def test_hf_moe_folder_loads_in_transformers_and_generates(tmp_path: Path, arch: str) -> None:
    torch = pytest.importorskip("torch")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    assert _synth(tmp_path, "--arch", arch, "--format", "hf", "--dtype", "bf16") == 0
    model, info = AutoModelForCausalLM.from_pretrained(
        str(tmp_path / "hf"), dtype=torch.float32, output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert not info["mismatched_keys"]
    tok = AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
    ids = tok("Hello world", return_tensors="pt")
    out = model.generate(**ids, max_new_tokens=6, min_new_tokens=6, do_sample=False)
    new = out[0][ids["input_ids"].shape[1] :].tolist()
    assert len(new) == 6
    # greedy on whole-word output rows: the text re-tokenizes to the same tokens
    assert tok(tok.decode(new), add_special_tokens=False)["input_ids"] == new


def test_config_only_writes_no_weights(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _synth(tmp_path, "--arch", "qwen3-30b-a3b", "--config-only") == 0  # format: hf
    hf = tmp_path / "hf"
    assert {p.name for p in hf.iterdir()} >= {"config.json", "tokenizer.json", "README.txt"}
    assert not list(tmp_path.rglob("*.safetensors")) and not list(tmp_path.rglob("*.gguf"))
    cfg = json.loads((hf / "config.json").read_text())
    assert (cfg["model_type"], cfg["num_experts"], cfg["num_hidden_layers"]) == (
        "qwen3_moe", 128, 48,
    )  # fmt: skip
    assert (cfg["vocab_size"], cfg["tie_word_embeddings"]) == (151936, False)
    assert "NO WEIGHTS" in (hf / "README.txt").read_text()
    assert "hf:" in capsys.readouterr().out


def test_arch_with_another_tokenizer(tmp_path: Path) -> None:
    """``--vocab`` with ``--arch``: Qwen3-MoE with Llama 3's tokenizer (128256 tokens), a
    pairing known to serve on vLLM and SGLang; the name and source say so."""
    argv = ["--arch", "qwen3-30b-a3b", "--vocab", "ggml-vocab-llama-bpe.gguf", "--config-only"]
    assert _synth(tmp_path, *argv) == 0
    cfg = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert (cfg["vocab_size"], cfg["bos_token_id"]) == (128256, 128000)
    assert "replaced by ggml-vocab-llama-bpe.gguf" in cfg["crossover_shape_source"]
    info = json.loads((tmp_path / "shape.json").read_text())
    assert info["name"] == "qwen3-30b-a3b-llama-bpe"


def test_layer_cut_is_named_and_recorded(tmp_path: Path) -> None:
    argv = ["--arch", "tiny-qwen3-moe", "--layers", "1", "--dtype", "q8_0"]
    assert _synth(tmp_path, *argv) == 0
    path = tmp_path / "tiny-qwen3-moe-L1-q8_0.gguf"
    meta = read_gguf_metadata(path, "")
    assert meta["qwen3moe.block_count"].value == 1
    assert meta["crossover.full_layers"].value == 2
    assert b"tiny-qwen3-moe-L1" in meta["general.name"].value
    info = json.loads((tmp_path / "shape.json").read_text())
    assert (info["name"], info["layers"], info["full_layers"]) == ("tiny-qwen3-moe-L1", 1, 2)
    assert "LAYER CUT: 1 of the published 2 layers" in (tmp_path / "README.txt").read_text()
    whole = with_layers(get_shape("tiny-qwen3-moe"), 2)
    assert whole.name == "tiny-qwen3-moe" and whole.full_layers is None


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--dtype", "q8_0", "--format", "hf"], "GGUF only"),
        (["--dtype", "q8_0", "--format", "gguf,hf"], "GGUF only"),
        (["--layers", "0"], "--layers"),
        (["--layers", "-3"], "--layers"),
        (["--layers", "99"], "only 2 layers"),
        (["--config-only", "--format", "gguf"], "--config-only"),
        (["--config-only", "--format", "gguf,hf"], "--config-only"),
        (["--config-only", "--dtype", "q8_0"], "GGUF only"),
        (["--dtype", "q4_0"], "--dtype"),
        (["--vocab", "ggml-vocab-nope.gguf"], "no vocab file"),
    ],
)
def test_moe_synth_user_mistakes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    assert _synth(tmp_path / "out", "--arch", "tiny-qwen3-moe", *args) == 2
    assert needle in one_line_error(capsys)
    assert not (tmp_path / "out").exists()


def test_moe_config_errors(tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    base = {
        "model_type": "qwen3_moe", "hidden_size": 128, "intermediate_size": 256,
        "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 151936,
        "num_experts": 4, "num_experts_per_tok": 8, "moe_intermediate_size": 64,
    }  # fmt: skip
    cfg.write_text(json.dumps(base))
    with pytest.raises(UsageError, match="exceeds"):
        shape_from_hf_config(cfg)
    cfg.write_text(json.dumps(base | {"num_experts_per_tok": 2, "mlp_only_layers": [0]}))
    with pytest.raises(UsageError, match="all-MoE"):
        shape_from_hf_config(cfg)
    cfg.write_text(json.dumps(base | {"num_experts_per_tok": 2, "num_experts": None}))
    with pytest.raises(UsageError, match="num_experts"):
        shape_from_hf_config(cfg)


def test_models_list_shows_experts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if "qwen3-30b-a3b" in ln)
    assert "experts=128x768 top-8" in line and "B active" in line
