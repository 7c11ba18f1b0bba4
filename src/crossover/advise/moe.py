"""Mixture-of-experts advice from cited data (``data/rules.yaml``).

* ``tuned_config``: does the engine ship a tuned fused-MoE kernel config for this GPU
  and shape (rule ``moe-tuned-kernel-config``)? Present, absent (looked up, not there:
  default tile sizes, slower MoE) or unknown (never looked up).
* ``expert_parallel_note``: on several GPUs, expert parallelism beside tensor
  parallelism (rule ``moe-expert-parallel``), with each engine's flag.
* ``cpu_offload``: when llama.cpp cannot fit an MoE on the GPU, how many layers' experts
  ``--n-cpu-moe`` must move to system memory (rule ``llamacpp-moe-cpu-offload``).

Memory always counts every expert (``cost.weight_bytes``); the decode read counts the
touched ones (``cost.touched_weight_bytes``).
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel

from crossover.advise import cost
from crossover.advise.cost import MemoryFit
from crossover.advise.model import ModelFacts
from crossover.advise.rules import moe_config_table
from crossover.engines import registry

GIB = 1024**3


class TunedConfig(BaseModel):
    status: Literal["present", "absent", "unknown"]
    file: str  # the file the engine looks for
    reason: str


def _dtype(quant: str) -> str | None:
    """The ``dtype=`` part of a vLLM fused-MoE config name for a weight format."""
    if quant in ("bf16", "fp16"):
        return ""
    if quant in ("fp8", "fp8-rowwise"):
        return ",dtype=fp8_w8a8"
    if quant == "fp8-block":
        return ",dtype=fp8_w8a8,block_shape=[128,128]"
    if quant in ("int4-awq", "int4-gptq"):
        return ",dtype=int4_w4a16"
    return None


def config_key(model: ModelFacts, quant: str, tp: int = 1, ep: bool = False) -> str | None:
    """``E=..,N=..[,dtype=..]``: experts on one GPU and expert FFN width per rank.

    Tensor parallelism slices every expert (N = moe_ffn / tp); expert parallelism places
    whole experts (E = experts / tp, N = moe_ffn)."""
    if not model.is_moe or not model.experts or not model.moe_ffn:
        return None
    dtype = _dtype(quant)
    if dtype is None:
        return None
    if ep:
        if model.experts % tp:
            return None
        return f"E={model.experts // tp},N={model.moe_ffn}{dtype}"
    if model.moe_ffn % tp:
        return None
    return f"E={model.experts},N={model.moe_ffn // tp}{dtype}"


def _file_name(key: str, device_name: str) -> str:
    """The engine's file name: E and N, then the device, then dtype and block shape."""
    e, n, *rest = key.split(",", 2)
    return ",".join([e, n, f"device_name={device_name}", *rest]) + ".json"


def tuned_config(
    engine: str, gpu_id: str, model: ModelFacts, quant: str, tp: int = 1, ep: bool = False
) -> TunedConfig | None:
    """None where the engine has no table (or the model is dense, or the format has no
    config name)."""
    table = moe_config_table().get(engine)
    key = config_key(model, quant, tp, ep)
    if table is None or key is None:
        return None
    device = table.devices.get(gpu_id)
    if device is None:
        return TunedConfig(
            status="unknown",
            file=_file_name(key, f"<{gpu_id}>"),
            reason=f"{engine}'s fused-MoE configs for {gpu_id} were not looked up",
        )
    name = _file_name(key, device.device_name)
    if key in device.files:
        return TunedConfig(
            status="present", file=name, reason=f"{engine} ships a tuned fused-MoE config {name}"
        )
    if key in device.missing:
        extra = f"; {device.note}" if device.note else ""
        return TunedConfig(
            status="absent",
            file=name,
            reason=f"{engine} ships no {name}: default Triton tile sizes, slower MoE layers "
            f"(tune with benchmarks/kernels/benchmark_moe.py --tune){extra}",
        )
    return TunedConfig(
        status="unknown",
        file=name,
        reason=f"{name} was not looked up in {engine}'s configs ({table.source})",
    )


def expert_parallel_note(engine: str, model: ModelFacts, tp: int) -> str | None:
    """On TP > 1, the expert-parallel alternative for engines that have one (the spec's
    ``ep_flag``)."""
    flag = registry.get(engine).ep_flag
    if flag is None or tp <= 1 or not model.is_moe or not model.experts:
        return None
    if model.experts % tp:
        return f"{model.experts} experts do not split evenly over {tp} GPUs: TP only"
    return (
        f"also sweep expert parallelism ({flag.format(n=tp)}): {model.experts // tp} whole "
        f"experts per GPU instead of every expert's FFN cut {tp} ways"
    )


class CpuOffload(BaseModel):
    n_cpu_moe: int
    cpu_gib: float  # expert weights moved to system memory
    flag: str
    reason: str


def cpu_offload(model: ModelFacts, quant: str, fit: MemoryFit, gpus: int = 1) -> CpuOffload | None:
    """llama.cpp only: the fewest layers whose experts, moved to system memory, make the
    weights and KV fit. None for a dense model, or when even all experts out is not enough."""
    if not model.is_moe or not model.moe_layers or fit.fits:
        return None
    short = fit.weights_gib_per_gpu + fit.kv_gib_per_gpu - fit.usable_gib_per_gpu
    per_layer = cost.expert_weight_bytes(model, quant) / model.moe_layers / gpus / GIB
    if per_layer <= 0:
        return None
    n = max(1, math.ceil(short / per_layer))
    if n > model.moe_layers:
        return None
    flag = "--cpu-moe" if n == model.moe_layers else f"--n-cpu-moe {n}"
    return CpuOffload(
        n_cpu_moe=n,
        cpu_gib=n * per_layer,
        flag=flag,
        reason=f"fits with the experts of {n} of {model.moe_layers} layers in system memory "
        f"({flag}, or -ot exps=CPU for all; {n * per_layer:.1f} GiB moved; those layers' "
        "experts run on the CPU, so decode slows)",
    )
