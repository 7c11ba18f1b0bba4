"""Cost model: memory fit, decode/prefill rooflines, and the all-reduce curve.

Decode is memory-bound: each step reads the weights a batch touches plus its KV cache,
divided by the achievable bandwidth. Prefill is compute-bound: 2 x active params x
tokens / FLOP/s. Tensor parallelism adds two all-reduces per layer per step; their cost
comes from an ``AllReduceCurve``: alpha-beta defaults per interconnect, or a measured
latency-vs-size table (from ``commbench``) that replaces them. Decode messages are tiny
(batch x hidden x 2 bytes), so they sit on the latency floor: more TP can slow decode.

These are upper bounds by construction (perfect kernels at a fixed fraction of peak);
``--results`` measurements override them and the advice reports the error.
"""

from __future__ import annotations

import itertools
import json
import math
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

import yaml
from pydantic import BaseModel, Field

from crossover.advise.hardware import GpuSpec, System, interconnect_costs
from crossover.advise.model import ModelFacts
from crossover.analysis.roofline import touched_experts as touched_experts
from crossover.errors import UsageError

# Achievable fraction of datasheet memory bandwidth: the H200 here copies at ~4.3 of
# 4.8 TB/s (measured on the project's H200 machine on 2026-11-30;
# docs/results/h200/llamacpp-transformers-2026-11-30.md).
BANDWIDTH_EFFICIENCY = 0.9
# Achievable fraction of dense tensor FLOP/s in prefill GEMMs (assumption).
COMPUTE_EFFICIENCY = 0.7
# Fraction of GPU memory the engine may use, and a runtime reserve (CUDA context,
# activations, graphs, workspace) per GPU.
MEMORY_UTILIZATION = 0.9
RUNTIME_RESERVE_BYTES = 2.0 * 1024**3
# Shortest a decode step can be per layer however small the model: ~8 kernels per layer
# (norms, GEMMs, attention, activation) at ~2 us each even when replayed from a CUDA
# graph (assumption; it only matters for tiny models, where it stops absurd figures).
DECODE_FLOOR_US_PER_LAYER = 16.0
ACTIVATION_BYTES = 2  # bf16 activations in all-reduces
KV_BYTES = 2  # bf16/f16 KV cache

BYTES_PER_PARAM: dict[str, float] = {
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "fp8-block": 1.0 + 4 / (128 * 128),
    "fp8-rowwise": 1.0,
    "nvfp4": 0.5 + 1 / 16,  # FP8 scale per 16 values
    "mxfp4": 0.5 + 1 / 32,  # E8M0 scale per 32 values
    "int4-awq": 0.5 + 2.5 / 128,  # fp16 scale + 4-bit zero per group of 128
    "int4-gptq": 0.5 + 2.5 / 128,
    # GGUF: bits per weight of each type (ggml block layouts; K-quant mixes approximate)
    "gguf-f16": 2.0,
    "gguf-bf16": 2.0,
    "gguf-q8_0": 8.5 / 8,
    "gguf-q6_k": 6.5625 / 8,
    "gguf-q5_k_m": 5.69 / 8,
    "gguf-q5_0": 5.5 / 8,
    "gguf-q4_k_m": 4.85 / 8,
    "gguf-q4_0": 4.5 / 8,
    "gguf-q3_k_m": 3.91 / 8,
    "gguf-q2_k": 2.96 / 8,
}


class AllReduceCurve(Protocol):
    """All-reduce latency in microseconds for a message of ``size_bytes`` over ``n`` GPUs."""

    name: str

    def latency_us(self, size_bytes: float, n: int) -> float: ...


class AlphaBeta:
    """Ring all-reduce: alpha + 2(n-1)/n x bytes / bus bandwidth.

    With ``small`` = (alpha, busbw) of a second, low-latency protocol (NCCL's LL/LL128),
    the latency is the faster of the two at each size: the measured 2x H200 curve is
    ~11 us + bytes / 150 GB/s up to ~2 MiB and ~22 us + bytes / 319 GB/s above, which a
    single alpha-beta underestimates by up to 42% at 1-4 MiB (batched decode, prefill).
    """

    def __init__(
        self,
        alpha_us: float,
        busbw_gbs: float,
        name: str = "alpha-beta",
        small: tuple[float, float] | None = None,
    ) -> None:
        if alpha_us < 0 or busbw_gbs <= 0 or (small and (small[0] < 0 or small[1] <= 0)):
            raise UsageError("all-reduce alpha must be >= 0 and bandwidth > 0")
        self.alpha_us = alpha_us
        self.busbw_gbs = busbw_gbs
        self.small = small
        self.name = name

    def latency_us(self, size_bytes: float, n: int) -> float:
        if n <= 1:
            return 0.0
        ring = 2 * (n - 1) / n * size_bytes
        t = self.alpha_us + ring / (self.busbw_gbs * 1e3)
        if self.small is not None:
            t = min(t, self.small[0] + ring / (self.small[1] * 1e3))
        return t


class TableCurve:
    """A measured latency-vs-size table, interpolated log-log; beyond it, linear in size."""

    def __init__(
        self, points: list[tuple[float, float]], gpus: int | None = None, name: str = "measured"
    ) -> None:
        pts = sorted((float(s), float(t)) for s, t in points)
        if len(pts) < 2 or any(s <= 0 or t <= 0 for s, t in pts):
            raise UsageError("an all-reduce table needs >= 2 points with size and latency > 0")
        self.points = pts
        self.gpus = gpus
        self.name = name

    def latency_us(self, size_bytes: float, n: int) -> float:
        if n <= 1:
            return 0.0
        pts = self.points
        if size_bytes <= pts[0][0]:
            return pts[0][1]  # the small-message floor
        if size_bytes >= pts[-1][0]:
            (s0, t0), (s1, t1) = pts[-2], pts[-1]
            slope = max((t1 - t0) / (s1 - s0), 0.0)
            return t1 + slope * (size_bytes - s1)
        for (s0, t0), (s1, t1) in itertools.pairwise(pts):
            if s0 <= size_bytes <= s1:
                f = (math.log(size_bytes) - math.log(s0)) / (math.log(s1) - math.log(s0))
                return math.exp(math.log(t0) + f * (math.log(t1) - math.log(t0)))
        return pts[-1][1]  # pragma: no cover


class NoComm:
    """One GPU: no communication (a curve for comparing single-GPU runs)."""

    name = "none (1 GPU)"

    def latency_us(self, size_bytes: float, n: int) -> float:
        return 0.0


def load_curve(path: Path) -> TableCurve:
    """``[{"size_bytes", "latency_us"}, ...]`` or ``{"gpus": n, "points": [...]}``."""
    try:
        raw = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not a readable JSON all-reduce table ({exc})") from exc
    gpus = None
    if isinstance(raw, dict):
        gpus = raw.get("gpus")
        raw = raw.get("points")
    if not isinstance(raw, list):
        raise UsageError(f"{path}: want a list of {{size_bytes, latency_us}} points")
    try:
        pts = [(float(p["size_bytes"]), float(p["latency_us"])) for p in raw]
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{path}: every point needs size_bytes and latency_us") from exc
    return TableCurve(pts, gpus=gpus if isinstance(gpus, int) else None, name=str(path))


def default_curve(system: System) -> AlphaBeta:
    """Alpha-beta parameters for the system's interconnect (gpus.yaml, with sources)."""
    cost = interconnect_costs()[system.interconnect]
    link_gbs: float | None = None
    if cost.busbw_gbs is not None:
        bw = cost.busbw_gbs
    else:
        link = system.gpu.nvlink
        if link is None:
            raise UsageError(f"{system.gpu.id} has no NVLink; pick --interconnect pcie")
        # datasheet NVLink figures count both directions
        link_gbs = link.bandwidth_gbs / 2
        bw = link_gbs * (cost.busbw_fraction or 1.0)
    small = None
    if cost.small_alpha_us is not None and cost.small_busbw_fraction is not None:
        small = (cost.small_alpha_us, (link_gbs or bw) * cost.small_busbw_fraction)
    return AlphaBeta(cost.alpha_us, bw, name=f"alpha-beta:{system.interconnect}", small=small)


class Layout(BaseModel):
    tp: int = 1
    pp: int = 1

    @property
    def gpus(self) -> int:
        return self.tp * self.pp


class MemoryFit(BaseModel):
    weights_gib_per_gpu: float
    kv_gib_per_seq_per_gpu: float
    kv_gib_per_gpu: float
    usable_gib_per_gpu: float
    headroom_gib: float
    fits: bool
    weights_fit: bool
    max_concurrency: int
    # per-engine fit (memory.py): the overheads charged and the utilization rule
    reserve_gib: float | None = None
    reserve: list[dict[str, Any]] = Field(default_factory=list)
    utilization: float | None = None
    kv_bytes_per_token_per_gpu: float | None = None


class Prediction(BaseModel):
    concurrency: int
    batch: int  # concurrency actually resident (KV-capped)
    step_ms: float
    decode_mem_ms: float
    decode_compute_ms: float
    comm_ms: float
    prefill_ms: float
    decode_tok_s_per_user: float
    output_tok_s: float
    total_tok_s: float
    bound: str  # "memory" | "compute" | "latency" (the per-layer kernel floor) | "overhead"
    overhead_ms: float | None = None  # calibrated: per-step engine overhead
    profile: str | None = None  # calibrated: the engine profile used (efficiency.py)


def weight_bytes(model: ModelFacts, quant: str) -> float:
    if model.weight_bytes is not None and quant.startswith("gguf-"):
        return float(model.weight_bytes)
    bpp = BYTES_PER_PARAM.get(quant)
    if bpp is None:
        raise UsageError(f"no size for quant {quant!r}")
    if quant.startswith("gguf-"):
        return model.params * bpp
    # embeddings and lm_head stay in 16 bits in FP8/FP4/INT4 checkpoints
    return (model.params - model.embedding_params) * bpp + model.embedding_params * 2.0


def kv_bytes_per_token_per_gpu(model: ModelFacts, layout: Layout) -> float:
    """KV bytes/token = 2 x layers x kv_heads x head_dim x bytes, split by TP and PP."""
    total = model.kv_values_per_token() * KV_BYTES
    if model.kv_latent_dim is not None:
        shard = 1.0  # MLA latent is replicated on every TP rank
    else:
        shard = math.ceil(model.kv_heads / layout.tp) / model.kv_heads
    return total * shard / layout.pp


def memory_fit(
    model: ModelFacts,
    gpu: GpuSpec,
    layout: Layout,
    quant: str,
    concurrency: int,
    context_tokens: int,
) -> MemoryFit:
    gib = 1024**3
    w = weight_bytes(model, quant) / layout.gpus
    kv_seq = kv_bytes_per_token_per_gpu(model, layout) * context_tokens
    usable = gpu.memory_bytes * MEMORY_UTILIZATION - RUNTIME_RESERVE_BYTES
    free = usable - w
    max_c = int(free // kv_seq) if free > 0 and kv_seq > 0 else 0
    kv = kv_seq * concurrency
    return MemoryFit(
        weights_gib_per_gpu=w / gib,
        kv_gib_per_seq_per_gpu=kv_seq / gib,
        kv_gib_per_gpu=kv / gib,
        usable_gib_per_gpu=usable / gib,
        headroom_gib=(usable - w - kv) / gib,
        fits=w + kv <= usable,
        weights_fit=w < usable,
        max_concurrency=max_c,
    )


def tflops(gpu: GpuSpec, quant: str) -> float:
    """Dense peak TFLOP/s for the quant's compute format (FP8/FP4 where the GPU has it)."""
    if quant in ("fp8", "fp8-block", "fp8-rowwise") and gpu.fp8_tflops:
        return gpu.fp8_tflops
    if quant in ("nvfp4", "mxfp4") and gpu.fp4_tflops:
        return gpu.fp4_tflops
    return gpu.bf16_tflops


# touched_experts (imported above): the expected experts a batch touches under uniform
# routing, one formula shared with the sweep's roofline check


def expert_weight_bytes(model: ModelFacts, quant: str) -> float:
    """Bytes of all routed experts (shared experts count as dense weights)."""
    if not model.is_moe or not model.expert_params:
        return 0.0
    if quant.startswith("gguf-") and model.expert_bytes is not None:
        return float(model.expert_bytes)
    bpp = BYTES_PER_PARAM.get(quant)
    if bpp is None or (quant.startswith("gguf-") and model.weight_bytes is not None):
        return weight_bytes(model, quant) * model.expert_params / model.params
    return model.expert_params * bpp


def touched_weight_bytes(model: ModelFacts, quant: str, batch: int) -> float:
    """Weights one decode step reads: every dense weight (attention, router, shared
    experts, embeddings and head), and of the routed experts those the batch touches."""
    total = weight_bytes(model, quant)
    if not model.is_moe or not model.experts or not model.experts_per_token:
        return total
    experts = expert_weight_bytes(model, quant)
    frac = touched_experts(model.experts, model.experts_per_token, batch) / model.experts
    return total - experts + experts * frac


def _stage_decode_ms(
    model: ModelFacts, gpu: GpuSpec, layout: Layout, quant: str, batch: int, ctx: float
) -> tuple[float, float]:
    """(memory ms, compute ms) of one decode step through ONE pipeline stage."""
    read = touched_weight_bytes(model, quant, batch) / layout.gpus
    read += batch * ctx * kv_bytes_per_token_per_gpu(model, layout)
    mem_ms = read / (gpu.memory_bandwidth_gbs * 1e9 * BANDWIDTH_EFFICIENCY) * 1e3
    flops = 2 * model.active_params * batch / layout.gpus
    comp_ms = flops / (tflops(gpu, quant) * 1e12 * COMPUTE_EFFICIENCY) * 1e3
    return mem_ms, comp_ms


def comm_ms(model: ModelFacts, layout: Layout, curve: AllReduceCurve, tokens: int) -> float:
    """Per-step communication: 2 all-reduces per layer (TP) plus PP stage hand-offs."""
    size = tokens * model.hidden * ACTIVATION_BYTES
    ms = 2 * model.layers * curve.latency_us(size, layout.tp) / 1e3 if layout.tp > 1 else 0.0
    if layout.pp > 1:
        ms += (layout.pp - 1) * curve.latency_us(size, 2) / 1e3
    return ms


def prefilled_tokens(input_tokens: int, cached_tokens: int) -> int:
    """The prompt tokens an engine prefills when it serves ``cached_tokens`` of them from
    its prefix cache (at least one: the last token is always computed)."""
    return max(1, input_tokens - cached_tokens)


def cached_prefix_tokens(engine: str, shared_prefix_tokens: int) -> int:
    """The shared prompt start ``engine`` serves from its prefix cache as launched by
    default (``AdvisorTraits.prefix_cache``; warm: the prefix was seen before), else 0."""
    from crossover.engines import registry

    traits = registry.get(engine).advise
    return shared_prefix_tokens if traits is not None and traits.prefix_cache else 0


def check_shared_prefix(shared_prefix_tokens: int, input_tokens: int) -> None:
    """A shared prefix must leave each prompt a token of its own."""
    if not 0 <= shared_prefix_tokens < input_tokens:
        raise UsageError(
            f"--shared-prefix-tokens must be from 0 to below --input-tokens "
            f"({input_tokens}): got {shared_prefix_tokens}"
        )


def prefill_ms(
    model: ModelFacts,
    gpu: GpuSpec,
    layout: Layout,
    quant: str,
    curve: AllReduceCurve,
    prompt_tokens: int,
) -> float:
    """One request's prefill: compute-bound GEMMs (or the weight read, if larger) + comm."""
    flops = 2 * model.active_params * prompt_tokens / layout.tp  # PP stages run in sequence
    comp = flops / (tflops(gpu, quant) * 1e12 * COMPUTE_EFFICIENCY) * 1e3
    mem = (
        weight_bytes(model, quant)
        / layout.tp
        / (gpu.memory_bandwidth_gbs * 1e9 * BANDWIDTH_EFFICIENCY)
        * 1e3
    )
    return max(comp, mem) + comm_ms(model, layout, curve, prompt_tokens)


def predict(
    model: ModelFacts,
    system: System,
    layout: Layout,
    quant: str,
    curve: AllReduceCurve,
    *,
    concurrency: int,
    input_tokens: int,
    output_tokens: int,
    max_batch: int | None = None,
    cached_tokens: int = 0,
) -> Prediction:
    """Steady state of a closed loop at ``concurrency``: each request costs one prefill
    and ``output_tokens`` decode steps; the cycle time gives per-user and total rates.
    ``cached_tokens``: each prompt's start served from the engine's prefix cache (not
    prefilled; attention still reads it)."""
    gpu = system.gpu
    batch = max(1, min(concurrency, max_batch if max_batch is not None else concurrency))
    ctx = input_tokens + output_tokens / 2
    # pipeline: split the batch into pp micro-batches when there are enough requests
    micro = batch / layout.pp if batch >= layout.pp else float(batch)
    mem_ms, comp_ms = _stage_decode_ms(model, gpu, layout, quant, max(1, round(micro)), ctx)
    floor_ms = DECODE_FLOOR_US_PER_LAYER * model.layers / layout.pp / 1e3
    stage = max(mem_ms, comp_ms, floor_ms)
    decode_ms = stage * layout.pp
    comm = comm_ms(model, layout, curve, max(1, round(micro)))
    step = decode_ms + comm
    pre = prefill_ms(
        model, gpu, layout, quant, curve, prefilled_tokens(input_tokens, cached_tokens)
    )
    cycle_ms = output_tokens * step + batch * pre
    per_user = output_tokens / cycle_ms * 1e3
    return Prediction(
        concurrency=concurrency,
        batch=batch,
        step_ms=step,
        decode_mem_ms=mem_ms * layout.pp,
        decode_compute_ms=comp_ms * layout.pp,
        comm_ms=comm,
        prefill_ms=pre,
        decode_tok_s_per_user=per_user,
        output_tok_s=per_user * batch,
        total_tok_s=per_user * batch * (input_tokens + output_tokens) / output_tokens,
        bound="latency"
        if floor_ms > max(mem_ms, comp_ms)
        else ("memory" if mem_ms >= comp_ms else "compute"),
    )


# --- CPU expert offload (llama.cpp --n-cpu-moe N, --cpu-moe, -ot exps=CPU) -------------
# The terms, the constants and the published figures they are checked against are in
# data/offload.yaml (its header says the model in words).

PREFILL_OFFLOAD_MIN_BATCH = 32  # ggml-cuda offload_op: a batch this large runs on the GPU
PREFILL_UBATCH = 512  # llama.cpp's default --ubatch-size


class OffloadConstants(BaseModel):
    cpu_bandwidth_fraction: float = Field(gt=0, le=1)
    handoff_us_per_layer: float = Field(ge=0)
    pcie_gbs: float = Field(gt=0)
    pcie_source: str
    fitted_to: list[str]
    how: str


class HostPlatform(BaseModel):
    bandwidth_gbs: float = Field(gt=0)
    what: str
    source: str


class OffloadShape(BaseModel):
    """What the offload model needs of a model in a given file: bytes, not parameters."""

    layers: int
    moe_layers: int
    experts: int
    experts_per_token: int
    hidden: int
    expert_bytes: float  # all routed experts
    dense_gpu_bytes: float  # every other weight the GPU reads per step (not token_embd)


class OffloadStep(BaseModel):
    """One decode step of ``batch`` tokens with ``n_cpu_moe`` layers' experts on the CPU."""

    n_cpu_moe: int
    batch: int
    gpu_ms: float
    cpu_ms: float
    pcie_ms: float
    handoff_ms: float
    step_ms: float
    cpu_gb_per_step: float  # expert bytes the CPU reads per step
    host_bandwidth_gbs: float

    @property
    def tok_s_per_user(self) -> float:
        return 1e3 / self.step_ms


@cache
def _offload_data() -> dict[str, Any]:
    text = resources.files("crossover.advise").joinpath("data/offload.yaml").read_text("utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def offload_constants() -> OffloadConstants:
    return OffloadConstants.model_validate(_offload_data()["constants"])


def host_platforms() -> dict[str, HostPlatform]:
    return {k: HostPlatform.model_validate(v) for k, v in _offload_data()["host_platforms"].items()}


def host_bandwidth(value: str | float | None) -> tuple[float, str]:
    """(GB/s, how it was chosen) for ``--host-mem-bandwidth``: a figure in GB/s, a
    platform name of data/offload.yaml, or None (the default platform)."""
    platforms = host_platforms()
    if value is None:
        name = str(_offload_data()["default_host"])
        p = platforms[name]
        return p.bandwidth_gbs, f"host memory assumed {p.what}, {p.bandwidth_gbs:g} GB/s"
    if isinstance(value, (int, float)):
        gbs = float(value)
    elif value.strip().lower() in platforms:
        p = platforms[value.strip().lower()]
        return p.bandwidth_gbs, f"host memory {p.what}, {p.bandwidth_gbs:g} GB/s"
    else:
        try:
            gbs = float(value.strip().lower().removesuffix("gb/s").strip())
        except ValueError:
            raise UsageError(
                f"--host-mem-bandwidth {value!r}: want GB/s (e.g. 76.8) or one of "
                f"{', '.join(platforms)}"
            ) from None
    if not 1 <= gbs <= 2000:
        raise UsageError(f"--host-mem-bandwidth {gbs:g} GB/s: want 1 to 2000 GB/s")
    return gbs, f"host memory {gbs:g} GB/s (given)"


def offload_shape(model: ModelFacts, quant: str) -> OffloadShape | None:
    """The byte counts of a model in ``quant`` (None for a dense model)."""
    if not model.is_moe or not model.experts or not model.experts_per_token:
        return None
    total = weight_bytes(model, quant)
    experts = expert_weight_bytes(model, quant)
    token_embd = total * model.vocab * model.hidden / model.params
    return OffloadShape(
        layers=model.layers,
        moe_layers=model.moe_layers or model.layers,
        experts=model.experts,
        experts_per_token=model.experts_per_token,
        hidden=model.hidden,
        expert_bytes=experts,
        dense_gpu_bytes=max(0.0, total - experts - token_embd),
    )


def offload_step(
    shape: OffloadShape,
    n_cpu_moe: int,
    *,
    gpu_bandwidth_gbs: float,
    host_bandwidth_gbs: float,
    gpu_efficiency: float,
    step_us_per_layer: float,
    seq_us_per_moe_layer: float,
    batch: int = 1,
    pcie_gbs: float | None = None,
    constants: OffloadConstants | None = None,
) -> OffloadStep:
    """The decode step with the experts of ``n_cpu_moe`` MoE layers in host memory (the
    terms in data/offload.yaml's header). Uniform routing: a batch touches
    ``touched_experts`` of each layer's experts, on whichever side the layer lives."""
    k = constants or offload_constants()
    n = max(0, min(n_cpu_moe, shape.moe_layers))
    per_layer = shape.expert_bytes / shape.moe_layers
    touched = per_layer * touched_experts(shape.experts, shape.experts_per_token, batch)
    touched /= shape.experts
    gpu_bytes = shape.dense_gpu_bytes + (shape.moe_layers - n) * touched
    gpu_ms = (
        gpu_bytes / (gpu_bandwidth_gbs * 1e9 * gpu_efficiency) * 1e3
        + (shape.layers * step_us_per_layer + batch * shape.moe_layers * seq_us_per_moe_layer) / 1e3
    )
    cpu_bytes = n * touched
    cpu_ms = cpu_bytes / (host_bandwidth_gbs * 1e9 * k.cpu_bandwidth_fraction) * 1e3
    pcie_ms = 2 * n * batch * shape.hidden * 4 / ((pcie_gbs or k.pcie_gbs) * 1e9) * 1e3
    handoff_ms = n * k.handoff_us_per_layer / 1e3
    return OffloadStep(
        n_cpu_moe=n,
        batch=batch,
        gpu_ms=gpu_ms,
        cpu_ms=cpu_ms,
        pcie_ms=pcie_ms,
        handoff_ms=handoff_ms,
        step_ms=gpu_ms + cpu_ms + pcie_ms + handoff_ms,
        cpu_gb_per_step=cpu_bytes / 1e9,
        host_bandwidth_gbs=host_bandwidth_gbs,
    )


def offload_prefill_stream_ms(
    shape: OffloadShape, n_cpu_moe: int, prompt_tokens: int, pcie_gbs: float | None = None
) -> float:
    """Prefill's extra time: a batch of >= 32 tokens runs the offloaded layers' expert
    matmuls on the GPU, copying those experts over PCIe once per micro-batch."""
    if prompt_tokens < PREFILL_OFFLOAD_MIN_BATCH or n_cpu_moe <= 0:
        return 0.0
    ubatches = math.ceil(prompt_tokens / PREFILL_UBATCH)
    moved = min(n_cpu_moe, shape.moe_layers) * shape.expert_bytes / shape.moe_layers
    return ubatches * moved / ((pcie_gbs or offload_constants().pcie_gbs) * 1e9) * 1e3
