"""Roofline check at concurrency 1 (docs/metrics.md, "Roofline check").

At concurrency 1 decoding one token reads every weight once plus the KV cache
of the context, so decode speed is bounded by::

    tokens/s <= bandwidth / (model_bytes + kv_bytes_per_token * context_tokens)

A measured decode speed far below that bound (under ``far_below``, 40% by
default, 20% for a mixture of experts: ``MOE_FAR_BELOW``) points to a configuration
fault rather than to the engine: the TensorRT-LLM run of
waynehacking8/trtllm-triton-serving with CUDA graphs silently off reached 19%
(docs/engines.md, advisor rules). Worked example, measured on the project's
H200 (docs/results/h200/llamacpp-transformers-2026-11-30.md): 16.07 GB of
weights at a 4.3 TB/s copy rate is a 3.74 ms bound; llama.cpp's 5.3 ms per token is
~70% of it.

A mixture of experts reads only the experts its batch is routed to. With ``experts`` (E),
``experts_per_token`` (k) and ``expert_bytes`` in the facts, a decode step of B tokens
reads the non-expert weights plus ``expert_bytes`` x touched / E, where the expected
number of distinct experts touched per layer under uniform routing is
E x (1 - (1 - k/E)^B): k at B=1, E as B grows (``touched_experts``). Real routing is
skewed and correlated, so fewer are touched at middle B: the bound is the most bytes.
``RooflineCheck.levels`` holds that per-step bound beside the measured TPOT at every
concurrency (B = concurrency, all streams resident).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from crossover.analysis.schema import RooflineFacts, SweepFile, SweepRun
from crossover.metrics.summary import Problem

FAR_BELOW = 0.40
#: A mixture of experts at batch 1 is not bandwidth-bound: each layer runs a chain of small
#: dependent kernels (router GEMM, top-k, token sort/align, two grouped GEMMs over k experts,
#: combine). Measured on one H200 (docs/results/h200/moe/, Qwen3-30B-A3B shape, tuned
#: fused-MoE configs found): vLLM, SGLang and llama.cpp all decoded at 4.2 ms/token at c=1,
#: 38% of the touched-experts bound (23% of llama.cpp's Q8_0 one). Under 40% is normal
#: there, so the fault threshold for MoE facts is lower.
MOE_FAR_BELOW = 0.20
MOE_BATCH1_NOTE = (
    "a mixture of experts at batch 1 runs a latency-bound kernel chain per layer: on an H200, "
    "vLLM, SGLang and llama.cpp all reached 23-38% of this bound on Qwen3-30B-A3B"
)
ABOVE_BOUND = 1.05


def bytes_per_token(
    model_bytes: float, kv_bytes_per_token: float | None = None, context_tokens: int | None = None
) -> float:
    """Bytes read from memory to decode one token at concurrency 1."""
    kv = (kv_bytes_per_token or 0.0) * (context_tokens or 0)
    return model_bytes + kv


def touched_experts(experts: int, experts_per_token: int, batch: int) -> float:
    """Expected distinct experts one MoE layer runs for ``batch`` tokens, uniform routing:
    E x (1 - (1 - k/E)^B); k at B=1, approaching E as B grows."""
    if experts <= 0 or experts_per_token <= 0 or batch <= 0:
        return 0.0
    k = min(experts_per_token, experts)
    return experts * (1.0 - (1.0 - k / experts) ** batch)


def weight_bytes_per_step(facts: RooflineFacts, batch: int = 1) -> float:
    """Weight bytes one decode step of ``batch`` tokens reads (all of them for a dense
    model; for a mixture of experts the dense part and the experts the batch touches)."""
    if facts.experts is None or facts.experts_per_token is None or facts.expert_bytes is None:
        return facts.model_bytes
    frac = touched_experts(facts.experts, facts.experts_per_token, batch) / facts.experts
    return facts.model_bytes - facts.expert_bytes + facts.expert_bytes * frac


def step_bound_ms(facts: RooflineFacts, batch: int = 1) -> float:
    """Shortest decode step for ``batch`` sequences: touched weights + their KV, read once."""
    kv = (facts.kv_bytes_per_token or 0.0) * (facts.context_tokens or 0) * max(batch, 1)
    return (weight_bytes_per_step(facts, batch) + kv) / (facts.bandwidth_gb_s * 1e9) * 1e3


def decode_bound_tokens_per_s(bandwidth_gb_s: float, bytes_read_per_token: float) -> float:
    """Upper bound on decode tokens/s for one sequence (bandwidth in 1e9 bytes/s)."""
    return bandwidth_gb_s * 1e9 / bytes_read_per_token


@dataclass(frozen=True)
class LevelBound:
    """One concurrency level: the step bound and the measured TPOT p50 (median of
    repeats); ``fraction`` = bound / measured (1.0 = at the roofline)."""

    concurrency: int
    bound_step_ms: float
    measured_tpot_ms: float | None
    fraction: float | None


@dataclass(frozen=True)
class RooflineCheck:
    """Measured concurrency-1 decode speed against the bandwidth bound.

    ``status``: ``ok``; ``far_below`` (fraction under the threshold, with
    ``causes``); ``above_bound`` (faster than physics allows: the facts are
    wrong, e.g. model bytes overstated, or speculative decoding is on);
    ``no_data`` (no valid run at concurrency 1 with a decode figure).
    """

    target: str
    bound_tokens_per_s: float
    bound_ms_per_token: float
    measured_tokens_per_s: float | None
    measured_from: str | None
    fraction: float | None
    status: Literal["ok", "far_below", "above_bound", "no_data"]
    causes: tuple[str, ...] = ()
    levels: tuple[LevelBound, ...] = ()
    moe: bool = False

    def describe(self) -> str:
        """One line for the terminal and the report."""
        head = f"{self.target}: roofline {self.bound_ms_per_token:.2f} ms/token"
        if self.measured_tokens_per_s is None or self.fraction is None:
            return f"{head}; no valid decode figure at concurrency 1"
        line = (
            f"{head}, measured {1000.0 / self.measured_tokens_per_s:.2f} ms/token "
            f"({self.measured_from}) = {self.fraction:.0%} of roofline"
        )
        if self.status == "far_below":
            line += "; far below, probable cause: " + "; ".join(self.causes)
        elif self.status == "ok" and self.moe and self.fraction < FAR_BELOW:
            line += f" ({MOE_BATCH1_NOTE})"
        elif self.status == "above_bound":
            line += "; above the bound: check model_bytes and bandwidth (speculative decoding?)"
            if not self.moe:
                line += (
                    "; a mixture of experts reads only its routed experts: give experts, "
                    "experts_per_token and expert_bytes"
                )
        return line

    def describe_levels(self) -> str:
        """The per-step bound and the measured TPOT at every measured concurrency."""
        parts = [
            f"c={lv.concurrency} {lv.bound_step_ms:.2f} ms bound"
            + (
                f" / {lv.measured_tpot_ms:.2f} ms measured ({lv.fraction:.0%})"
                if lv.measured_tpot_ms is not None and lv.fraction is not None
                else ""
            )
            for lv in self.levels
        ]
        return f"{self.target}: " + "; ".join(parts) if parts else f"{self.target}: no levels"


def measured_decode_tokens_per_s(runs: Sequence[SweepRun]) -> tuple[float | None, str | None]:
    """Decode tokens/s of one sequence from valid runs at concurrency 1: 1000/TPOT p50,
    else 1000/ITL p50, else output tokens/s (which includes prefill, so is low).
    Median over repeats."""
    valid = [r for r in runs if r.is_valid and r.concurrency == 1]
    for path, label in (("tpot_ms.p50", "1/TPOT p50"), ("itl_ms.p50", "1/ITL p50")):
        ms = [v for r in valid if (v := r.value(path)) is not None and v > 0]
        if ms:
            return 1000.0 / statistics.median(ms), label
    tps = [v for r in valid if (v := r.value("throughput.output_tokens_per_s")) is not None]
    if tps and statistics.median(tps) > 0:
        return statistics.median(tps), "output tokens/s"
    return None, None


def _truthy(v: Any) -> bool:
    return v is True or (isinstance(v, str) and v.strip().lower() in ("1", "true", "on", "yes"))


def _falsy(v: Any) -> bool:
    return v is False or (isinstance(v, str) and v.strip().lower() in ("0", "false", "off", "no"))


#: the settings keys that say whether CUDA graphs are on
_GRAPH_KEYS = ("cuda_graphs", "cuda_graph", "use_cuda_graph")


def probable_causes(settings: dict[str, Any], problems: Sequence[Problem]) -> tuple[str, ...]:
    """Likely causes of a decode far below roofline, most specific first, from
    the target's effective settings and the runs' problems."""
    keys = {k.lower(): v for k, v in settings.items()}
    causes: list[str] = []
    if (
        any(_falsy(keys.get(k)) for k in _GRAPH_KEYS)
        or _truthy(keys.get("enforce_eager"))
        or _truthy(keys.get("ggml_cuda_disable_graphs"))
    ):
        causes.append("CUDA graphs are off (enforce_eager / graphs disabled)")
    offload = keys.get("cpu_offload_gb") or keys.get("cpu_offload")
    if (isinstance(offload, int | float) and offload > 0) or _truthy(offload):
        causes.append("weights offloaded to the CPU")
    ngl = keys.get("n_gpu_layers", keys.get("ngl"))
    layers = keys.get("n_layers", keys.get("num_layers"))
    if isinstance(ngl, int) and isinstance(layers, int) and 0 <= ngl < layers:
        causes.append(f"only {ngl} of {layers} layers on the GPU (CPU offload)")
    if any(p.code == "client_floor" for p in problems):
        causes.append("the client's own overhead floor dominates (client_floor)")
    if not causes:
        # nothing specific: the usual suspects, less those the settings rule out
        graphs_on = any(_truthy(keys.get(k)) for k in _GRAPH_KEYS)
        causes += [
            *([] if graphs_on else ["CUDA graphs off"]),
            "host work per decode step (scheduler, Python)",
            "a slow kernel or quantization fallback",
            "CPU offload",
            "the client's floor",
        ]
    return tuple(causes)


def check_roofline(
    facts: RooflineFacts,
    runs: Sequence[SweepRun],
    settings: dict[str, Any] | None = None,
    *,
    far_below: float | None = None,
) -> RooflineCheck:
    """Compare one target's concurrency-1 decode speed with its roofline.

    ``far_below``: the fraction under which the run is flagged; by default ``FAR_BELOW``,
    or ``MOE_FAR_BELOW`` when the facts describe a mixture of experts."""
    own = [r for r in runs if r.target == facts.target]
    bpt = bytes_per_token(
        weight_bytes_per_step(facts, 1), facts.kv_bytes_per_token, facts.context_tokens
    )
    bound = decode_bound_tokens_per_s(facts.bandwidth_gb_s, bpt)
    measured, source = measured_decode_tokens_per_s(own)
    levels = level_bounds(facts, own)
    moe = facts.experts is not None
    if far_below is None:
        far_below = MOE_FAR_BELOW if moe else FAR_BELOW
    if measured is None:
        return RooflineCheck(
            facts.target, bound, 1000.0 / bound, None, None, None, "no_data", (), levels, moe
        )
    fraction = measured / bound
    causes: tuple[str, ...] = ()
    status: Literal["ok", "far_below", "above_bound"] = "ok"
    if fraction < far_below:
        status = "far_below"
        problems = [p for r in own if r.concurrency == 1 for p in r.problems]
        causes = probable_causes(settings or {}, problems)
        if moe:
            causes = (
                "the fused-MoE kernels ran without a config tuned for this GPU "
                "(crossover verify-config: moe_tuned_config)",
                *causes,
            )
    elif fraction > ABOVE_BOUND:
        status = "above_bound"
    return RooflineCheck(
        facts.target,
        bound,
        1000.0 / bound,
        measured,
        source,
        fraction,
        status,
        causes,
        levels,
        moe,
    )


def level_bounds(facts: RooflineFacts, runs: Sequence[SweepRun]) -> tuple[LevelBound, ...]:
    """The step bound at every concurrency the target has valid runs for."""
    out = []
    for c in sorted({r.concurrency for r in runs if r.is_valid and r.concurrency is not None}):
        ms = [
            v
            for r in runs
            if r.is_valid and r.concurrency == c and (v := r.value("tpot_ms.p50")) is not None
        ]
        bound = step_bound_ms(facts, c)
        tpot = statistics.median(ms) if ms else None
        frac = bound / tpot if tpot else None
        out.append(LevelBound(c, bound, tpot, frac))
    return tuple(out)


def check_sweep(sweep: SweepFile, *, far_below: float | None = None) -> list[RooflineCheck]:
    """The roofline check of every target the sweep has facts for."""
    out = []
    for facts in sweep.roofline:
        target = sweep.target(facts.target)
        settings = target.settings if target is not None else {}
        out.append(check_roofline(facts, sweep.runs, settings, far_below=far_below))
    return out
