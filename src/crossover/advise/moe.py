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
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from crossover.advise import cost, traits
from crossover.advise.cost import MemoryFit, Prediction
from crossover.advise.model import ModelFacts
from crossover.advise.rules import UntunedClass, moe_config_table, moe_untuned_classes
from crossover.engines import registry

if TYPE_CHECKING:
    from crossover.advise.candidates import AdviceRequest, Candidate, Evaluated

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
            reason=f"{engine} ships no {name}: default Triton tile sizes{cost_words}, "
            "the estimates slowed by the range's middle (tune with "
            f"benchmarks/kernels/benchmark_moe.py --tune){extra}",
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


# --- CPU expert offload: the speed model checked against published figures -------------


class PublishedOffload(BaseModel):
    """One published llama.cpp decode figure with experts in host memory
    (``published`` in data/offload.yaml)."""

    id: str
    source: str
    gpu: str
    gpu_bandwidth_gbs: float
    host_bandwidth_gbs: float | None = None  # None: not stated, the default platform
    pcie_gbs: float | None = None
    model: str
    file_gb: float
    quant: str
    n_cpu_moe: int
    batch: int = 1  # decode tokens per step (concurrent sequences)
    tok_s: float  # per sequence


class OffloadCheck(BaseModel):
    id: str
    measured_tok_s: float
    predicted_tok_s: float
    error_pct: float
    fitted: bool  # one of the figures the constants were solved from
    host: str
    step: cost.OffloadStep


def _offload_yaml() -> dict[str, Any]:
    return cost._offload_data()


def published_offload() -> list[PublishedOffload]:
    return [PublishedOffload.model_validate(p) for p in _offload_yaml()["published"]]


def published_shape(p: PublishedOffload) -> cost.OffloadShape:
    """Byte counts of a published GGUF from its size and its model's config numbers
    (experts' share of the file = their share of the parameters)."""
    m = _offload_yaml()["models"][p.model]
    params = float(m["params"])
    expert_params = m["moe_layers"] * m["experts"] * 3 * m["hidden"] * m["moe_ffn"]
    total = p.file_gb * 1e9
    experts = total * expert_params / params
    token_embd = total * m["vocab"] * m["hidden"] / params
    return cost.OffloadShape(
        layers=m["layers"],
        moe_layers=m["moe_layers"],
        experts=m["experts"],
        experts_per_token=m["experts_per_token"],
        hidden=m["hidden"],
        expert_bytes=experts,
        dense_gpu_bytes=total - experts - token_embd,
    )


def offload_gpu_terms() -> tuple[float, float, float]:
    """(bandwidth efficiency, step us per layer, us per sequence per MoE layer) of the
    profile of the engine that offloads experts (llama.cpp's): the GPU side of an
    offloaded model as that engine runs it."""
    from crossover.advise.efficiency import load_calibration

    p = load_calibration().profile(traits.cpu_offload_engine())
    if p is None:  # pragma: no cover - the packaged calibration has it
        return cost.BANDWIDTH_EFFICIENCY, 0.0, 0.0
    moe_us = p.moe_seq_us_per_layer
    return p.bandwidth_efficiency, p.step_us_per_layer, moe_us if moe_us is not None else 0.0


def published_step(
    p: PublishedOffload, constants: cost.OffloadConstants | None = None
) -> tuple[cost.OffloadStep, str]:
    eff, step_us, seq_us = offload_gpu_terms()
    host, how = cost.host_bandwidth(p.host_bandwidth_gbs)
    step = cost.offload_step(
        published_shape(p),
        p.n_cpu_moe,
        gpu_bandwidth_gbs=p.gpu_bandwidth_gbs,
        host_bandwidth_gbs=host,
        gpu_efficiency=eff,
        step_us_per_layer=step_us,
        seq_us_per_moe_layer=seq_us,
        pcie_gbs=p.pcie_gbs,
        batch=p.batch,
        constants=constants,
    )
    return step, how


def offload_checks(constants: cost.OffloadConstants | None = None) -> list[OffloadCheck]:
    """Every published figure beside the model's prediction for it."""
    k = constants or cost.offload_constants()
    out = []
    for p in published_offload():
        step, how = published_step(p, k)
        out.append(
            OffloadCheck(
                id=p.id,
                measured_tok_s=p.tok_s,
                predicted_tok_s=step.tok_s_per_user,
                error_pct=(step.tok_s_per_user / p.tok_s - 1) * 100,
                fitted=p.id in k.fitted_to,
                host=how,
                step=step,
            )
        )
    return out


def fit_offload_constants(ids: Sequence[str]) -> tuple[float, float]:
    """(cpu_bandwidth_fraction, handoff_us_per_layer) solved by least squares from the
    named published figures: measured step - GPU - PCIe = CPU bytes / (host bandwidth x
    fraction) + N x handoff, linear in 1 / fraction and handoff."""
    import numpy as np

    base = cost.offload_constants().model_copy(
        update={"cpu_bandwidth_fraction": 1.0, "handoff_us_per_layer": 0.0}
    )
    rows, rhs = [], []
    by_id = {p.id: p for p in published_offload()}
    for i in ids:
        step, _ = published_step(by_id[i], base)
        rows.append([step.cpu_ms, step.n_cpu_moe / 1e3])
        rhs.append(1e3 / by_id[i].tok_s - step.gpu_ms - step.pcie_ms)
    (inv_frac, handoff), *_ = np.linalg.lstsq(np.array(rows), np.array(rhs), rcond=None)
    return 1.0 / float(inv_frac), float(handoff)


# --- the advisor's offload variant -----------------------------------------------------


def offload_variant(
    req: AdviceRequest, cand: Candidate, fit: MemoryFit, off: CpuOffload
) -> Evaluated:
    """A llama.cpp candidate too big for its GPUs, as it runs with ``--n-cpu-moe N``: the
    moved experts leave GPU memory for the KV cache; its figures come from
    ``offload_prediction`` (host-memory bandwidth, not a measurement)."""
    from crossover.advise.candidates import Evaluated

    weights = fit.weights_gib_per_gpu - off.cpu_gib
    free = fit.usable_gib_per_gpu - weights
    kv_seq = fit.kv_gib_per_seq_per_gpu
    max_c = int(free // kv_seq) if free > 0 and kv_seq > 0 else 0
    moved = fit.model_copy(
        update={
            "weights_gib_per_gpu": weights,
            "headroom_gib": free - fit.kv_gib_per_gpu,
            "fits": weights + fit.kv_gib_per_gpu <= fit.usable_gib_per_gpu,
            "weights_fit": weights < fit.usable_gib_per_gpu,
            "max_concurrency": max_c,
        }
    )
    _, how = cost.host_bandwidth(req.host_mem_bandwidth)
    rule = traits.of(cand.engine).cpu_moe_offload_rule
    offload_rule = [rule] if rule is not None else []
    return Evaluated(
        candidate=cand.model_copy(update={"n_cpu_moe": off.n_cpu_moe, "host_memory": how}),
        fit=moved,
        rules=["seed-2-kernel-check", "memory-fit", *offload_rule],
        notes=[
            f"{off.flag}: the experts of {off.n_cpu_moe} of {req.model.moe_layers} layers "
            f"({off.cpu_gib:.1f} GiB) in host memory, read by the CPU each token; estimate "
            f"from host-memory bandwidth ({how}; --host-mem-bandwidth), not measured"
        ],
    )


def offload_prediction(
    req: AdviceRequest, c: Candidate, conc: int, max_batch: int | None
) -> Prediction:
    """The closed loop of a llama.cpp candidate with ``c.n_cpu_moe`` layers' experts in
    host memory: decode steps from ``cost.offload_step``, one prefill wave whose offloaded
    experts stream over PCIe (``cost.offload_prefill_stream_ms``)."""
    model, gpu = req.model, req.system.gpu
    shape = cost.offload_shape(model, c.quant)
    if shape is None or not c.n_cpu_moe:
        raise ValueError("offload_prediction needs an MoE candidate with n_cpu_moe")
    eff, step_us, seq_us = offload_gpu_terms()
    host, _ = cost.host_bandwidth(req.host_mem_bandwidth)
    batch = max(1, min(conc, max_batch if max_batch is not None else conc))
    step = cost.offload_step(
        shape,
        c.n_cpu_moe,
        gpu_bandwidth_gbs=gpu.memory_bandwidth_gbs,
        host_bandwidth_gbs=host,
        gpu_efficiency=eff,
        step_us_per_layer=step_us,
        seq_us_per_moe_layer=seq_us,
        batch=batch,
    )
    layout = cost.Layout(tp=c.tp, pp=c.pp)
    tokens = cost.prefilled_tokens(req.input_tokens, req.cached_tokens(c.engine))
    one = cost.prefill_ms(model, gpu, layout, c.quant, cost.NoComm(), tokens)
    one += cost.offload_prefill_stream_ms(shape, c.n_cpu_moe, tokens)
    wave = cost.prefill_ms(model, gpu, layout, c.quant, cost.NoComm(), tokens * batch)
    wave += cost.offload_prefill_stream_ms(shape, c.n_cpu_moe, tokens * batch)
    cycle = req.output_tokens * step.step_ms + wave
    per_user = req.output_tokens / cycle * 1e3
    out = per_user * batch
    return Prediction(
        concurrency=conc,
        batch=batch,
        step_ms=step.step_ms,
        decode_mem_ms=step.gpu_ms + step.cpu_ms,
        decode_compute_ms=0.0,
        comm_ms=step.pcie_ms,
        prefill_ms=one,
        # the speed a stream decodes at (1000 / TPOT, as measured and as the calibrated
        # engines' rows give it), not the cycle with its prefill wave
        decode_tok_s_per_user=1e3 / step.step_ms,
        output_tok_s=out,
        total_tok_s=out * (req.input_tokens + req.output_tokens) / req.output_tokens,
        bound="host-memory" if step.cpu_ms >= step.gpu_ms else "memory",
        overhead_ms=step.handoff_ms,
        profile=f"llamacpp offload ({c.n_cpu_moe} layers' experts on the CPU)",
    )


def apply_untuned(
    pred: Prediction, req: AdviceRequest, c: Candidate
) -> tuple[Prediction, Slowdown | None]:
    """The prediction of an engine that ships no tuned fused-MoE config for this GPU and
    shape (looked up: ``absent``), its decode step slowed by the middle of the GPU class's
    range at this batch (``moe_untuned``); unchanged otherwise."""
    tuned = tuned_config(
        c.engine, req.system.gpu.id, req.model, c.quant, c.tp, batches=[pred.batch]
    )
    slow = tuned.at(pred.batch) if tuned is not None and tuned.status == "absent" else None
    if slow is None:
        return pred, None
    extra = req.output_tokens * pred.step_ms * (slow.factor - 1)
    cycle = req.output_tokens / pred.decode_tok_s_per_user * 1e3 + extra
    per_user = req.output_tokens / cycle * 1e3
    scale = per_user / pred.decode_tok_s_per_user
    return (
        pred.model_copy(
            update={
                "step_ms": pred.step_ms * slow.factor,
                "decode_tok_s_per_user": per_user,
                "output_tok_s": pred.output_tok_s * scale,
                "total_tok_s": pred.total_tok_s * scale,
            }
        ),
        slow,
    )
