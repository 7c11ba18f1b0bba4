"""Per-engine memory fit: weights + KV cache + the engine's measured overheads per GPU.

The overheads (CUDA context, activations or compute buffers, CUDA graphs) and each
engine's utilization rule are data (``data/memory.yaml``, with the log lines they come
from). ``--reserve-gib`` replaces an engine's overheads with the user's figure: a desktop
session on the same GPU, another process, or a measurement of their own.
"""

from __future__ import annotations

import math
from functools import cache
from importlib import resources
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field

from crossover.advise import cost
from crossover.advise.cost import Layout, MemoryFit
from crossover.advise.hardware import GpuSpec
from crossover.advise.model import ModelFacts
from crossover.errors import UsageError, parse_names

GIB = 1024**3
LLAMACPP_UBATCH = 512  # llama.cpp's default n_ubatch (common/common.h)


class Component(BaseModel):
    name: str
    gib: float | None = None
    formula: Literal["llamacpp-compute", "sglang-reserve"] | None = None
    per_tp: bool = False
    scales_with_hidden: bool = False
    #: the hidden size the figure was measured at (default: the file's reference_hidden)
    reference_hidden: int | None = None
    #: charged only to a dense model or only to a mixture of experts (None: to both)
    only: Literal["dense", "moe"] | None = None
    outside_budget: bool = False
    #: how this engine accounts its own budget, not an overhead another engine that
    #: borrows its figures has (``borrow_components``: left out there)
    own_accounting: bool = False
    measured: bool
    source: str


class EngineMemory(BaseModel):
    utilization: float = Field(gt=0, le=1)
    utilization_of: Literal["total", "free"]
    source: str
    components: list[Component] = Field(default_factory=list)


class Charge(BaseModel):
    """One overhead as charged to a candidate, in GiB per GPU."""

    name: str
    gib: float
    measured: bool
    source: str


@cache
def _data() -> dict[str, Any]:
    text = resources.files("crossover.advise").joinpath("data/memory.yaml").read_text("utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    return data


@cache
def engine_memory(engine: str) -> EngineMemory:
    """The engine's rule, resolving ``borrow`` (all of it) and ``borrow_components``."""
    entries: dict[str, Any] = _data()["engines"]
    raw = entries.get(engine)
    if raw is None:
        raise UsageError(f"no memory figures for engine {engine!r} in memory.yaml")
    if "borrow" in raw:
        lent = engine_memory(str(raw["borrow"]))
        return lent.model_copy(update={"source": f"{raw['source']}; {lent.source}"})
    if "borrow_components" in raw:
        lent = engine_memory(str(raw["borrow_components"]))
        fields = {k: v for k, v in raw.items() if k != "borrow_components"}
        fields["components"] = [
            c.model_copy(update={"measured": False, "outside_budget": False})
            for c in lent.components
            if not c.own_accounting
        ]
        return EngineMemory.model_validate(fields)
    return EngineMemory.model_validate(raw)


def _component_gib(
    c: Component, model: ModelFacts, layout: Layout, slots: int, gpu_gib: float
) -> float:
    if c.formula == "sglang-reserve":
        return sglang_reserve_gib(gpu_gib, layout)
    if c.formula == "llamacpp-compute":
        ffn = model.ffn
        if model.is_moe and model.moe_ffn and model.experts_per_token:
            ffn = max(
                ffn if model.moe_layers < model.layers else 0,
                model.moe_ffn * model.experts_per_token,
            )
        floats = LLAMACPP_UBATCH * (2 * ffn + 4 * model.hidden) + model.vocab * max(1, slots)
        return 4 * floats / GIB
    gib = float(c.gib or 0.0)
    if c.scales_with_hidden:
        ref = c.reference_hidden or _data().get("reference_hidden") or model.hidden
        gib *= model.hidden / float(ref)
    if c.per_tp:
        gib /= layout.tp
    return gib


def sglang_reserve_gib(gpu_gib: float, layout: Layout, cuda_graphs: bool = True) -> float:
    """What SGLang keeps out of its static pool (weights and KV) per GPU by default:
    ``--mem-fraction-static`` = (memory - reserve) / memory, the reserve in MiB 512 +
    1.5 x the chunked-prefill tokens + 128 x TP x PP + 2 x the largest decode CUDA-graph
    batch + 8 x the prefill graphs' sizes, at least 10 GiB on a GPU over 60 GiB; the
    chunk and batch by GPU memory (SGLang 0.5.17 ``ServerArgs._handle_gpu_memory_settings``,
    ``reserve_for_graph_mb``, ``_generate_prefill_cuda_graph_batch_sizes``). It gives the
    fractions SGLang chose on the project's GPUs: 0.83 on an H100 80GB (81,559 MiB), 0.903 on
    an H200 (143,771 MiB), 0.91 with CUDA graphs off."""
    mib = gpu_gib * 1024
    tp = layout.tp
    # (below MiB, chunked-prefill tokens, decode graph batch at TP < 4, at TP >= 4)
    classes = [
        (20 * 1024, 2048, 8, 8),
        (35 * 1024, 2048, 24, 80),
        (60 * 1024, 4096, 32, 160),
        (90 * 1024, 8192, 256, 512),
        (160 * 1024, 8192, 256, 512),
        (math.inf, 16384, 512, 512),
    ]
    chunk, small, large = next((c, a, b) for top, c, a, b in classes if mib < top)
    max_bs = small if tp < 4 else large
    reserve = 512 + 1.5 * max(chunk, 2048) + layout.tp * layout.pp / 8 * 1024
    if cuda_graphs:
        sizes = (
            list(range(4, 33, 4))
            + list(range(48, 257, 16))
            + list(range(288, 513, 32))
            + list(range(576, 1025, 64))
            + list(range(1280, 4097, 256))
            + list(range(4608, chunk + 1, 512))
        )
        reserve += 2 * max_bs + 8 * len([x for x in sizes if x <= chunk])
    if mib > 60 * 1024:
        reserve = max(reserve, 10 * 1024)
    return reserve / 1024


def kv_fraction(engine: str, gpu_gib: float, layout: Layout) -> float | None:
    """The share of the whole GPU an engine's default lets its weights and KV cache take
    (vLLM's ``--gpu-memory-utilization`` 0.9, SGLang's ``--mem-fraction-static`` as it
    chooses it, :func:`sglang_reserve_gib`); ``None`` for an engine whose budget is not a
    share of the whole GPU."""
    rule = engine_memory(engine)
    if rule.utilization_of != "total":
        return None
    if any(c.formula == "sglang-reserve" for c in rule.components):
        return 1.0 - sglang_reserve_gib(gpu_gib, layout) / gpu_gib
    return rule.utilization


def charges(
    engine: str, model: ModelFacts, layout: Layout, slots: int, gpu_gib: float = 0.0
) -> list[Charge]:
    """The engine's overheads for this model and layout, per GPU (``gpu_gib``: the GPU's
    memory, for an overhead that depends on it)."""
    return [
        Charge(
            name=c.name + (" (beyond the utilization budget)" if c.outside_budget else ""),
            gib=_component_gib(c, model, layout, slots, gpu_gib),
            measured=c.measured,
            source=c.source,
        )
        for c in components(engine, model)
    ]


def components(engine: str, model: ModelFacts) -> list[Component]:
    """The engine's overheads that apply to this model (a dense model's or an MoE's)."""
    kind = "moe" if model.is_moe else "dense"
    return [c for c in engine_memory(engine).components if c.only in (None, kind)]


def usable_gib(
    engine: str,
    model: ModelFacts,
    gpu: GpuSpec,
    layout: Layout,
    weights_gib: float,
    slots: int,
    reserve_gib: float | None = None,
) -> tuple[float, float, list[Charge]]:
    """(GiB per GPU the weights and KV may use, the reserve charged, its parts)."""
    rule = engine_memory(engine)
    total = gpu.budget_gib
    parts = charges(engine, model, layout, slots, total)
    if reserve_gib is not None:
        parts = [Charge(name="--reserve-gib", gib=reserve_gib, measured=False, source="user")]
        inside, outside = reserve_gib, 0.0
    else:
        comps = components(engine, model)
        inside = sum(p.gib for p, c in zip(parts, comps, strict=True) if not c.outside_budget)
        outside = sum(p.gib for p, c in zip(parts, comps, strict=True) if c.outside_budget)
    if rule.utilization_of == "total":
        spill = max(0.0, outside - (1 - rule.utilization) * total)
        return rule.utilization * total - inside - spill, inside + spill, parts
    free = total - weights_gib - inside - outside
    if free < 0:  # the weights alone do not fit: no fraction of nothing to take
        return total - inside - outside, inside + outside, parts
    return weights_gib + rule.utilization * free, inside + outside, parts


def fit(
    engine: str,
    model: ModelFacts,
    gpu: GpuSpec,
    layout: Layout,
    quant: str,
    concurrency: int,
    context_tokens: int,
    reserve_gib: float | None = None,
) -> MemoryFit:
    """``cost.memory_fit`` with the engine's own rule and measured overheads."""
    w = cost.weight_bytes(model, quant) / layout.gpus / GIB
    kv_seq = cost.kv_bytes_per_token_per_gpu(model, layout) * context_tokens / GIB
    usable, reserve, parts = usable_gib(engine, model, gpu, layout, w, concurrency, reserve_gib)
    free = usable - w
    kv = kv_seq * concurrency
    return MemoryFit(
        weights_gib_per_gpu=w,
        kv_gib_per_seq_per_gpu=kv_seq,
        kv_gib_per_gpu=kv,
        usable_gib_per_gpu=usable,
        headroom_gib=usable - w - kv,
        fits=w + kv <= usable,
        weights_fit=w < usable,
        max_concurrency=int(free // kv_seq) if free > 0 and kv_seq > 0 else 0,
        reserve_gib=reserve,
        reserve=[p.model_dump() for p in parts],
        utilization=engine_memory(engine).utilization,
        kv_bytes_per_token_per_gpu=cost.kv_bytes_per_token_per_gpu(model, layout),
    )


def parse_reserve(text: str | None) -> dict[str, float]:
    """``--reserve-gib``: ``1.5`` (every engine) or ``llamacpp=0.8,vllm=2``; key ``*``: all."""
    from crossover.advise import traits
    from crossover.advise.rules import ENGINES

    out: dict[str, float] = {}
    for item in parse_names(text, "--reserve-gib") if text is not None else []:
        engine, sep, value = item.rpartition("=")
        key = traits.canonical(engine) if sep else "*"
        try:
            gib = float(value)
        except ValueError:
            gib = -1.0
        # nan passed `gib < 0`: every memory fit then read "nan usable" and none fitted
        if not 0 <= gib < math.inf or (key != "*" and key not in ENGINES):
            raise UsageError(
                f"--reserve-gib wants GiB per GPU (e.g. 1.5) or ENGINE=GiB[,...] with ENGINE in "
                f"{', '.join(ENGINES)}; got {item!r}"
            )
        out[key] = gib
    return out
