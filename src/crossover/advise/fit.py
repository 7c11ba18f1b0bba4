"""The fit behind ``calibrate.py``: least squares on log errors, and held-out refits.

Terms are searched in a bounded log space (``BOUNDS``) by a plain, deterministic
Nelder-Mead (NumPy only: SciPy is not a core dependency). A profile with fewer than
``FULL_FIT_LEVELS`` levels fits only its overheads, inheriting the rest from the
engine's graphs-on profile, or (without one) also its prefill rate with the roofline's
defaults for the rest. Held-out rows come from refits without the group predicted.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from types import SimpleNamespace

from pydantic import BaseModel

from crossover.advise import cost, efficiency
from crossover.advise.accuracy import Row, rows_for
from crossover.advise.cost import AllReduceCurve, Layout
from crossover.advise.efficiency import FIT_TERMS, EngineProfile
from crossover.advise.hardware import system_from_flags
from crossover.advise.model import ModelFacts
from crossover.advise.results import Measured, SweepResults

FULL_FIT_LEVELS = 5
# Engines never measured borrow a measured engine's profile (said in the advice).


DEFAULTS: dict[str, float] = {
    "decode_compute_efficiency": cost.COMPUTE_EFFICIENCY,
    "step_us_per_layer": 0.0,
    "seq_us": 0.0,
    "prefill_compute_efficiency": cost.COMPUTE_EFFICIENCY,
    "prefill_overhead_ms": 0.0,
}
BOUNDS: dict[str, tuple[float, float]] = {
    # no GEMM sustains much above 90% of the dense peak
    "decode_compute_efficiency": (0.02, 0.9),
    "prefill_compute_efficiency": (0.005, 0.9),
    "step_us_per_layer": (0.1, 3000.0),
    "seq_us": (0.1, 5000.0),
    "prefill_overhead_ms": (0.01, 1000.0),
    "moe_seq_us_per_layer": (0.01, 500.0),
    "moe_step_us_per_layer": (0.01, 500.0),
}
MOE_TERM = "moe_seq_us_per_layer"
MOE_STEP_TERM = "moe_step_us_per_layer"
MOE_TERMS = [MOE_TERM, MOE_STEP_TERM]


class Point(BaseModel):
    """One measured (target, level) and where it came from."""

    measured: Measured
    results: SweepResults
    profile: str
    bandwidth_efficiency: float

    @property
    def group(self) -> str:
        return f"{self.results.path}:{self.measured.target}"


def _arrays(points: list[Point], model: ModelFacts, floor_us: float) -> SimpleNamespace:
    import numpy as np

    rows: list[efficiency.Terms] = []
    for p in points:
        m, res = p.measured, p.results
        layout = Layout(tp=m.tp, pp=m.pp)
        system = system_from_flags(str(res.gpu), layout.gpus)
        curve: AllReduceCurve = cost.default_curve(system) if layout.gpus > 1 else cost.NoComm()
        rows.append(
            efficiency.terms(
                model,
                system,
                layout,
                m.quant or "bf16",
                curve,
                concurrency=m.concurrency,
                input_tokens=int(res.input_tokens or 0),
                output_tokens=int(res.output_tokens or 0),
                allreduce_floor_us=floor_us,
            )
        )
    ns = SimpleNamespace(
        **{
            k: np.array([getattr(t, k) for t in rows], dtype=float)
            for k in efficiency.Terms.model_fields
        }
    )
    ns.out = np.array([p.measured.output_tok_s for p in points], dtype=float)
    ns.user = np.array([p.measured.decode_tok_s_per_user for p in points], dtype=float)
    return ns


def _value(x: float, term: str) -> float:
    lo, hi = BOUNDS[term]
    s = 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, x))))
    return math.exp(math.log(lo) + (math.log(hi) - math.log(lo)) * s)


def _coordinate(v: float, term: str) -> float:
    lo, hi = BOUNDS[term]
    v = min(max(v, lo * 1.0001), hi * 0.9999)
    s = (math.log(v) - math.log(lo)) / (math.log(hi) - math.log(lo))
    return math.log(s / (1 - s))


def _towards(centre: list[float], worst: list[float], t: float) -> list[float]:
    return [c + t * (c - w) for c, w in zip(centre, worst, strict=True)]


def nelder_mead(
    f: Callable[[list[float]], float], x0: list[float], step: float = 0.8, iters: int = 2500
) -> tuple[list[float], float]:
    """A plain, deterministic Nelder-Mead (no SciPy in the core dependencies)."""
    n = len(x0)
    simplex = [list(x0)] + [[x0[j] + (step if j == i else 0.0) for j in range(n)] for i in range(n)]
    values = [f(s) for s in simplex]
    for _ in range(iters):
        order = sorted(range(n + 1), key=lambda i: values[i])
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        if (
            values[-1] - values[0] < 1e-12
            and max(abs(a - b) for s in simplex[1:] for a, b in zip(s, simplex[0], strict=True))
            < 1e-7
        ):
            break
        centre = [sum(s[j] for s in simplex[:-1]) / n for j in range(n)]
        xr = _towards(centre, simplex[-1], 1.0)
        fr = f(xr)
        if fr < values[0]:
            xe = _towards(centre, simplex[-1], 2.0)
            fe = f(xe)
            simplex[-1], values[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = xr, fr
        else:
            xc = _towards(centre, simplex[-1], -0.5)
            fc = f(xc)
            if fc < values[-1]:
                simplex[-1], values[-1] = xc, fc
            else:
                best = simplex[0]
                simplex = [best] + [
                    [b + 0.5 * (v - b) for v, b in zip(s, best, strict=True)] for s in simplex[1:]
                ]
                values = [values[0]] + [f(s) for s in simplex[1:]]
    i = min(range(n + 1), key=lambda k: values[k])
    return simplex[i], values[i]


def fit_profile(
    base: EngineProfile, free: Sequence[str], arrays: SimpleNamespace, starts: int = 3
) -> tuple[EngineProfile, float]:
    """Least squares on log errors of both metrics; the terms not in ``free`` stay."""
    import numpy as np

    fixed = base.model_dump()

    def profile_of(x: Sequence[float]) -> SimpleNamespace:
        values = dict(fixed)
        values.update({t: _value(v, t) for t, v in zip(free, x, strict=True)})
        return SimpleNamespace(**values)

    def loss(x: list[float]) -> float:
        step, _, _, _, _, out = efficiency.closed_loop(arrays, profile_of(x))
        e1 = np.log(out / arrays.out)
        e2 = np.log(1e3 / step / arrays.user)
        return float(np.mean(e1 * e1) + np.mean(e2 * e2))

    x0 = [_coordinate(float(fixed[t]), t) for t in free]
    candidates = [x0, [-1.5] * len(free), [1.5] * len(free)][: max(1, starts)]
    best: tuple[list[float], float] | None = None
    for start in candidates:
        x, fx = nelder_mead(loss, start)
        x, fx = nelder_mead(loss, x, step=0.3)
        if best is None or fx < best[1]:
            best = (x, fx)
    assert best is not None
    values = profile_of(best[0])
    update = {t: getattr(values, t) for t in free}
    return base.model_copy(update=update), best[1]


def _plan(points: list[Point]) -> list[tuple[str, list[str], str | None]]:
    """(profile, terms to fit, parent) in an order where parents come first."""
    levels: dict[str, set[int]] = {}
    for p in points:
        levels.setdefault(p.profile, set()).add(p.measured.concurrency)
    out: list[tuple[str, list[str], str | None]] = []
    for name in sorted(levels, key=lambda n: (n.endswith("-nographs"), n)):
        parent = name.removesuffix("-nographs") if name.endswith("-nographs") else None
        if parent not in levels:
            parent = None
        if len(levels[name]) >= FULL_FIT_LEVELS:
            free = list(FIT_TERMS)
        elif parent is not None:
            free = ["step_us_per_layer", "seq_us"]
        else:
            free = ["step_us_per_layer", "seq_us", "prefill_compute_efficiency"]
        out.append((name, free, parent))
    return out


def _base(
    name: str,
    pts: list[Point],
    parent: EngineProfile | None,
    floor_us: float,
    free: Sequence[str],
) -> EngineProfile:
    values = dict(DEFAULTS)
    if parent is not None:  # the starting point, and the terms not fitted here
        values.update({t: float(getattr(parent, t)) for t in FIT_TERMS})
    if set(free) == set(FIT_TERMS):
        parent = None  # nothing inherited
    bw = sum(p.bandwidth_efficiency for p in pts) / len(pts)
    return EngineProfile(
        name=name,
        engine=pts[0].measured.engine,
        cuda_graphs=not name.endswith("-nographs"),
        bandwidth_efficiency=bw,
        allreduce_floor_us=floor_us if name.endswith("-nographs") else 0.0,
        fitted=list(free),
        inherited_from=parent.name if parent is not None else None,
        targets=sorted({p.group for p in pts}),
        points=len(pts),
        **values,
    )


def fit(
    points: list[Point], model: ModelFacts, floor_us: float, starts: int = 3
) -> dict[str, EngineProfile]:
    profiles: dict[str, EngineProfile] = {}
    for name, free, parent in _plan(points):
        pts = [p for p in points if p.profile == name]
        base = _base(name, pts, profiles.get(parent) if parent else None, floor_us, free)
        profiles[name], _ = fit_profile(
            base, free, _arrays(pts, model, base.allreduce_floor_us), starts
        )
    return profiles


def in_sample_rows(
    points: list[Point], model: ModelFacts, profiles: dict[str, EngineProfile]
) -> list[Row]:
    out: list[Row] = []
    by_results: dict[str, tuple[SweepResults, set[tuple[str, int]]]] = {}
    for p in points:
        res, keys = by_results.setdefault(p.results.path, (p.results, set()))
        keys.add((p.measured.target, p.measured.concurrency))
    for res, keys in by_results.values():
        out.extend(rows_for(res, model, str(res.gpu), None, only=keys, profiles=profiles))
    return out


def heldout(
    points: list[Point],
    model: ModelFacts,
    profiles: dict[str, EngineProfile],
    key: Callable[[Point], str],
) -> list[Row]:
    """Each group (by ``key``) of each profile predicted by a refit without it."""
    out: list[Row] = []
    for name, profile in profiles.items():
        pts = [p for p in points if p.profile == name]
        groups = sorted({key(p) for p in pts})
        if len(groups) < 2:
            continue
        for g in groups:
            train = [p for p in pts if key(p) != g]
            test = [p for p in pts if key(p) == g]
            if 2 * len(train) <= len(profile.fitted):
                continue  # no more data points than terms: nothing honest to say
            refit, _ = fit_profile(
                profile, profile.fitted, _arrays(train, model, profile.allreduce_floor_us), starts=1
            )
            out.extend(in_sample_rows(test, model, {**profiles, name: refit}))
    return out


def _moe_start(profile: EngineProfile, model: ModelFacts) -> EngineProfile:
    """The MoE terms' starting point: ``seq_us``'s share per layer, and 1 us per step."""
    return profile.model_copy(
        update={MOE_TERM: profile.seq_us / max(1, model.layers), MOE_STEP_TERM: 1.0}
    )


def fit_moe(
    points: list[Point], model: ModelFacts, profiles: dict[str, EngineProfile], starts: int = 3
) -> dict[str, EngineProfile]:
    """``moe_seq_us_per_layer`` and ``moe_step_us_per_layer`` of each profile the MoE
    ``points`` measure, fitted with every other term held at its dense fit: the MoE sweep
    moves only what an MoE layer costs, per sequence and per step. The step term is what
    vLLM's and SGLang's MoE decode at few users needs (their per-layer router, top-k and
    fused-expert kernels: 20-38% too fast at 1-8 users with the per-sequence term alone,
    docs/results/h200/calibration.md); llama.cpp's comes out at the fit's floor. Profiles
    the points do not measure are returned unchanged."""
    out = dict(profiles)
    for name in sorted({p.profile for p in points}):
        if name not in profiles:
            continue  # no dense profile to hold: nothing to fit against
        pts = [p for p in points if p.profile == name]
        base = _moe_start(profiles[name], model)
        fitted, _ = fit_profile(
            base, MOE_TERMS, _arrays(pts, model, base.allreduce_floor_us), starts
        )
        out[name] = fitted.model_copy(update={"moe_targets": sorted({p.group for p in pts})})
    return out


def heldout_moe(
    points: list[Point], model: ModelFacts, profiles: dict[str, EngineProfile]
) -> list[Row]:
    """Each MoE level predicted by a refit of the MoE terms without that level."""
    out: list[Row] = []
    for name in sorted({p.profile for p in points}):
        if name not in profiles:
            continue
        pts = [p for p in points if p.profile == name]
        levels = sorted({p.measured.concurrency for p in pts})
        for level in levels if len(levels) > 2 else []:
            train = [p for p in pts if p.measured.concurrency != level]
            base = _moe_start(profiles[name], model)
            refit, _ = fit_profile(
                base, MOE_TERMS, _arrays(train, model, base.allreduce_floor_us), starts=1
            )
            test = [p for p in pts if p.measured.concurrency == level]
            out.extend(in_sample_rows(test, model, {**profiles, name: refit}))
    return out
