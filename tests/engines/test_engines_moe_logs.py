"""The MoE path read from logs: vLLM 0.26's real Qwen3-30B-A3B-shape log (H200), vLLM's
and llama.cpp's wording for the cases that log does not have, quoted from their sources
(vLLM 0.26.0 fused_moe.py / jit_monitor.py; llama.cpp of llama-cpp-python 0.3.36)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossover.engines import check, effective_settings, parse_expect
from crossover.engines.effective import LaunchRecord, header_line, read_log

from .conftest import LOGS
from .test_engines_verify_cli import run_cli

VLLM_MOE = LOGS / "vllm-0.26.0-h200-qwen3-30b-a3b.log.gz"


def test_vllm_real_moe_log() -> None:
    s = effective_settings(read_log(VLLM_MOE))
    expect = {
        "moe_backend": "TRITON", "moe_kernel": "TritonExperts", "moe_tuned_config": True,
        "moe_config": "E=128,N=768,device_name=NVIDIA_H200.json",
        "attention_backend": "FLASH_ATTN", "cuda_graph_max_bs": 256, "cuda_graphs": True,
        "max_batched_tokens": 8192, "kv_cache_tokens": 659072, "gpu_memory_utilization": 0.85,
    }  # fmt: skip
    assert {k: s.value(k) for k in expect} == expect
    assert s.facts["moe_config"].line == 33
    # the one warning: a fused-MoE kernel compiled while serving (in the c=16 level)
    (w,) = s.warnings
    assert (w.key, w.level, w.line, w.count) == (
        "jit_during_inference",
        "warning",
        159,
        1,
    )  # grep -n
    assert "Triton kernel (fused_moe_kernel)" in w.message
    assert "--jit-monitor-verbose" in w.message


# vLLM 0.26.0 vllm/model_executor/layers/fused_moe/fused_moe.py get_moe_configs:
# logger.warning_once("Using default MoE config. Performance might be sub-optimal! "
#                     "Config file not found at %s", ", ".join(config_file_paths))
VLLM_DEFAULT = (
    "(EngineCore pid=1781) WARNING 12-02 01:47:37 [fused_moe.py:1107] Using default MoE "
    "config. Performance might be sub-optimal! Config file not found at /opt/torch/.venv/lib/"
    "python3.12/site-packages/vllm/model_executor/layers/fused_moe/configs/E=128,N=768,"
    "device_name=NVIDIA_GeForce_RTX_4090.json"
)


def _vllm_default() -> str:
    lines = read_log(VLLM_MOE).splitlines()
    return "\n".join(VLLM_DEFAULT if "for MoE layer" in ln else ln for ln in lines)


def test_vllm_default_moe_config_is_a_warning(capsys: pytest.CaptureFixture[str]) -> None:
    s = effective_settings(_vllm_default())
    assert (s.value("moe_tuned_config"), s.value("moe_config")) == (False, "default")
    assert [w.key for w in s.warnings] == ["moe_default_config", "jit_during_inference"]
    assert "(E=128,N=768,device_name=NVIDIA_GeForce_RTX_4090.json)" in s.warnings[0].message
    assert check(s, parse_expect("moe_tuned_config=on"))[0].status == "mismatch"


def test_verify_config_prints_the_vllm_fallback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "vllm.log"
    log.write_text(_vllm_default())
    assert run_cli(["verify-config", str(log)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "warning: vLLM found no tuned fused-MoE config for this GPU" in out
    assert "warning: vLLM compiled a Triton kernel (fused_moe_kernel) while serving" in out


# llama.cpp (llama-cpp-python 0.3.36 vendor): src/llama-model.cpp print_info
# ("%s: n_expert              = %u"), src/llama-model-loader.cpp (LLAMA_LOG_DEBUG
# "tensor %s (%zu MiB %s) buffer type overridden to %s", LLAMA_LOG_WARN "llama_model_loader:
# tensor overrides to CPU are used with mmap enabled - consider using --load-mode none ...").
LLAMA_MOE = """\
0.00.803.787 I print_info: n_expert              = 128
0.00.803.788 I print_info: n_expert_used         = 8
0.00.803.789 I print_info: n_expert_groups       = 0
0.00.804.001 W llama_model_loader: tensor overrides to CPU are used with mmap enabled - consider using --load-mode none for better performance
0.00.804.002 D tensor blk.0.ffn_gate_exps.weight (384 MiB bf16) buffer type overridden to CPU
0.00.804.003 D tensor blk.0.ffn_down_exps.weight (384 MiB bf16) buffer type overridden to CPU
0.00.804.004 D tensor blk.0.ffn_up_exps.weight (384 MiB bf16) buffer type overridden to CPU
0.00.804.773 I load_tensors: offloaded 49/49 layers to GPU
"""


def test_llamacpp_moe_lines() -> None:
    s = effective_settings(LLAMA_MOE, engine="llamacpp")
    assert (s.value("n_expert"), s.value("n_expert_used")) == (128, 8)
    assert (s.value("moe_experts_on_cpu"), s.value("cpu_tensor_overrides")) == (True, True)
    (w,) = s.warnings
    assert (w.key, w.level, w.count) == ("moe_experts_on_cpu", "note", 3)
    assert "blk.0.ffn_gate_exps.weight on CPU" in w.message
    # the offload model's figure (advise data/offload.yaml) and where to estimate the rate
    from crossover.advise.cost import offload_constants

    assert f"{offload_constants().cpu_bandwidth_fraction:.2f} of the host memory" in w.message
    assert "--host-mem-bandwidth" in w.message
    assert w.message.startswith("3 expert tensors are kept in host memory")


def test_a_warning_counts_one_line_in_the_singular() -> None:
    """A warning rule's message agrees with its count: ``1 expert tensor is``."""
    (w,) = effective_settings(
        "\n".join(LLAMA_MOE.splitlines()[:5] + LLAMA_MOE.splitlines()[-1:]), engine="llamacpp"
    ).warnings
    assert w.count == 1
    assert w.message.startswith("1 expert tensor is kept in host memory")


def test_llamacpp_dense_log_has_no_moe_facts() -> None:
    s = effective_settings((LOGS / "llama-server-cuda-h200-graphs-on.log").read_text())
    assert "n_expert" not in s.facts  # "n_expert = 0": a dense model
    assert s.warnings == []


@pytest.mark.parametrize(
    ("argv", "env", "expect"),
    [
        (["--cpu-moe"], {}, {"moe_experts_on_cpu": True}),
        (["-ncmoe", "12"], {}, {"moe_experts_on_cpu": True, "cpu_moe_layers": 12}),
        (["-ot", r"blk\.[0-9]\.ffn_.*_exps=CPU"], {}, {"moe_experts_on_cpu": True}),
        ([], {"LLAMA_ARG_CPU_MOE": "1"}, {"moe_experts_on_cpu": True}),
        (["-ot", "token_embd=CPU"], {}, {}),
    ],
)
def test_llamacpp_expert_placement_asked_at_launch(
    argv: list[str], env: dict[str, str | None], expect: dict[str, object]
) -> None:
    record = LaunchRecord(
        engine="llamacpp", argv=["llama-server", "-m", "m.gguf", *argv], env=env, port=8080,
        started_at="2026-12-02T09:00:00+00:00",
    )  # fmt: skip
    s = effective_settings(header_line(record) + "0.00.803.787 I print_info: n_expert = 128\n")
    got = {k: s.value(k) for k in ("moe_experts_on_cpu", "cpu_moe_layers") if k in s.facts}
    assert got == expect
    assert all(not s.facts[k].verified for k in got)  # requested; -lv 5 lines confirm


# The H200 MoE tuning sweep's real log with the tuned file hidden (2026-12-04), and the
# earlier MoE sweep's log with its tuned-config line as vLLM words it then.
VLLM_DEFAULT_REAL = LOGS / "vllm-0.26.0-h200-qwen3-30b-a3b-default-moe.log.gz"


def test_verify_config_on_the_real_default_config_log(capsys: pytest.CaptureFixture[str]) -> None:
    s = effective_settings(read_log(VLLM_DEFAULT_REAL))
    assert (s.value("moe_tuned_config"), s.value("moe_config")) == (False, "default")
    assert s.value("moe_backend") == "TRITON"
    (w,) = [w for w in s.warnings if w.key == "moe_default_config"]
    assert w.line == 33  # grep -n "Using default MoE config"
    assert assert_words(w.message)
    assert run_cli(["verify-config", str(VLLM_DEFAULT_REAL)]) == 0  # a warning, not a fail
    out = " ".join(capsys.readouterr().out.split())
    assert "(E=128,N=768,device_name=NVIDIA_H200.json) and runs default tiles" in out
    assert assert_words(out)


def assert_words(text: str) -> bool:
    """The quantified wording: most GPUs 0-5% (the H200 measurement), the H20 exception."""
    return all(
        words in text
        for words in (
            "expect 0-5% slower decode on most GPUs (measured on the H200",
            "TPOT -1.0% to +4.6% at c=1-256",
            "up to 1.6x at batch 1-32 on some (H20, Mixtral shape, vLLM PR #44152)",
        )
    )


SWEEP_VLLM = Path(__file__).parents[2] / "docs/results/h200/moe/engines/vllm.log.gz"
H200_DEFAULT = VLLM_DEFAULT.replace("NVIDIA_GeForce_RTX_4090", "NVIDIA_H200")


def test_verify_config_words_the_fallback_as_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = read_log(SWEEP_VLLM).splitlines()
    assert sum("for MoE layer" in ln for ln in lines) == 1
    log = tmp_path / "vllm.log"
    log.write_text("\n".join(H200_DEFAULT if "for MoE layer" in ln else ln for ln in lines))
    assert run_cli(["verify-config", str(log)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "(E=128,N=768,device_name=NVIDIA_H200.json) and runs default tiles" in out
    assert "expect 0-5% slower decode on most GPUs (measured on the H200" in out
    assert "TPOT -1.0% to +4.6% at c=1-256" in out
    assert "up to 1.6x at batch 1-32 on some (H20, Mixtral shape, vLLM PR #44152)" in out
    assert "may run well below" not in out  # the unquantified wording is gone


def test_the_warning_quotes_the_rule_data() -> None:
    """verify-config's numbers are the advisor's: each class's range in rules.yaml."""
    from crossover.advise.rules import moe_untuned_classes
    from crossover.engines.logs_moe import UNTUNED_COST

    classes = {c.id: c for c in moe_untuned_classes()}
    most = max(r.slower_pct[1] for r in classes["most"].ranges)
    assert f"0-{most:g}% on RTX 5090" in UNTUNED_COST and round(most) == 5
    h20 = max(r.slower_pct[1] for r in classes["h20"].ranges if r.batch[1] <= 32)
    assert f"up to {1 + h20 / 100:.1f}x at batch 1-32" in UNTUNED_COST
    narrow = classes["narrow-shard"]
    assert f"up to {max(r.slower_pct[1] for r in narrow.ranges):g}%" in UNTUNED_COST
    assert f"N <= {narrow.max_n}" in UNTUNED_COST
    for pr in ("#44152", "#45379", "#48309", "#39183", "#35457", "#44830"):
        assert pr in UNTUNED_COST
        assert any(pr in c.source for c in classes.values())
