"""Engine efficiency profiles fitted to measurements, and the calibrated prediction.

``cost.predict`` is a roofline: an upper bound, 2-24x above what the engines measured in
batched decode. A profile turns it into an estimate with per-engine terms fitted to
measured sweeps (``python -m crossover.advise.calibrate``) and kept as data
(``data/calibration.yaml``, naming the sweeps it came from):

* decode step = max(bytes / (bandwidth x ``bandwidth_efficiency``),
  FLOPs / (bf16 peak x ``decode_compute_efficiency``)) + layers x ``step_us_per_layer``
  + batch x ``seq_us`` (on an MoE with ``moe_seq_us_per_layer`` fitted: the dense layers'
  share of ``seq_us`` plus MoE layers x ``moe_seq_us_per_layer``; and MoE layers x
  ``moe_step_us_per_layer``, the router, top-k and expert kernels' cost per step whatever
  the batch, where fitted) + all-reduces (each
  at least ``allreduce_floor_us``: ~43 us when an engine calls them eagerly from Python,
  commbench's eager floor; the curve otherwise);
* one wave of prefills (a closed loop starts its requests together) = batch x prompt
  FLOPs / (peak x ``prefill_compute_efficiency``) + ``prefill_overhead_ms``;
* closed loop: cycle = wave + output tokens x step; decode per user = 1 / step, the
  figure a sweep measures as 1000 / TPOT p50.

Decode compute is charged at the bf16 peak whatever the weight format: on the H200, FP8
weights bought 1.2x at 256-512 concurrent requests, not the 2x of the FP8 peak (the
batched step is not all FP8 GEMMs); prefill uses the format's peak. Efficiencies are
fractions of the datasheet figures in ``gpus.yaml``; overheads are times. On a GPU other
than the one measured both are carried over unmeasured.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from crossover.advise import cost
from crossover.advise.cost import AllReduceCurve, Layout, Prediction
from crossover.advise.hardware import System
from crossover.advise.model import ModelFacts
from crossover.errors import UsageError, validation_line
from crossover.files import load_yaml, read_yaml

CALIBRATION_SCHEMA = "crossover.calibration/1"
# The terms a fit may move (bandwidth efficiency comes from the sweep's measured copy rate).
FIT_TERMS: tuple[str, ...] = (
    "decode_compute_efficiency",
    "step_us_per_layer",
    "seq_us",
    "prefill_compute_efficiency",
    "prefill_overhead_ms",
)


class EngineProfile(BaseModel):
    """One engine in one mode (CUDA graphs on, or off), as measured."""

    name: str
    engine: str
    cuda_graphs: bool = True
    bandwidth_efficiency: float = Field(gt=0, le=1.5)
    decode_compute_efficiency: float = Field(gt=0, le=1.5)
    step_us_per_layer: float = Field(ge=0)
    seq_us: float = Field(ge=0)
    prefill_compute_efficiency: float = Field(gt=0, le=1.5)
    prefill_overhead_ms: float = Field(ge=0)
    allreduce_floor_us: float = Field(default=0.0, ge=0)
    # per sequence per decode step per MoE layer, fitted to an MoE sweep with the other
    # terms held (calibrate --moe-sweep); None: MoE layers cost seq_us's per-layer share
    moe_seq_us_per_layer: float | None = Field(default=None, ge=0)
    # per decode step per MoE layer, whatever the batch (the router, top-k and expert
    # kernels' launches), fitted beside it where the MoE sweep measures few users
    moe_step_us_per_layer: float | None = Field(default=None, ge=0)
    moe_targets: list[str] = Field(default_factory=list)  # "SWEEP:TARGET" it was fitted to
    fitted: list[str] = Field(default_factory=list)
    inherited_from: str | None = None  # terms not fitted here come from this profile
    targets: list[str] = Field(default_factory=list)  # "SWEEP:TARGET" it was fitted to
    points: int = 0  # measured (target, concurrency) pairs it was fitted to
    note: str | None = None


class ErrorSummary(BaseModel):
    n: int
    mean_abs_error_pct: float | None
    per_engine: dict[str, float] = Field(default_factory=dict)
    per_regime: dict[str, float] = Field(default_factory=dict)


class Worst(BaseModel):
    profile: str
    regime: str
    mean_abs_error_pct: float
    n: int


class Source(BaseModel):
    path: str
    gpu: str
    targets: list[str]
    excluded: list[str] = Field(default_factory=list)  # measured, left out of the fit
    input_tokens: int
    output_tokens: int


BasisKind = Literal["measured", "calibrated", "borrowed", "roofline"]
# figures backed by this engine's own measurements: ranked before borrowed ones
MEASURED_BASES: frozenset[str] = frozenset({"measured", "calibrated"})


class Basis(BaseModel):
    """What an advice row's figure rests on, and the words that say so.

    ``measured``: the run itself (``--results``); ``calibrated``: the engine's own profile,
    fitted to its measured sweeps; ``borrowed``: another engine's profile (this one was
    never measured); ``roofline``: no profile, the upper bound."""

    kind: BasisKind
    profile: str | None = None  # the profile used (another engine's when borrowed)
    sweeps: list[str] = Field(default_factory=list)  # folder names of the profile's sweeps
    gpu: str | None = None
    label: str

    @property
    def measured(self) -> bool:
        return self.kind in MEASURED_BASES


def _sweep_name(target: str) -> str:
    """``docs/results/h200/sglang-a/sweep.json:sglang`` -> ``sglang-a``."""
    path = Path(target.rpartition(":")[0] or target)
    return path.parent.name if path.suffix == ".json" else path.name


class Calibration(BaseModel):
    """``data/calibration.yaml``: the fitted profiles and the error they leave."""

    schema_: Literal["crossover.calibration/1"] = Field(alias="schema")
    gpu: str
    model: str
    command: str
    sources: list[Source]
    moe_sources: list[Source] = Field(default_factory=list)  # the MoE terms' sweeps
    profiles: dict[str, EngineProfile]
    # engines never measured use another's profile (named here, said in the advice)
    borrow: dict[str, str] = Field(default_factory=dict)
    errors: dict[str, ErrorSummary] = Field(default_factory=dict)
    worst: Worst | None = None

    model_config = {"populate_by_name": True}

    def profile(self, engine: str, cuda_graphs: bool = True) -> EngineProfile | None:
        """The profile for an engine and mode, borrowing where the engine was not measured."""
        name = engine if cuda_graphs else f"{engine}-nographs"
        if name in self.profiles:
            return self.profiles[name]
        lent = self.borrow.get(name)
        return self.profiles.get(lent) if lent else None

    def borrowed(self, engine: str, cuda_graphs: bool = True) -> str | None:
        name = engine if cuda_graphs else f"{engine}-nographs"
        return None if name in self.profiles else self.borrow.get(name)

    def source_paths(self) -> list[str]:
        return [s.path for s in self.sources]

    def basis(self, engine: str, cuda_graphs: bool = True) -> Basis:
        """Whether an engine's estimate is its own measurements' or borrowed, in words:
        "measured: sglang-a, H200", "borrowed: vllm profile, trtllm never measured"."""
        name = profile_name(engine, cuda_graphs)
        profile = self.profile(engine, cuda_graphs)
        if profile is None:
            return Basis(kind="roofline", label=f"roofline: no profile for {name}")
        fitted = {_sweep_name(t) for t in profile.targets}
        order = [_sweep_name(src.path) for src in self.sources]  # the command's order
        sweeps = [n for n in dict.fromkeys(order) if n in fitted]
        sweeps += sorted(fitted - set(sweeps))
        where = ", ".join([*sweeps, self.gpu])
        if self.borrowed(engine, cuda_graphs) is not None:
            return Basis(
                kind="borrowed",
                profile=profile.name,
                sweeps=sweeps,
                gpu=self.gpu,
                label=f"borrowed: {profile.name} profile, {name} never measured",
            )
        return Basis(
            kind="calibrated",
            profile=profile.name,
            sweeps=sweeps,
            gpu=self.gpu,
            label=f"measured: {where}",
        )


def profile_name(engine: str, cuda_graphs: bool | None) -> str:
    return engine if cuda_graphs is not False else f"{engine}-nographs"


@cache
def _packaged() -> str:
    path = resources.files("crossover.advise").joinpath("data/calibration.yaml")
    return path.read_text("utf-8")


def _validated(raw: Any, where: str) -> Calibration:
    try:
        return Calibration.model_validate(raw)
    except ValidationError as exc:
        first = validation_line(exc, limit=1)
        raise UsageError(f"{where}: not a {CALIBRATION_SCHEMA} file ({first})") from None


def load_calibration(path: Path | None = None) -> Calibration:
    """The packaged constants, or a file written by ``python -m crossover.advise.calibrate``."""
    if path is None:
        return _validated(load_yaml(_packaged()), "data/calibration.yaml")
    return _validated(read_yaml(path), str(path))


class Terms(BaseModel):
    """A prediction's ingredients that do not depend on the profile's fitted terms."""

    batch: int
    layers: int
    moe_layers: int = 0  # layers with routed experts (0: dense)
    pp: int
    output_tokens: int
    mem_ms: float  # one stage's decode read at 100% of the datasheet bandwidth
    comp_ms: float  # one stage's decode FLOPs at 100% of the dense bf16 peak
    comm_ms: float
    prefill_comp_ms: float  # the wave's prompt FLOPs at 100% of the peak
    prefill_mem_ms: float  # the weights read once at 100% of the bandwidth
    prefill_comm_ms: float
    one_prefill_comp_ms: float
    one_prefill_comm_ms: float


def _comm(
    model: ModelFacts, layout: Layout, curve: AllReduceCurve, tokens: int, floor_us: float
) -> float:
    if floor_us <= 0:
        return cost.comm_ms(model, layout, curve, tokens)

    class _Floored:
        name = curve.name

        def latency_us(self, size_bytes: float, n: int) -> float:
            t = curve.latency_us(size_bytes, n)
            return max(t, floor_us) if n > 1 else t

    return cost.comm_ms(model, layout, _Floored(), tokens)


def terms(
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
    allreduce_floor_us: float = 0.0,
    cached_tokens: int = 0,
) -> Terms:
    """``cached_tokens``: the start of each prompt an engine serves from its prefix cache
    (a shared system prompt): not prefilled, but read by attention like the rest."""
    gpu = system.gpu
    new_tokens = cost.prefilled_tokens(input_tokens, cached_tokens)
    batch = max(1, min(concurrency, max_batch if max_batch is not None else concurrency))
    micro = max(1, round(batch / layout.pp)) if batch >= layout.pp else batch
    ctx = input_tokens + output_tokens / 2
    bw = gpu.memory_bandwidth_gbs * 1e9
    peak = cost.tflops(gpu, quant) * 1e12  # prefill: the weight format's peak
    read = cost.touched_weight_bytes(model, quant, micro) / layout.gpus
    read += micro * ctx * cost.kv_bytes_per_token_per_gpu(model, layout)
    stage_flops = 2 * model.active_params * micro / layout.gpus
    prompt_flops = 2 * model.active_params * new_tokens / layout.tp
    return Terms(
        batch=batch,
        layers=model.layers,
        moe_layers=(model.moe_layers or 0) if model.is_moe else 0,
        pp=layout.pp,
        output_tokens=output_tokens,
        mem_ms=read / bw * 1e3,
        comp_ms=stage_flops / (gpu.bf16_tflops * 1e12) * 1e3,
        comm_ms=_comm(model, layout, curve, micro, allreduce_floor_us),
        prefill_comp_ms=prompt_flops * batch / peak * 1e3,
        prefill_mem_ms=cost.weight_bytes(model, quant) / layout.tp / bw * 1e3,
        prefill_comm_ms=batch * _comm(model, layout, curve, new_tokens, allreduce_floor_us),
        one_prefill_comp_ms=prompt_flops / peak * 1e3,
        one_prefill_comm_ms=_comm(model, layout, curve, new_tokens, allreduce_floor_us),
    )


class Step(BaseModel):
    step_ms: float
    mem_ms: float
    comp_ms: float
    overhead_ms: float
    wave_ms: float
    one_prefill_ms: float
    output_tok_s: float
    decode_tok_s_per_user: float


def closed_loop(t: Any, p: Any) -> tuple[Any, Any, Any, Any, Any, Any]:
    """The calibrated closed loop (the formula in the module doc).

    ``t`` holds the terms (``Terms``, or numpy arrays of them when fitting) and ``p`` the
    profile's values (an ``EngineProfile``, or an object of floats with the same names).
    Returns (step ms, memory ms, compute ms, overhead ms, wave ms, output tok/s)."""
    import numpy as np

    mem = t.mem_ms / p.bandwidth_efficiency
    comp = t.comp_ms / p.decode_compute_efficiency
    seq = p.seq_us
    moe_us = getattr(p, "moe_seq_us_per_layer", None)
    if moe_us is not None:  # MoE layers at their own fitted rate, dense ones at seq_us's
        seq = p.seq_us * (t.layers - t.moe_layers) / t.layers + t.moe_layers * moe_us
    moe_step = getattr(p, "moe_step_us_per_layer", None) or 0.0
    overhead = (t.layers * p.step_us_per_layer + t.moe_layers * moe_step + t.batch * seq) / 1e3
    step = np.maximum(mem, comp) * t.pp + overhead + t.comm_ms
    pmem = t.prefill_mem_ms / p.bandwidth_efficiency
    wave = np.maximum(t.prefill_comp_ms / p.prefill_compute_efficiency, pmem)
    wave = wave + p.prefill_overhead_ms + t.prefill_comm_ms
    cycle = t.output_tokens * step + wave
    return step, mem * t.pp, comp * t.pp, overhead, wave, t.batch * t.output_tokens / cycle * 1e3


def evaluate(t: Terms, p: EngineProfile) -> Step:
    step, mem, comp, overhead, wave, out = closed_loop(t, p)
    pmem = t.prefill_mem_ms / p.bandwidth_efficiency
    one = max(t.one_prefill_comp_ms / p.prefill_compute_efficiency, pmem)
    one += p.prefill_overhead_ms + t.one_prefill_comm_ms
    return Step(
        step_ms=float(step),
        mem_ms=float(mem),
        comp_ms=float(comp),
        overhead_ms=float(overhead),
        wave_ms=float(wave),
        one_prefill_ms=one,
        output_tok_s=float(out),
        decode_tok_s_per_user=1e3 / float(step),
    )


def predict(
    model: ModelFacts,
    system: System,
    layout: Layout,
    quant: str,
    curve: AllReduceCurve,
    profile: EngineProfile,
    *,
    concurrency: int,
    input_tokens: int,
    output_tokens: int,
    max_batch: int | None = None,
    cached_tokens: int = 0,
) -> Prediction:
    """``cost.predict``'s answer with the profile's measured efficiencies
    (``cached_tokens``: each prompt's start served from the engine's prefix cache)."""
    t = terms(
        model,
        system,
        layout,
        quant,
        curve,
        concurrency=concurrency,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        max_batch=max_batch,
        allreduce_floor_us=profile.allreduce_floor_us,
        cached_tokens=cached_tokens,
    )
    s = evaluate(t, profile)
    bound = "memory" if s.mem_ms >= s.comp_ms else "compute"
    if s.overhead_ms > max(s.mem_ms, s.comp_ms):
        bound = "overhead"
    return Prediction(
        concurrency=concurrency,
        batch=t.batch,
        step_ms=s.step_ms,
        decode_mem_ms=s.mem_ms,
        decode_compute_ms=s.comp_ms,
        comm_ms=t.comm_ms,
        prefill_ms=s.one_prefill_ms,
        decode_tok_s_per_user=s.decode_tok_s_per_user,
        output_tok_s=s.output_tok_s,
        total_tok_s=s.output_tok_s * (input_tokens + output_tokens) / output_tokens,
        bound=bound,
        overhead_ms=s.overhead_ms,
        profile=profile.name,
    )
