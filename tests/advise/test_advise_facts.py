"""Hardware and model facts: the known-GPU table, NVML reading, config/GGUF parsing."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from crossover.advise import find_gpu, known_gpus, load_model, system_from_flags
from crossover.advise.hardware import system_from_nvml
from crossover.advise.model import facts_from_config, quant_from_config
from crossover.errors import UsageError

REQUIRED_GPUS = [
    "A100-40GB",
    "A100-80GB",
    "H100-SXM",
    "H100-PCIe",
    "H200",
    "B200",
    "L40S",
    "RTX 3090",
    "RTX 4090",
    "RTX 5090",
    "RTX PRO 6000",
]


@pytest.mark.parametrize("name", REQUIRED_GPUS)
def test_required_gpus_are_known_with_sources(name: str) -> None:
    gpu = find_gpu(name)
    assert gpu.memory_gib > 0
    assert gpu.memory_bandwidth_gbs > 0
    assert gpu.bf16_tflops > 0
    assert gpu.source.strip()
    assert "http" in gpu.source or "whitepaper" in gpu.source.lower()


@pytest.mark.parametrize(
    ("name", "family", "p2p"),
    [
        ("NVIDIA H100 80GB HBM3", "sm90", True),
        ("NVIDIA GeForce RTX 3090", "sm80", False),
        ("rtx-4090", "sm89", False),
        ("RTX5090", "sm120", False),
        ("B200", "sm100", True),
        ("RTX PRO 6000 Blackwell", "sm120", True),
    ],
)
def test_find_gpu_aliases_and_families(name: str, family: str, p2p: bool) -> None:
    gpu = find_gpu(name)
    assert gpu.sm_family == family
    assert gpu.p2p_pcie is p2p


def test_unknown_gpu_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown GPU"):
        find_gpu("Voodoo 5")


def test_every_gpu_id_is_unique() -> None:
    ids = [g.id for g in known_gpus()]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize(
    ("gpu", "count", "want"),
    [
        ("H100", 4, "nvlink"),
        ("RTX 3090", 2, "pcie-no-p2p"),
        ("RTX 4090", 2, "pcie-no-p2p"),
        ("L40S", 3, "pcie"),
        ("RTX PRO 6000", 2, "pcie"),
    ],
)
def test_default_interconnect(gpu: str, count: int, want: str) -> None:
    assert system_from_flags(gpu, count).interconnect == want


def test_bad_interconnect_and_count() -> None:
    with pytest.raises(UsageError):
        system_from_flags("H100", 2, "infiniband")
    with pytest.raises(UsageError):
        system_from_flags("H100", 0)


def _fake_nvml(name: str, n: int, nvlink: bool, p2p: bool) -> types.ModuleType:
    mod = types.ModuleType("pynvml")
    ns: dict[str, Any] = {
        "NVML_P2P_CAPS_INDEX_READ": 0,
        "NVML_P2P_CAPS_INDEX_NVLINK": 3,
        "NVML_P2P_STATUS_OK": 0,
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlDeviceGetCount": lambda: n,
        "nvmlDeviceGetHandleByIndex": lambda i: i,
        "nvmlDeviceGetName": lambda h: name,
        "nvmlDeviceGetCudaComputeCapability": lambda h: (9, 0),
        "nvmlDeviceGetMemoryInfo": lambda h: types.SimpleNamespace(total=80 * 1024**3),
        "nvmlDeviceGetP2PStatus": lambda a, b, idx: 0 if (nvlink if idx == 3 else p2p) else 4,
    }
    for key, value in ns.items():
        setattr(mod, key, value)
    return mod


@pytest.mark.parametrize(
    ("nvlink", "p2p", "want"),
    [
        (True, True, "nvlink"),
        (False, True, "pcie"),
        (False, False, "pcie-no-p2p"),
    ],
)
def test_nvml_pairs_classify_interconnect(
    monkeypatch: pytest.MonkeyPatch, nvlink: bool, p2p: bool, want: str
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml("NVIDIA H100 80GB HBM3", 4, nvlink, p2p))
    system = system_from_nvml()
    assert system.count == 4
    assert system.gpu.id == "H100-SXM"
    assert system.source == "nvml"
    assert len(system.pairs) == 6
    assert system.interconnect == want


def test_no_nvml_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    with pytest.raises(UsageError, match="nvidia-ml-py"):
        system_from_nvml()


# --- models ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "params_b", "active_b"),
    [
        ("llama-3.1-8b", 8.03, 8.03),  # model card: 8.03B
        ("llama-3.1-70b", 70.55, 70.55),  # 70.6B
        ("llama-3.2-1b", 1.24, 1.24),  # 1.24B
        ("qwen3-30b-a3b", 30.5, 3.3),  # 30.5B total, 3.3B active
        ("mixtral-8x7b", 46.7, 12.9),  # 46.7B total, 12.9B active
        ("gemma-3-270m", 0.268, 0.268),  # 268M
        ("deepseek-v2-lite", 15.7, 2.66),  # 15.7B total (2.4B active per card, w/o embeddings)
    ],
)
def test_parameters_computed_from_shapes(name: str, params_b: float, active_b: float) -> None:
    facts = load_model(name)
    assert facts.params / 1e9 == pytest.approx(params_b, rel=0.01)
    assert facts.active_params / 1e9 == pytest.approx(active_b, rel=0.02)


def test_kv_bytes_per_token_llama_8b() -> None:
    facts = load_model("meta-llama/Llama-3.1-8B")
    # 2 x 32 layers x 8 kv heads x 128 head_dim = 65536 values = 128 KiB in bf16
    assert facts.kv_values_per_token() == 2 * 32 * 8 * 128


def test_hf_config_file_and_folder(tmp_path: Path) -> None:
    config = {
        "architectures": ["MixtralForCausalLM"],
        "hidden_size": 1024,
        "intermediate_size": 2048,
        "num_hidden_layers": 4,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "vocab_size": 1000,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "torch_dtype": "bfloat16",
        "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]},
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    for spec in (tmp_path, tmp_path / "config.json"):
        facts = load_model(str(spec))
        assert facts.experts == 8
        assert facts.experts_per_token == 2
        assert facts.is_moe
        assert facts.head_dim == 64
        assert facts.kv_heads == 4
        assert quant_from_config(facts) == "fp8-block"


def test_qwen_moe_shared_expert_keys() -> None:
    facts = facts_from_config(
        {
            "hidden_size": 2048,
            "intermediate_size": 5632,
            "moe_intermediate_size": 1408,
            "shared_expert_intermediate_size": 5632,
            "num_hidden_layers": 24,
            "num_attention_heads": 16,
            "num_key_value_heads": 16,
            "num_experts": 60,
            "num_experts_per_tok": 4,
            "vocab_size": 151936,
            "tie_word_embeddings": False,
        },
        name="qwen1.5-moe-a2.7b",
        source="test",
    )
    # Qwen1.5-MoE-A2.7B: 14.3B total, 2.7B active
    assert facts.params / 1e9 == pytest.approx(14.3, rel=0.02)
    assert facts.active_params / 1e9 == pytest.approx(2.7, rel=0.06)


@pytest.mark.parametrize("bad", ["/nonexistent/model", "not-a-model-name"])
def test_bad_model_is_a_usage_error(bad: str) -> None:
    with pytest.raises(UsageError):
        load_model(bad)


def test_broken_config_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(UsageError):
        load_model(str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 8}))
    with pytest.raises(UsageError, match="lacks"):
        load_model(str(tmp_path))


def _write_gguf(path: Path) -> None:
    import numpy as np
    from gguf import GGUFWriter

    writer = GGUFWriter(str(path), "llama")
    writer.add_block_count(2)
    writer.add_embedding_length(64)
    writer.add_feed_forward_length(128)
    writer.add_head_count(8)
    writer.add_head_count_kv(2)
    writer.add_file_type(1)  # MOSTLY_F16
    writer.add_token_list([f"t{i}" for i in range(32)])
    writer.add_tensor("token_embd.weight", np.zeros((32, 64), dtype=np.float16))
    for i in range(2):
        writer.add_tensor(f"blk.{i}.attn_q.weight", np.zeros((64, 64), dtype=np.float16))
        writer.add_tensor(f"blk.{i}.attn_k.weight", np.zeros((16, 64), dtype=np.float16))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", np.zeros((128, 64), dtype=np.float16))
    writer.add_tensor("output.weight", np.zeros((32, 64), dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_gguf_header(tmp_path: Path) -> None:
    path = tmp_path / "tiny.gguf"
    _write_gguf(path)
    facts = load_model(str(path))
    assert (facts.layers, facts.hidden, facts.attention_heads, facts.kv_heads) == (2, 64, 8, 2)
    assert facts.head_dim == 8
    assert facts.vocab == 32
    assert facts.ffn == 128
    n = 32 * 64 * 2 + 2 * (64 * 64 + 16 * 64 + 128 * 64)
    assert facts.params == n
    assert facts.weight_bytes == 2 * n
    assert quant_from_config(facts) == "gguf-f16"
    assert load_model(str(tmp_path)).params == n  # a folder holding a GGUF


def test_not_a_gguf_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"nope")
    with pytest.raises(UsageError):
        load_model(str(bad))
