"""Mixture-of-experts advice from cited data (``data/rules.yaml``).

* ``tuned_config``: does the engine ship a tuned fused-MoE kernel config for this GPU
  and shape (rule ``moe-tuned-kernel-config``)? Present, absent (looked up, not there:
  default tile sizes, slower MoE) or unknown (never looked up). Absent or unknown, it
  carries ``untuned_slowdown``: how much slower decode runs on default tiles for this GPU
  class and batch (``moe_untuned`` in ``data/rules.yaml``, every range with its sources).
* ``expert_parallel_note``: on several GPUs, expert parallelism beside tensor
  parallelism (rule ``moe-expert-parallel``), with each engine's flag.
* ``cpu_offload``: when llama.cpp cannot fit an MoE on the GPU, how many layers' experts
  ``--n-cpu-moe`` must move to system memory (rule ``llamacpp-moe-cpu-offload``).

Memory always counts every expert (``cost.weight_bytes``); the decode read counts the
touched ones (``cost.touched_weight_bytes``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from crossover.advise import cost
from crossover.advise.cost import MemoryFit
from crossover.advise.model import ModelFacts
from crossover.advise.rules import UntunedClass, moe_config_table, moe_untuned_classes
from crossover.engines import registry

GIB = 1024**3


class Slowdown(BaseModel):
    """Decode on default fused-MoE tiles against a tuned config: ``low_pct``-``high_pct``
    slower at this batch, for GPU class ``cls`` (its sources in ``source``)."""

    cls: str
    batch: int
    low_pct: float
    high_pct: float
    source: str

    @property
    def factor(self) -> float:
        """The step-time factor the advisor applies: the range's middle."""
        return 1 + (self.low_pct + self.high_pct) / 200


class TunedConfig(BaseModel):
    status: Literal["present", "absent", "unknown"]
    file: str  # the file the engine looks for
    reason: str
    # absent or unknown: what default tiles cost at each batch asked
    slowdown: list[Slowdown] = Field(default_factory=list)

    def at(self, batch: int) -> Slowdown | None:
        return next((s for s in self.slowdown if s.batch == batch), None)


def slowdown_words(slows: Sequence[Slowdown]) -> str:
    """``expect 0-5.4% slower decode at batch 1-64 (most GPUs: ...)``, over the batches."""
    if not slows:
        return ""
    lo = min(s.low_pct for s in slows)
    hi = max(s.high_pct for s in slows)
    b0, b1 = min(s.batch for s in slows), max(s.batch for s in slows)
    batches = f"{b0}" if b0 == b1 else f"{b0}-{b1}"
    span = f"{lo:g}-{hi:g}%" + (f" (up to {1 + hi / 100:.1f}x)" if hi >= 30 else "")
    classes = ", ".join(dict.fromkeys(s.cls for s in slows))
    return f"expect {span} slower decode at batch {batches} (GPU class {classes}, moe_untuned)"


def _expert_n(key: str) -> int:
    return int(key.split(",")[1].removeprefix("N="))


def _matches(cls: UntunedClass, gpu_id: str, n: int | None) -> bool:
    if cls.gpus:
        return gpu_id in cls.gpus
    if cls.max_n is not None:
        return n is not None and n <= cls.max_n
    return True


def untuned_slowdown(gpu_id: str, batch: int, n: int | None = None) -> Slowdown | None:
    """How much slower vLLM's fused-MoE decode runs on default tiles than on a tuned
    config: the first class of ``moe_untuned`` that matches the GPU (or the expert FFN
    width per GPU, ``n``), at the range holding ``batch``. None if no range holds it."""
    for cls in moe_untuned_classes():
        if not _matches(cls, gpu_id, n):
            continue
        for r in cls.ranges:
            if r.batch[0] <= batch <= r.batch[1]:
                return Slowdown(
                    cls=cls.id,
                    batch=batch,
                    low_pct=r.slower_pct[0],
                    high_pct=r.slower_pct[1],
                    source=cls.source,
                )
        last = cls.ranges[-1]
        if batch > last.batch[1]:  # beyond the measured batches: the last range holds
            return Slowdown(
                cls=cls.id,
                batch=batch,
                low_pct=last.slower_pct[0],
                high_pct=last.slower_pct[1],
                source=cls.source,
            )
        return None
    return None


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
    engine: str,
    gpu_id: str,
    model: ModelFacts,
    quant: str,
    tp: int = 1,
    ep: bool = False,
    batches: Sequence[int] = (1,),
) -> TunedConfig | None:
    """None where the engine has no table (or the model is dense, or the format has no
    config name). Absent or unknown, ``slowdown`` is what default tiles cost at each of
    ``batches`` (decode tokens per step)."""
    table = moe_config_table().get(engine)
    key = config_key(model, quant, tp, ep)
    if table is None or key is None:
        return None
    slow = [
        s
        for b in sorted(set(batches))
        if (s := untuned_slowdown(gpu_id, b, _expert_n(key))) is not None
    ]
    cost_words = f"; {slowdown_words(slow)}" if slow else ""
    device = table.devices.get(gpu_id)
    if device is None:
        return TunedConfig(
            status="unknown",
            file=_file_name(key, f"<{gpu_id}>"),
            reason=f"{engine}'s fused-MoE configs for {gpu_id} were not looked up"
            + (f"; if none ships, {slowdown_words(slow)}" if slow else ""),
            slowdown=slow,
        )
    name = _file_name(key, device.device_name)
    if key in device.files:
        return TunedConfig(
            status="present", file=name, reason=f"{engine} ships a tuned fused-MoE config {name}"
        )  # no slowdown: the tuned tiles run
    if key in device.missing:
        extra = f"; {device.note}" if device.note else ""
        return TunedConfig(
            status="absent",
            file=name,
            reason=f"{engine} ships no {name}: default Triton tile sizes{cost_words} "
            f"(tune with benchmarks/kernels/benchmark_moe.py --tune){extra}",
            slowdown=slow,
        )
    return TunedConfig(
        status="unknown",
        file=name,
        reason=f"{name} was not looked up in {engine}'s configs ({table.source})"
        + (f"; if it is missing, {slowdown_words(slow)}" if slow else ""),
        slowdown=slow,
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
