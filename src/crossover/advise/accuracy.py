"""Predictions against measured runs: one row per (target, concurrency, metric), summarised.

Used by ``advise --results`` (the ``calibration`` block of the advice JSON) and by the fit
(``calibrate.py``) to report in-sample and held-out error. The error of a row is
(predicted - measured) / measured; the metrics are output tokens/s (all users) and
decode tokens/s per user (1000 / TPOT p50), the two figures the advice ranks by.
"""

from __future__ import annotations

from collections.abc import Callable
from statistics import mean
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from crossover.advise import cost, efficiency
from crossover.advise.cost import AllReduceCurve, Layout, Prediction
from crossover.advise.efficiency import Calibration, EngineProfile, ErrorSummary, Worst
from crossover.advise.hardware import System, system_from_flags
from crossover.advise.model import ModelFacts
from crossover.advise.results import Measured, SweepResults
from crossover.errors import UsageError

if TYPE_CHECKING:
    from crossover.advise.candidates import AdviceRequest, Candidate

METRICS: tuple[str, ...] = ("output_tok_s", "decode_tok_s_per_user")
REGIMES: tuple[str, ...] = ("c=1", "c=2-16", "c=32-128", "c>=256")


def regime(concurrency: int) -> str:
    """Load regime of a level: one user, light, batched, saturated."""
    if concurrency <= 1:
        return REGIMES[0]
    if concurrency <= 16:
        return REGIMES[1]
    if concurrency <= 128:
        return REGIMES[2]
    return REGIMES[3]


class Row(BaseModel):
    target: str
    engine: str
    profile: str | None
    concurrency: int
    regime: str
    metric: str
    predicted: float
    measured: float
    error_pct: float
    sweep: str | None = None

    def contract(self) -> dict[str, Any]:
        """The row as the advice JSON's ``calibration.rows`` carries it."""
        return self.model_dump()


def system_for(gpu: str, layout: Layout) -> System:
    return system_from_flags(gpu, layout.gpus)


def predict_measured(
    m: Measured,
    results: SweepResults,
    model: ModelFacts,
    gpu: str,
    profile: EngineProfile | None,
    curve: AllReduceCurve | None = None,
    cached_tokens: int = 0,
    host_mem_bandwidth: float | None = None,
) -> Prediction | None:
    """The prediction for one measured target and level (None: no workload in the sweep).
    ``cached_tokens``: the prompt tokens the engine served from its prefix cache.

    An MoE is predicted as the advisor predicts it: a target that kept experts in host
    memory (``m.n_cpu_moe``) by the offload model (``moe.offload_prediction``, at
    ``host_mem_bandwidth`` GB/s; None: the advisor's default host), and a fused-MoE
    kernel on its default tiles slowed by ``moe_untuned`` (``_untuned``)."""
    if results.input_tokens is None or results.output_tokens is None:
        return None
    layout = Layout(tp=m.tp, pp=m.pp)
    system = system_for(gpu, layout)
    quant = m.quant or "bf16"
    if model.is_moe and m.n_cpu_moe:
        return _offloaded(
            m,
            system,
            model,
            quant,
            results.input_tokens,
            results.output_tokens,
            cached_tokens,
            host_mem_bandwidth,
        )
    if layout.gpus > 1:
        use: AllReduceCurve = curve or cost.default_curve(system)
    else:
        use = cost.NoComm()
    kwargs: dict[str, Any] = {
        "concurrency": m.concurrency,
        "input_tokens": results.input_tokens,
        "output_tokens": results.output_tokens,
        "cached_tokens": cached_tokens,
    }
    if profile is None:
        return cost.predict(model, system, layout, quant, use, **kwargs)
    pred = efficiency.predict(model, system, layout, quant, use, profile, **kwargs)
    if model.is_moe:
        pred = _untuned(pred, m, system, model, quant, results.output_tokens)
    return pred


def _request(
    system: System,
    model: ModelFacts,
    input_tokens: int,
    output_tokens: int,
    host_mem_bandwidth: float | None = None,
    cached_tokens: int = 0,
) -> AdviceRequest:
    """The advice request a sweep's workload makes; ``cached_tokens`` (what the target
    served from its prefix cache) stands as the shared prefix."""
    from crossover.advise.candidates import AdviceRequest

    return AdviceRequest(
        system=system,
        model=model,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        shared_prefix_tokens=cached_tokens,
        host_mem_bandwidth=host_mem_bandwidth,
    )


def _candidate(m: Measured, quant: str) -> Candidate:
    from crossover.advise.candidates import Candidate

    return Candidate(engine=m.engine, tp=m.tp, pp=m.pp, quant=quant, n_cpu_moe=m.n_cpu_moe)


def _offloaded(
    m: Measured,
    system: System,
    model: ModelFacts,
    quant: str,
    input_tokens: int,
    output_tokens: int,
    cached_tokens: int,
    host_mem_bandwidth: float | None,
) -> Prediction:
    """llama.cpp with ``m.n_cpu_moe`` layers' experts in host memory, through the
    advisor's own offload model."""
    from crossover.advise import moe

    req = _request(system, model, input_tokens, output_tokens, host_mem_bandwidth, cached_tokens)
    if req.cached_tokens(m.engine) != cached_tokens:
        raise UsageError(f"{m.target}: {m.engine} keeps no prefix cache for the offload model")
    return moe.offload_prediction(req, _candidate(m, quant), m.concurrency, None)


def _untuned(
    pred: Prediction,
    m: Measured,
    system: System,
    model: ModelFacts,
    quant: str,
    output_tokens: int,
) -> Prediction:
    """The advisor's untuned fused-MoE slowdown (rule ``moe-tuned-kernel-config``).

    Where the engine's log says which config it read (``m.moe_tuned_config``), that
    decides: a tuned one runs as predicted, the default tiles are slowed by
    ``moe.untuned_slowdown`` for this GPU class and batch, as ``moe.apply_untuned``
    slows an ``absent`` config. Not stated: the advisor's own lookup
    (``moe.apply_untuned``, from the engine's config table)."""
    from crossover.advise import moe

    if m.moe_tuned_config is None:
        req = _request(system, model, 1, output_tokens)
        return moe.apply_untuned(pred, req, _candidate(m, quant))[0]
    if m.moe_tuned_config:
        return pred
    key = moe.config_key(model, quant, m.tp)
    n = int(key.split(",")[1].removeprefix("N=")) if key else None
    slow = moe.untuned_slowdown(system.gpu.id, pred.batch, n)
    if slow is None:
        return pred
    # as moe.apply_untuned: each decode step slower by the range's middle
    extra = output_tokens * pred.step_ms * (slow.factor - 1)
    per_user = output_tokens / (output_tokens / pred.decode_tok_s_per_user * 1e3 + extra) * 1e3
    scale = per_user / pred.decode_tok_s_per_user
    return pred.model_copy(
        update={
            "step_ms": pred.step_ms * slow.factor,
            "decode_tok_s_per_user": per_user,
            "output_tok_s": pred.output_tok_s * scale,
            "total_tok_s": pred.total_tok_s * scale,
        }
    )


def rows_for(
    results: SweepResults,
    model: ModelFacts,
    gpu: str,
    calibration: Calibration | None,
    curve: AllReduceCurve | None = None,
    only: set[tuple[str, int]] | None = None,
    profiles: dict[str, EngineProfile] | None = None,
    cached: Callable[[Measured], int] | None = None,
    host_mem_bandwidth: float | None = None,
) -> list[Row]:
    """One row per valid (target, level) and metric. ``calibration`` None: the roofline.

    ``profiles`` overrides the calibration's (the fit uses it for held-out profiles);
    ``only`` restricts the rows to these (target, concurrency) pairs; ``cached`` gives the
    prompt tokens a target served from its prefix cache (a shared-prefix workload);
    ``host_mem_bandwidth``: the GB/s of the sweep machine's host memory, for targets that
    kept experts there."""
    out: list[Row] = []
    for m in results.measured:
        if only is not None and (m.target, m.concurrency) not in only:
            continue
        profile: EngineProfile | None = None
        if profiles is not None:
            profile = profiles.get(efficiency.profile_name(m.engine, m.cuda_graphs))
        elif calibration is not None:
            profile = calibration.profile(m.engine, m.cuda_graphs is not False)
        if profile is None and (profiles is not None or calibration is not None):
            continue  # an engine the calibration does not know: no estimate to compare
        hit = cached(m) if cached is not None else 0
        pred = predict_measured(m, results, model, gpu, profile, curve, hit, host_mem_bandwidth)
        if pred is None:
            continue
        for metric in METRICS:
            measured = getattr(m, metric)
            if not measured:
                continue
            predicted = float(getattr(pred, metric))
            out.append(
                Row(
                    target=m.target,
                    engine=m.engine,
                    profile=profile.name if profile is not None else None,
                    concurrency=m.concurrency,
                    regime=regime(m.concurrency),
                    metric=metric,
                    predicted=predicted,
                    measured=float(measured),
                    error_pct=(predicted - measured) / measured * 100,
                    sweep=results.path,
                )
            )
    return out


def _mae(rows: list[Row]) -> float:
    return mean(abs(r.error_pct) for r in rows)


def summarize(rows: list[Row]) -> ErrorSummary:
    by_engine: dict[str, list[Row]] = {}
    by_regime: dict[str, list[Row]] = {}
    for r in rows:
        by_engine.setdefault(r.profile or r.engine, []).append(r)
        by_regime.setdefault(r.regime, []).append(r)
    return ErrorSummary(
        n=len(rows),
        mean_abs_error_pct=_mae(rows) if rows else None,
        per_engine={k: _mae(v) for k, v in sorted(by_engine.items())},
        per_regime={k: _mae(by_regime[k]) for k in REGIMES if k in by_regime},
    )


def worst(rows: list[Row], min_rows: int = 2) -> Worst | None:
    """The (profile, regime) with the largest mean |error| over at least ``min_rows`` rows."""
    groups: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        groups.setdefault((r.profile or r.engine, r.regime), []).append(r)
    scored = [(_mae(v), k, len(v)) for k, v in groups.items() if len(v) >= min_rows]
    if not scored:
        return None
    mae, (profile, reg), n = max(scored)
    return Worst(profile=profile, regime=reg, mean_abs_error_pct=mae, n=n)
