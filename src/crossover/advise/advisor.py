"""Enumerate candidates, reject them by cited rules, rank the rest per load regime.

Predictions are estimates from engine profiles fitted to measured sweeps
(``efficiency.py``, ``data/calibration.yaml``; engines never measured borrow a measured
one's), or with ``predictions="roofline"`` the engine-agnostic upper bounds of
``cost.py``. The engine order among candidates whose figures are within
``TIE_FRACTION`` of the best follows rule ``seed-1-engine-choice`` (TensorRT-LLM with
CUDA graphs at low/mid concurrency, vLLM at high concurrency and for MoE tensor
parallelism, llama.cpp by default; docs/engines.md, advisor rules). Measurements from
``--results`` replace predictions where a measured target matches a candidate, and every
measured run is compared with its prediction (the ``calibration`` block).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from crossover.advise import accuracy, cost
from crossover.advise.candidates import (
    AdviceRequest,
    Candidate,
    Evaluated,
    Regime,
    regimes_for,
    screen,
)
from crossover.advise.cost import AllReduceCurve, Prediction
from crossover.advise.efficiency import Calibration, load_calibration
from crossover.advise.explain import (
    PREFERENCE,
    TIE_FRACTION,
    dedupe,
    measured_figures,
    metric,
    metric_key,
    nvlink_wall,
    predict_candidate,
    recommendation,
)
from crossover.advise.hardware import find_gpu
from crossover.advise.model import ModelFacts, quant_from_config
from crossover.advise.nearmiss import near_misses
from crossover.advise.results import SweepResults
from crossover.advise.rules import normalize_quant
from crossover.errors import UsageError

__all__ = ["SCHEMA", "AdviceRequest", "advise", "regimes_for"]

SCHEMA = "crossover.advice/1"
TOP_PER_REGIME = 5


def _prefers(engine: str, regime: Regime, model: ModelFacts, tp: int) -> int:
    order = PREFERENCE[regime]
    if model.is_moe and tp > 1 and engine == "vllm":
        return -1  # rule 1: vLLM for MoE tensor parallelism
    return order.index(engine)


def advise(
    req: AdviceRequest,
    curve: AllReduceCurve | None = None,
    results: SweepResults | None = None,
    calibration: Calibration | None = None,
) -> dict[str, Any]:
    """Ranked recommendations per regime and the rejected candidates, as advice JSON.

    ``calibration`` None: the packaged profiles (``data/calibration.yaml``), unless the
    request asks for the roofline."""
    model, system = req.model, req.system
    cal = None
    if req.predictions == "calibrated":
        cal = calibration if calibration is not None else load_calibration()
    if req.input_tokens < 1 or req.output_tokens < 1:
        raise UsageError("--input-tokens and --output-tokens must be >= 1")
    quant = normalize_quant(req.quant or quant_from_config(model) or _default_quant(model))
    curve = curve or cost.default_curve(system)
    regimes = regimes_for(req.concurrency)
    context = req.input_tokens + req.output_tokens
    kept, rejected = screen(req, quant, context, regimes[0][1])

    recommendations: list[dict[str, Any]] = []
    comparisons: list[dict[str, Any]] = []
    notes: list[str] = []
    for regime, conc in regimes:
        scored: list[tuple[float, Evaluated, Prediction, dict[str, Any] | None]] = []
        for ev in kept:
            c = ev.candidate
            pred = predict_candidate(req, c, curve, conc, ev.fit.max_concurrency, cal)
            measured = measured_figures(
                results,
                c,
                conc,
                pred,
                comparisons,
                key=metric_key(regime),
                mode_pred=_mode_predictor(req, c, curve, conc, ev.fit.max_concurrency, cal),
            )
            value = metric(regime, pred)
            if measured is not None and measured.get(metric_key(regime)) is not None:
                value = float(measured[metric_key(regime)])
            scored.append((value, ev, pred, measured))
        if not scored:
            continue
        # Roofline predictions are upper bounds: where some candidates were measured, rank
        # the others with their predictions scaled by the median measured/predicted
        # ratio. Calibrated estimates are per engine already: no cross-engine scaling.
        ratios = sorted(
            v / metric(regime, p)
            for v, _, p, m in scored
            if m is not None and metric(regime, p) > 0
        )
        scale = ratios[len(ratios) // 2] if ratios and cal is None else None
        if scale is not None:
            scored = [(v if m is not None else v * scale, e, p, m) for v, e, p, m in scored]
            notes.append(
                f"{regime} concurrency: {len(ratios)} measured candidate(s) reached "
                f"{scale:.0%} of prediction; unmeasured candidates are ranked with "
                "predictions scaled by that ratio"
            )
        best = max(s[0] for s in scored)
        band = best * (1 - TIE_FRACTION)
        scored.sort(
            key=lambda s: (
                s[0] < band,  # the tie band first, ordered by rule 1; the rest by figure
                # MoE: in the band, an engine without a tuned fused-MoE kernel config for
                # this GPU goes after those with one (its MoE layers run default tiles)
                s[0] >= band and s[1].moe_config == "absent",
                _prefers(s[1].candidate.engine, regime, model, s[1].candidate.tp)
                if s[0] >= band
                else 0,
                -s[0],
                s[1].candidate.tp * s[1].candidate.pp,
            )
        )
        seen: set[tuple[str, int, int]] = set()
        rank = 0
        for value, ev, pred, measured in scored:
            c = ev.candidate
            key = (c.engine, c.tp, c.pp)
            if key in seen:
                continue
            seen.add(key)
            rank += 1
            if rank > TOP_PER_REGIME and measured is None:
                continue  # measured candidates are always listed
            recommendations.append(
                recommendation(
                    req, regime, conc, rank, value, best, ev, pred, measured, curve, scale, cal
                )
            )
        notes.extend(nvlink_wall(req, kept, conc, curve, cal))
    if results is not None:
        notes.extend(_measured_note(results, recommendations))
    if not recommendations:
        notes.append(
            "no candidate fits or runs: see rejected (more GPUs, a smaller quant, "
            "or a shorter context)"
        )
    advice: dict[str, Any] = {
        "schema": SCHEMA,
        "hardware": {
            "gpu": system.gpu.id,
            "count": system.count,
            "interconnect": system.interconnect,
            "source": system.source,
            "compute_capability": system.gpu.compute_capability,
            "memory_gib": system.gpu.memory_gib,
            "datasheet": system.gpu.source,
            "pairs": [p.model_dump() for p in system.pairs],
        },
        "model": {
            "name": model.name,
            "source": model.source,
            "params": model.params,
            "active_params": model.active_params,
            "layers": model.layers,
            "attention_heads": model.attention_heads,
            "kv_heads": model.kv_heads,
            "head_dim": model.head_dim,
            "hidden": model.hidden,
            "vocab": model.vocab,
            "experts": model.experts,
            "experts_per_token": model.experts_per_token,
            "ffn": model.ffn,
            "dtype": model.dtype,
            "checkpoint_quant": quant_from_config(model),
            "kv_bytes_per_token": model.kv_values_per_token() * cost.KV_BYTES,
            "quant": quant,
        },
        "workload": {
            "input_tokens": req.input_tokens,
            "output_tokens": req.output_tokens,
            "concurrency": sorted(set(req.concurrency)),
            "regimes": {r: c for r, c in regimes},
        },
        "allreduce_curve": curve.name,
        "predictions": req.predictions,
        "recommendations": recommendations,
        "rejected": dedupe(rejected),
        "near_misses": near_misses(req, rejected, kept, regimes[0][1], context),
        "comparisons": comparisons,
        "notes": [*dict.fromkeys(notes), _predictions_note(req, cal)],
    }
    if results is not None:
        advice["calibration"] = calibration_block(req, results, curve, cal)
    return advice


def _mode_predictor(
    req: AdviceRequest,
    c: Candidate,
    curve: AllReduceCurve,
    conc: int,
    max_batch: int,
    cal: Calibration | None,
) -> Callable[[bool], Prediction] | None:
    """Predictions for a measured target's own CUDA-graph mode (calibrated only)."""
    if cal is None:
        return None

    def predict(graphs: bool) -> Prediction:
        return predict_candidate(req, c, curve, conc, max_batch, cal, cuda_graphs=graphs)

    return predict


def _predictions_note(req: AdviceRequest, cal: Calibration | None) -> str:
    if cal is None:
        return (
            "predicted figures are roofline upper bounds (memory-bound decode at "
            f"{cost.BANDWIDTH_EFFICIENCY:.0%} of datasheet bandwidth); measure them "
            "(seed-6-rerun-sweep)"
        )
    held = cal.errors.get("heldout_levels")
    err = (
        f"; held-out mean |error| {held.mean_abs_error_pct:.0f}%"
        if held and held.mean_abs_error_pct is not None
        else ""
    )
    worst = (
        f", worst {cal.worst.profile} at {cal.worst.regime} ({cal.worst.mean_abs_error_pct:.0f}%)"
        if cal.worst
        else ""
    )
    where = (
        ""
        if req.system.gpu.id in cal.gpu.split(",")
        else f"; not measured on {req.system.gpu.id}: the {cal.gpu} efficiencies are carried over"
    )
    return (
        f"predicted figures are estimates from engine profiles fitted to measured sweeps "
        f"on {cal.gpu} (data/calibration.yaml{err}{worst}){where}; measure them "
        "(seed-6-rerun-sweep)"
    )


def calibration_block(
    req: AdviceRequest, results: SweepResults, curve: AllReduceCurve, cal: Calibration | None
) -> dict[str, Any]:
    """Every valid measured run against this advisor's prediction for it (the advice JSON's
    ``calibration`` block, docs/interfaces.md)."""
    from pathlib import Path

    gpu = req.system.gpu.id
    if results.gpu is not None:
        try:
            gpu = find_gpu(results.gpu).id
        except UsageError:
            pass
    comm = curve if req.system.count > 1 else None
    rows = accuracy.rows_for(results, req.model, gpu, cal, comm)
    summary = accuracy.summarize(rows)
    worst = accuracy.worst(rows)
    here = Path(results.path).resolve().as_posix()
    fitted_to = cal.source_paths() if cal is not None else []
    held = cal.errors.get("heldout_levels") if cal is not None else None
    return {
        "n": summary.n,
        "mean_abs_error_pct": summary.mean_abs_error_pct,
        "rows": [r.contract() for r in rows],
        "per_engine": summary.per_engine,
        "per_regime": summary.per_regime,
        "worst": worst.model_dump() if worst is not None else None,
        "predictions": req.predictions,
        "gpu": gpu,
        "workload": {"input_tokens": results.input_tokens, "output_tokens": results.output_tokens},
        "constants": None
        if cal is None
        else {
            "fitted_to": fitted_to,
            "in_sample": any(here.endswith(Path(p).as_posix()) for p in fitted_to),
            "heldout_mean_abs_error_pct": held.mean_abs_error_pct if held else None,
            "worst_heldout": cal.worst.model_dump() if cal.worst else None,
        },
    }


def _measured_note(results: SweepResults, recs: list[dict[str, Any]]) -> list[str]:
    """Say which measured targets the advice used and which matched no candidate."""
    used: dict[str, list[int]] = {}
    for rec in recs:
        if rec["measured"] is not None:
            used.setdefault(rec["measured"]["target"], []).append(rec["concurrency"])
    names = sorted({m.target for m in results.measured})
    unused = [n for n in names if n not in used]
    out = [
        f"measured figures from {results.path} replace predictions for "
        + (
            "; ".join(f"{t} (c={','.join(map(str, sorted(set(cs))))})" for t, cs in used.items())
            or "no candidate"
        )
    ]
    if unused:
        out.append(
            f"measured targets not used (a better-measured target of the same engine and "
            f"layout was, or no candidate matches): {', '.join(unused)}"
        )
    return out


def _default_quant(model: ModelFacts) -> str:
    dtype = (model.dtype or "bfloat16").lower()
    return "fp16" if dtype in ("float16", "fp16", "half") else "bf16"
