"""Enumerate candidates, reject them by cited rules, rank the rest per load regime.

Predictions are estimates from engine profiles fitted to measured sweeps
(``efficiency.py``, ``data/calibration.yaml``; engines never measured borrow a measured
one's), or with ``predictions="roofline"`` the engine-agnostic upper bounds of
``cost.py``. The engine order among candidates whose figures are within
``TIE_FRACTION`` of the best follows rule ``seed-1-engine-choice`` (TensorRT-LLM with
CUDA graphs at low/mid concurrency, vLLM at high concurrency and for MoE tensor
parallelism, llama.cpp by default; docs/engines.md, advisor rules); a borrowed estimate
wins no tie against a measured one and every row says what its figure rests on
(``ranking.py``, rule ``measured-before-borrowed``). Measurements from
``--results`` replace predictions where a measured target matches a candidate, and every
measured run is compared with its prediction (the ``calibration`` block).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from crossover.advise import accuracy, cost
from crossover.advise.candidates import (
    AdviceRequest,
    Candidate,
    CandidateKey,
    Regime,
    formats_for,
    regimes_for,
    screen,
)
from crossover.advise.cost import AllReduceCurve, Prediction
from crossover.advise.efficiency import Calibration, load_calibration
from crossover.advise.explain import (
    TIE_FRACTION,
    Placement,
    dedupe,
    measured_figures,
    metric,
    metric_key,
    nvlink_wall,
    predict_candidate,
    recommendation,
)
from crossover.advise.formats import quality
from crossover.advise.hardware import find_gpu
from crossover.advise.model import quant_from_config
from crossover.advise.nearmiss import near_misses
from crossover.advise.ranking import Scored, basis_of, borrowed_low, measured_first, why_above
from crossover.advise.results import SweepResults
from crossover.advise.rules import normalize_quant
from crossover.errors import UsageError

__all__ = ["SCHEMA", "AdviceRequest", "advise", "regimes_for"]

SCHEMA = "crossover.advice/1"
TOP_PER_REGIME = 6


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
    cost.check_shared_prefix(req.shared_prefix_tokens, req.input_tokens)
    curve = curve or cost.default_curve(system)
    regimes = regimes_for(req.concurrency)
    context = req.input_tokens + req.output_tokens
    # measured targets' own formats are weighed too, so their measurements are used
    extra: dict[str, list[str]] = {}
    for m in results.measured if results is not None else []:
        if m.quant is not None:
            extra.setdefault(m.engine, []).append(normalize_quant(m.quant))
    kept, rejected = screen(req, context, regimes[0][1], extra)
    skipped = {(r["engine"], r["config"]["quant"]) for r in rejected if r.get("not_asked")}
    formats = {
        e: [q for q in formats_for(req, e, extra)[0] if (e, q) not in skipped] for e in req.engines
    }

    recommendations: list[dict[str, Any]] = []
    comparisons: list[dict[str, Any]] = []
    notes: list[str] = []
    per_regime: list[
        tuple[Regime, int, list[tuple[Scored, float]], dict[Any, Placement], float | None]
    ] = []
    listed: set[CandidateKey] = set()
    for regime, conc in regimes:
        scored: list[Scored] = []
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
            basis = basis_of(c, measured, results, cal)
            if basis.kind == "borrowed":  # a borrowed estimate ranks by its low end
                scored.append(Scored(borrowed_low(value), ev, pred, measured, basis, value))
            else:
                scored.append(Scored(value, ev, pred, measured, basis))
        if not scored:
            continue
        # Roofline predictions are upper bounds: where some candidates were measured, rank
        # the others with their predictions scaled by the median measured/predicted
        # ratio. Calibrated estimates are per engine already: no cross-engine scaling.
        ratios = sorted(
            s.value / metric(regime, s.pred)
            for s in scored
            if s.measured is not None and metric(regime, s.pred) > 0
        )
        scale = ratios[len(ratios) // 2] if ratios and cal is None else None
        if scale is not None:
            scored = [
                s if s.measured is not None else s._replace(value=s.value * scale) for s in scored
            ]
            notes.append(
                f"{regime} concurrency: {len(ratios)} measured candidate(s) reached "
                f"{scale:.0%} of prediction; unmeasured candidates are ranked with "
                "predictions scaled by that ratio"
            )
        ranked, placed = measured_first(scored, regime, model, calibrated=cal is not None)
        moved = sorted({key[0] for key, p in placed.items() if p.after is not None})
        if moved:
            notes.append(
                f"{regime} concurrency: {', '.join(moved)} never measured: estimated on a "
                "borrowed profile and ranked by the low end of its range, below the measured "
                f"candidates that low end does not lead by more than {TIE_FRACTION:.0%}; the "
                "row says where it would rank if the profile held (measured-before-borrowed)"
            )
        per_regime.append((regime, conc, ranked, placed, scale))
        shown: set[str] = set()  # engines with a row listed in this regime
        low_loss = False  # a format that loses little or no quality is listed
        for rank, (s, _) in enumerate(ranked, start=1):
            p = placed.get(s.key)
            lossless = quality(s.ev.candidate.quant).rank <= 1
            if (
                rank <= TOP_PER_REGIME
                or s.measured is not None
                or s.ev.candidate.engine not in shown
                or (lossless and not low_loss)
            ):
                listed.add(s.key)
                low_loss = low_loss or lossless
            elif p is not None and p.rank_if_it_holds <= TOP_PER_REGIME:
                listed.add(s.key)  # a borrowed estimate moved down says where it would rank
            shown.add(s.ev.candidate.engine)
        notes.extend(nvlink_wall(req, kept, conc, curve, cal))
    # a candidate listed at one load (its top ranks, each engine's best, every measured
    # one) is listed at every load, so its row in the table is whole
    for regime, conc, ranked, placed, scale in per_regime:
        for rank, (s, best) in enumerate(ranked, start=1):
            if s.key not in listed:
                continue
            above = next(
                (
                    why
                    for b, _ in ranked[rank:]
                    if (why := why_above(s, b, regime, model, cal is not None)) is not None
                ),
                None,
            )
            recommendations.append(
                recommendation(
                    req,
                    regime,
                    conc,
                    rank,
                    s.value,
                    best,
                    s.ev,
                    s.pred,
                    s.measured,
                    curve,
                    scale,
                    cal,
                    basis=s.basis,
                    placement=placed.get(s.key),
                    above=above,
                )
            )
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
            "sm_family": system.gpu.sm_family,
            "memory_gib": system.gpu.memory_gib,
            # what the engines' memory budgets are shares of: CUDA's total where measured
            "budget_gib": system.gpu.budget_gib,
            "datasheet": system.gpu.source,
            "pairs": [p.model_dump() for p in system.pairs],
            # read from NVML: the machine's GPU count, the NVML indices of those planned
            # for, what chose them (CUDA_VISIBLE_DEVICES) and the line that says so; null
            # for GPUs named by flags
            "machine_gpus": system.machine_gpus,
            "gpu_indices": system.gpu_indices,
            "gpus_chosen": system.gpus_chosen,
            "gpus_assumed": system.assumed(),
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
            # --quant as given (None: every format each engine has kernels for here)
            "quant": req.quant,
            # the weight formats weighed per engine (formats.yaml defaults, or --quant)
            "formats": formats,
        },
        "workload": {
            "input_tokens": req.input_tokens,
            "output_tokens": req.output_tokens,
            "shared_prefix_tokens": req.shared_prefix_tokens,
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
