"""Mixture-of-experts lines in vLLM's and llama.cpp's logs: which fused-MoE kernel ran,
whether a config tuned for this GPU was found, where the experts live.

vLLM picks a fused-MoE config file by expert count, intermediate size and GPU name
(``E=128,N=768,device_name=NVIDIA_H200.json``) and, when none exists for the GPU, runs a
default config: the consumer-card case the advisor's rule ``seed-1-engine-choice`` cites
(vLLM PRs #54372 and #56085 added RTX 4090 configs by hand). Each line is quoted from
vLLM 0.26.0's source (path given) and was seen on an H200 (tests/fixtures/logs); SGLang's
counterparts are in ``crossover.engines.logs_sglang``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping

from crossover.engines.logpatterns import LogPattern, Value, WarningRule, _p, const, g1_int, g1_str

_VLLM_CFG = "vllm/model_executor/layers/fused_moe/fused_moe.py get_moe_configs; seen (0.26.0)"
_VLLM_ORACLE = "vllm/model_executor/layers/fused_moe/oracle/*.py; seen (0.26.0)"
_VLLM_JIT = "vllm/utils/jit_monitor.py (warning_once per kernel name); seen (0.26.0)"
_LLAMA = "llama.cpp (vendored in llama-cpp-python 0.3.36)"


# What default fused-MoE tiles cost, in the words of the advisor's rule (the numbers are
# advise/data/rules.yaml moe_untuned's; a test holds them equal).
UNTUNED_COST = (
    "expect 0-5% slower decode on most GPUs (measured on the H200, vLLM 0.26.0, BF16: "
    "TPOT -1.0% to +4.6% at c=1-256, docs/results/h200/moe-tuning; kernel benchmarks "
    "0-5.4% on RTX 5090, RTX 4090D, RTX PRO 6000, vLLM PRs #45379, #48309, #39183), up "
    "to 1.6x at batch 1-32 on some (H20, Mixtral shape, vLLM PR #44152) and up to 25% "
    "where each GPU holds a narrow expert slice, N <= 128 (vLLM PRs #35457, #44830); "
    "tune one with benchmarks/kernels/benchmark_moe.py --tune"
)


def _file(m: re.Match[str]) -> Value:
    return m.group(1).rsplit("/", 1)[-1]


def _nonzero(m: re.Match[str]) -> Value | None:
    n = int(m.group(1))
    return n if n > 0 else None  # 0: a dense model, nothing to report


VLLM_MOE: tuple[LogPattern, ...] = (
    _p(
        "moe_backend",
        r"Using '?([\w ]+?)'? (?:Unquantized |Fp8 |Int8 |WNA16 |Mxfp4 |MxFp8 |NvFp4 |W4A8 )"
        r"?MoE backend(?: out of potential backends|\.| \(user-requested\))",
        g1_str,
        _VLLM_ORACLE,
    ),
    _p(
        "moe_kernel",
        r"Using (\w+) MoE backend$",
        g1_str,
        "vllm/model_executor/layers/fused_moe/oracle/unquantized.py; seen (0.26.0)",
    ),
    _p(
        "moe_config",
        r"Using configuration from (\S+\.json) for MoE layer",
        _file,
        _VLLM_CFG,
    ),
    _p("moe_config", r"Using default MoE config\. Performance might", const("default"), _VLLM_CFG),
    _p("moe_tuned_config", r"Using configuration from \S+ for MoE layer", const(True), _VLLM_CFG),
    _p("moe_tuned_config", r"Using default MoE config\. ", const(False), _VLLM_CFG),
    _p(
        "attention_backend",
        r"Using (\w+) attention backend out of potential backends",
        g1_str,
        "vllm/platforms/cuda.py; seen (0.26.0)",
    ),
    _p(
        "cuda_graph_max_bs",
        r"Profiling CUDA graph memory: .*?FULL=\d+ \(largest=(\d+)\)",
        g1_int,
        "vllm/v1/worker/gpu_model_runner.py; seen (0.26.0)",
    ),
)

VLLM_WARN: tuple[WarningRule, ...] = (
    WarningRule(
        "moe_default_config",
        "warning",
        re.compile(
            r"Using default MoE config\. Performance might be sub-optimal! "
            r"Config file not found at (?:\S*/)?([^/\s]+?\.json)"
        ),
        "vLLM found no tuned fused-MoE config for this GPU ({0}) and runs default tiles: "
        + UNTUNED_COST,
        _VLLM_CFG,
    ),
    WarningRule(
        "jit_during_inference",
        "warning",
        re.compile(r"(\w+) (?:kernel )?JIT compilation during inference: (\w+)"),
        "vLLM compiled a {0} kernel ({1}) while serving: the requests around it waited for "
        "the compiler (a TTFT or ITL spike). vLLM logs this once per kernel name; "
        "--jit-monitor-verbose logs every compile",
        _VLLM_JIT,
    ),
)

# print_info lines: src/llama-model.cpp; the override line is LLAMA_LOG_DEBUG (-lv 5) in
# src/llama-model-loader.cpp; --cpu-moe adds the override "\.ffn_(up|down|gate|gate_up)_(ch|)exps"
# to CPU (common/common.h llm_ffn_exps_cpu_override), --n-cpu-moe N one per layer below N.
LLAMACPP_MOE: tuple[LogPattern, ...] = (
    _p("n_expert", r"print_info: n_expert\s+= (\d+)", _nonzero, f"{_LLAMA} src/llama-model.cpp"),
    _p(
        "n_expert_used",
        r"print_info: n_expert_used\s+= (\d+)",
        _nonzero,
        f"{_LLAMA} src/llama-model.cpp",
    ),
    _p(
        "moe_experts_on_cpu",
        r"tensor blk\.\d+\.ffn_\w*exps\S* \(.*?\) buffer type overridden to CPU",
        const(True),
        f"{_LLAMA} src/llama-model-loader.cpp (debug, -lv 5)",
    ),
    _p(
        "cpu_tensor_overrides",
        r"tensor overrides to CPU are used with mmap enabled",
        const(True),
        f"{_LLAMA} src/llama-model-loader.cpp (a warning, once)",
    ),
)

LLAMACPP_WARN: tuple[WarningRule, ...] = (
    WarningRule(
        "moe_experts_on_cpu",
        "note",
        re.compile(r"tensor (blk\.\d+\.ffn_\w*exps\S*) \(.*?\) buffer type overridden to (CPU\w*)"),
        "{count} expert tensor{s} {are} kept in host memory (first: {0} on {1}): their layers' "
        "MoE work runs on the CPU (--cpu-moe / --n-cpu-moe / -ot), which reads those "
        "experts at about 0.76 of the host memory's bandwidth each token (crossover advise "
        "--host-mem-bandwidth estimates the decode rate)",
        f"{_LLAMA} src/llama-model-loader.cpp (debug, -lv 5)",
    ),
)


def llamacpp_moe_launch(
    argv: list[str], env: Mapping[str, str | None]
) -> dict[str, tuple[Value, str]]:
    """Expert placement llama-server was asked for: ``--cpu-moe`` (all experts in host
    memory), ``--n-cpu-moe N`` (those of the first N layers), an ``-ot`` override that
    sends ``exps`` tensors to CPU, or their ``LLAMA_ARG_*`` variables."""
    out: dict[str, tuple[Value, str]] = {}
    if any(a in ("-cmoe", "--cpu-moe") for a in argv) or env.get("LLAMA_ARG_CPU_MOE"):
        out["moe_experts_on_cpu"] = (True, "--cpu-moe")
    n_layers = env.get("LLAMA_ARG_N_CPU_MOE")
    for flag, value in itertools.pairwise(argv):
        if flag in ("-ncmoe", "--n-cpu-moe"):
            n_layers = value
        elif flag in ("-ot", "--override-tensor") and re.search(r"exps[^,]*=CPU", value):
            out["moe_experts_on_cpu"] = (True, f"{flag} {value}")
    if n_layers is not None and n_layers.isdigit():
        out["cpu_moe_layers"] = (int(n_layers), f"--n-cpu-moe {n_layers}")
        if int(n_layers) > 0:
            out.setdefault("moe_experts_on_cpu", (True, f"--n-cpu-moe {n_layers}"))
    return out
