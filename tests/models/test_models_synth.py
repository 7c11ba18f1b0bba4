"""Random-weight checkpoints: GGUF and HF outputs of the tiny shape, shapes data, CLI errors."""

from __future__ import annotations

import itertools
import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from crossover.builds.llamacpp import vocab_gguf
from crossover.cli.app import main
from crossover.errors import UsageError
from crossover.models.gguf_meta import read_gguf_metadata
from crossover.models.random_weights import to_bf16_bits
from crossover.models.safetensors_io import read_safetensors_header
from crossover.models.shapes import KNOWN_SHAPES, ArchShape, get_shape, shape_from_hf_config
from crossover.models.synth import SynthResult, ensure_synth
from crossover.models.synth_gguf import tokenizer_kv, write_gguf

TINY = get_shape("tiny-llama")


@pytest.fixture(scope="module")
def tiny() -> SynthResult:
    """Written once per machine into the cache (the llama-server tests share it)."""
    return ensure_synth("tiny-llama", ("gguf", "hf"))


def test_known_shapes_cite_sources_and_are_consistent() -> None:
    assert {"llama-3-8b", "llama-3.2-1b", "qwen2.5-0.5b", "tiny-llama"} <= set(KNOWN_SHAPES)
    for shape in KNOWN_SHAPES.values():
        assert shape.source
        assert shape.heads % shape.kv_heads == 0
    # Published parameter counts: Llama 3 8B is 8.03 B, Qwen2.5-0.5B 0.49 B.
    assert round(get_shape("llama-3-8b").n_params() / 1e9, 2) == 8.03
    assert round(get_shape("qwen2.5-0.5b").n_params() / 1e9, 2) == 0.49


def test_tiny_outputs_are_labelled_random(tiny: SynthResult) -> None:
    readme = (tiny.out_dir / "README.txt").read_text()
    assert "RANDOM WEIGHTS" in readme
    assert "performance measurement only" in readme
    assert "RANDOM WEIGHTS" in (tiny.out_dir / "hf" / "README.txt").read_text()
    assert tiny.gguf is not None
    meta = read_gguf_metadata(tiny.gguf, "general.")
    assert b"RANDOM WEIGHTS" in meta["general.description"].value


def test_tiny_gguf_tokenizer_is_the_vocab_files(tiny: SynthResult) -> None:
    assert tiny.gguf is not None
    ours = read_gguf_metadata(tiny.gguf, "tokenizer.")
    theirs = read_gguf_metadata(vocab_gguf(TINY.vocab_file), "tokenizer.")
    assert set(ours) == set(theirs)
    assert ours["tokenizer.ggml.tokens"].value == theirs["tokenizer.ggml.tokens"].value
    assert ours["tokenizer.ggml.merges"].value == theirs["tokenizer.ggml.merges"].value
    arch = read_gguf_metadata(tiny.gguf, "llama.")
    assert arch["llama.embedding_length"].value == TINY.hidden
    assert arch["llama.block_count"].value == TINY.layers
    assert arch["llama.attention.head_count_kv"].value == TINY.kv_heads


def test_gguf_reader_loads_a_small_synth(tmp_path: Path) -> None:
    """The gguf package's own reader (slow on big vocabularies, so a 32k-token shape)."""
    import gguf

    cfg = {
        "model_type": "llama",
        "hidden_size": 128,
        "intermediate_size": 384,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 32000,
        "tie_word_embeddings": True,
    }
    (tmp_path / "small").mkdir()
    (tmp_path / "small" / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "out"
    argv = ["models", "synth", "--config", str(tmp_path / "small" / "config.json")]
    assert main([*argv, "--out", str(out), "--format", "gguf", "--dtype", "bf16", "-q"]) == 0
    reader = gguf.GGUFReader(out / "small-bf16.gguf")
    tensors = {t.name: t for t in reader.tensors}
    assert len(tensors) == 2 + 9 * 2  # embedding, final norm, 9 per layer; tied: no output
    embd = tensors["token_embd.weight"]
    assert embd.tensor_type == gguf.GGMLQuantizationType.BF16
    assert [int(d) for d in embd.shape] == [128, 32000]  # GGUF order: innermost first
    assert [int(d) for d in tensors["blk.1.attn_k.weight"].shape] == [128, 64]
    assert [int(d) for d in tensors["blk.0.ffn_down.weight"].shape] == [384, 128]
    assert tensors["blk.0.attn_norm.weight"].tensor_type == gguf.GGMLQuantizationType.F32
    assert len(reader.fields["tokenizer.ggml.tokens"].data) == 32000
    assert reader.fields["general.architecture"].contents() == "llama"


def test_hf_config_and_safetensors_header(tiny: SynthResult) -> None:
    assert tiny.hf_dir is not None
    cfg = json.loads((tiny.hf_dir / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLM"]
    assert cfg["model_type"] == "llama"
    assert (cfg["hidden_size"], cfg["num_hidden_layers"]) == (TINY.hidden, TINY.layers)
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"]) == (TINY.heads, TINY.kv_heads)
    assert cfg["vocab_size"] == TINY.vocab
    assert cfg["tie_word_embeddings"] is True
    assert cfg["crossover_random_weights"] is True
    st = tiny.hf_dir / "model.safetensors"
    header = read_safetensors_header(st)
    assert header["__metadata__"]["crossover_random_weights"] == "true"
    hd = TINY.hidden // TINY.heads
    assert header["model.embed_tokens.weight"]["shape"] == [TINY.vocab, TINY.hidden]
    assert header["model.layers.3.self_attn.k_proj.weight"]["shape"] == [TINY.kv_heads * hd, 256]
    assert header["model.layers.0.mlp.down_proj.weight"]["shape"] == [TINY.hidden, TINY.ffn]
    assert header["model.norm.weight"]["dtype"] == "F16"
    assert "lm_head.weight" not in header
    spans = sorted(v["data_offsets"] for k, v in header.items() if k != "__metadata__")
    assert spans[0][0] == 0
    assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))
    header_len = int.from_bytes(st.read_bytes()[:8], "little")
    assert st.stat().st_size == 8 + header_len + spans[-1][1]


def test_hf_tokenizer_matches_llama3_ids(tiny: SynthResult) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny.hf_dir))
    # Llama 3's ids: <|begin_of_text|>=128000, "Hello"=9906, " world"=1917.
    assert tok("Hello world")["input_ids"] == [128000, 9906, 1917]
    assert tok("Hello world", add_special_tokens=False)["input_ids"] == [9906, 1917]
    assert len(tok) == TINY.vocab  # no token beyond the embedding


def test_bf16_bits_truncate_float32() -> None:
    bits = to_bf16_bits(np.array([1.0, -2.0, 0.0], dtype=np.float32))
    assert bits.tolist() == [0x3F80, 0xC000, 0x0000]


def test_qwen_vocab_is_padded_to_the_embedding() -> None:
    kv = tokenizer_kv(vocab_gguf("ggml-vocab-qwen2.gguf"), 152064)
    tokens = kv["tokenizer.ggml.tokens"].value
    assert len(tokens) == 152064
    assert tokens[-1] == b"[PAD152063]"
    assert len(kv["tokenizer.ggml.token_type"].value) == 152064
    with pytest.raises(UsageError):
        tokenizer_kv(vocab_gguf("ggml-vocab-qwen2.gguf"), 1000)


def test_gguf_is_written_tensor_by_tensor(tmp_path: Path) -> None:
    shape = ArchShape(
        "stream", "llama", 1024, 2, 16, 4, 4096, 32000, 10000.0, 2048, 1e-5, False,
        "ggml-vocab-llama-spm.gguf", "test",
    )  # fmt: skip
    tracemalloc.start()
    try:
        path = write_gguf(shape, vocab_gguf(shape.vocab_file), tmp_path / "s.gguf", "f16")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    total = path.stat().st_size
    assert total > 180e6
    assert peak < 0.5 * total  # the largest tensor (65 MB) at a time, not the file


def test_config_shape_errors(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "llama", "hidden_size": 64')
    with pytest.raises(UsageError, match="not valid JSON"):
        shape_from_hf_config(bad)
    bad.write_text(json.dumps({"model_type": "gpt_neox", "hidden_size": 64}))
    with pytest.raises(UsageError, match="not supported"):
        shape_from_hf_config(bad)
    bad.write_text(json.dumps({"model_type": "llama", "hidden_size": "big"}))
    with pytest.raises(UsageError):
        shape_from_hf_config(bad)


@pytest.mark.parametrize(
    "args",
    [
        ["--arch", "llama-9000"],
        ["--arch", "tiny-llama", "--dtype", "f32"],
        ["--arch", "tiny-llama", "--format", "onnx"],
        ["--config", "{tmp}/missing.json"],
        ["--config", "{tmp}/bad.json"],
        [],
        ["--arch", "tiny-llama", "--config", "{tmp}/bad.json"],
    ],
)
def test_synth_user_mistakes_exit_2(tmp_path: Path, args: list[str]) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    argv = ["models", "synth", "--out", str(tmp_path / "out"), "-q"]
    assert main(argv + [a.replace("{tmp}", str(tmp_path)) for a in args]) == 2


def test_synth_unwritable_out_exits_2(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    argv = ["models", "synth", "--arch", "tiny-llama", "--out", str(blocker / "sub"), "-q"]
    assert main(argv) == 2


def test_fetch_unknown_model_exits_2() -> None:
    assert main(["models", "fetch", "llama-3-8b"]) == 2


def test_models_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert "tiny-llama" in out
    assert "gemma3-270m" in out


def _untied(vocab_file: str, vocab: int) -> ArchShape:
    return ArchShape(
        "untied", "llama", 64, 1, 2, 1, 128, vocab, 500000.0, 512, 1e-5, False, vocab_file,
        "test",
    )  # fmt: skip


def test_output_rows_keep_whole_words_so_greedy_text_round_trips(tmp_path: Path) -> None:
    """The untied output projection is random only in the rows of whole-word tokens: any
    hidden state's greedy token is such a word, each one decodes to printable text alone,
    and a sequence of them re-tokenizes to the same ids (the text witness for engines
    that stream text deltas and hold back tokens that print nothing, transformers serve)."""
    from tokenizers import Tokenizer

    from crossover.models.safetensors_io import read_safetensors_header
    from crossover.models.synth_hf import write_hf

    shape = _untied("ggml-vocab-llama-bpe.gguf", 128256)
    out = write_hf(shape, vocab_gguf(shape.vocab_file), tmp_path / "hf", "bf16")
    st = out / "model.safetensors"
    header = read_safetensors_header(st)
    begin, end = header["lm_head.weight"]["data_offsets"]
    base = 8 + int.from_bytes(st.read_bytes()[:8], "little")
    raw = np.frombuffer(st.read_bytes()[base + begin : base + end], np.uint16)
    w = (raw.astype(np.uint32) << 16).view(np.float32).reshape(128256, 64)
    live = np.abs(w).sum(axis=1) > 0
    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    words = [i for i in range(128256) if live[i]]
    assert 20_000 < len(words) < 40_000  # 26,069 whole lowercase words in Llama 3's vocab
    assert tok.id_to_token(words[0]).startswith("Ġ") and tok.id_to_token(words[0])[1:].isalpha()
    assert not live[tok.token_to_id("<|begin_of_text|>")] and not live[tok.token_to_id("Ġ")]
    rng = np.random.default_rng(3)
    hidden = rng.standard_normal((500, 64)).astype(np.float32)
    greedy = np.argmax(hidden @ w.T, axis=1)
    assert live[greedy].all()
    seq = [int(t) for t in rng.choice(words, 200)]
    text = tok.decode(seq)
    assert tok.encode(text, add_special_tokens=False).ids == seq
    assert all(tok.decode([t]).strip() for t in seq[:50])
    assert json.loads((out / "config.json").read_text())["crossover_output_rows"].startswith(
        "whole-word"
    )


def test_gguf_output_rows_match_the_hf_folder(tmp_path: Path) -> None:
    """Both formats zero the same rows (llama.cpp serves the same model as vLLM); a
    SentencePiece vocab keeps its ``▁word`` tokens."""
    import gguf

    from crossover.models.random_weights import word_rows

    shape = _untied("ggml-vocab-llama-spm.gguf", 32000)
    path = write_gguf(shape, vocab_gguf(shape.vocab_file), tmp_path / "u.gguf", "f16")
    reader = gguf.GGUFReader(path)
    out = {t.name: t for t in reader.tensors}["output.weight"]
    data = np.asarray(out.data).reshape(32000, 64)
    live = np.abs(data.astype(np.float32)).sum(axis=1) > 0
    tokens = [bytes(reader.fields["tokenizer.ggml.tokens"].parts[i]) for i in
              reader.fields["tokenizer.ggml.tokens"].data]  # fmt: skip
    assert (live == word_rows(tokens, "llama", 32000)).all()
    kept = [tokens[i].decode() for i in np.flatnonzero(live)[:5]]
    assert all(t.startswith("▁") and t[1:].isalpha() for t in kept)
    assert 5_000 < int(live.sum()) < 15_000


def test_unknown_tokenizer_models_keep_every_row() -> None:
    from crossover.models.random_weights import word_rows

    assert word_rows([b"a", b"b"], "t5", 4).all()
