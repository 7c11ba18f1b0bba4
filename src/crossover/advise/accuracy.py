"""Predictions against measured runs: one row per (target, concurrency, metric), summarised.

Used by ``advise --results`` (the ``calibration`` block of the advice JSON) and by the fit
(``calibrate.py``) to report in-sample and held-out error. The error of a row is
(predicted - measured) / measured; the metrics are output tokens/s (all users) and
decode tokens/s per user (1000 / TPOT p50), the two figures the advice ranks by.
"""

from __future__ import annotations

from collections.abc import Callable
from statistics import mean
from typing import Any

from pydantic import BaseModel

from crossover.advise import cost, efficiency
from crossover.advise.cost import AllReduceCurve, Layout, Prediction
from crossover.advise.efficiency import Calibration, EngineProfile, ErrorSummary, Worst
from crossover.advise.hardware import System, system_from_flags
from crossover.advise.model import ModelFacts
from crossover.advise.results import Measured, SweepResults

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
) -> Prediction | None:
    """The prediction for one measured target and level (None: no workload in the sweep).
    ``cached_tokens``: the prompt tokens the engine served from its prefix cache."""
    if results.input_tokens is None or results.output_tokens is None:
        return None
    layout = Layout(tp=m.tp, pp=m.pp)
    system = system_for(gpu, layout)
    if layout.gpus > 1:
        use: AllReduceCurve = curve or cost.default_curve(system)
    else:
        use = cost.NoComm()
    quant = m.quant or "bf16"
    kwargs: dict[str, Any] = {
        "concurrency": m.concurrency,
        "input_tokens": results.input_tokens,
        "output_tokens": results.output_tokens,
        "cached_tokens": cached_tokens,
    }
    if profile is None:
        return cost.predict(model, system, layout, quant, use, **kwargs)
    return efficiency.predict(model, system, layout, quant, use, profile, **kwargs)


def rows_for(
    results: SweepResults,
    model: ModelFacts,
    gpu: str,
    calibration: Calibration | None,
    curve: AllReduceCurve | None = None,
    only: set[tuple[str, int]] | None = None,
    profiles: dict[str, EngineProfile] | None = None,
    cached: Callable[[Measured], int] | None = None,
) -> list[Row]:
    """One row per valid (target, level) and metric. ``calibration`` None: the roofline.

    ``profiles`` overrides the calibration's (the fit uses it for held-out profiles);
    ``only`` restricts the rows to these (target, concurrency) pairs; ``cached`` gives the
    prompt tokens a target served from its prefix cache (a shared-prefix workload)."""
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
        pred = predict_measured(m, results, model, gpu, profile, curve, hit)
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
