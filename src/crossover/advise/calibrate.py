"""Fit engine efficiency profiles to measured sweeps; report the error they leave.

    python -m crossover.advise.calibrate \\
        --sweep docs/results/h200/vllm-a/sweep.json --sweep docs/results/h200/sweep/sweep.json \\
        --model llama-3.1-8b --out src/crossover/advise/data/calibration.yaml

One profile per engine and mode (CUDA graphs on, or off: ``vllm``, ``vllm-nographs``,
...). Its terms (``efficiency.py``) are fitted by least squares on log(predicted /
measured) of output tokens/s and decode tokens/s per user over every valid level
(repeats averaged). ``bandwidth_efficiency`` is not fitted: it is the copy rate the sweep
measured on its GPU (``roofline.bandwidth_gb_s``) over the datasheet figure; the eager
all-reduce floor of the ``-nographs`` profiles is commbench's (``--allreduce``). A profile
with fewer than ``FULL_FIT_LEVELS`` levels fits only its overheads (and, without a
graphs-on sibling to inherit the rest from, its prefill rate).

Then, honestly: every level of a profile predicted by a fit without that level
(held-out levels); every target of a profile fitted to several predicted by a fit to the
others (held-out targets: vLLM bf16 <-> FP8, llama.cpp across two sweeps); and the
figures of ``data/references.yaml``, never fitted. The markdown tables go to stdout.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml
from pydantic import BaseModel

from crossover.advise import cost, efficiency
from crossover.advise.accuracy import REGIMES, Row, regime, rows_for, summarize, worst
from crossover.advise.cost import AllReduceCurve, Layout
from crossover.advise.efficiency import FIT_TERMS, Calibration, EngineProfile, Source
from crossover.advise.hardware import find_gpu, system_from_flags
from crossover.advise.model import ModelFacts, load_model
from crossover.advise.results import Measured, SweepResults, load_results
from crossover.errors import UsageError

FULL_FIT_LEVELS = 5
# Engines never measured borrow a measured engine's profile (said in the advice).
BORROW: dict[str, str] = {
    "sglang": "vllm",
    "trtllm": "vllm",
    "sglang-nographs": "vllm-nographs",
    "trtllm-nographs": "vllm-nographs",
}
# Terms not fitted and not inherited: the roofline's assumptions (cost.py).
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
}
ALLREDUCE_TABLE = "data/allreduce/h200x2-nvlink.json"
SMALL_MESSAGE_BYTES = 64 * 1024


class Point(BaseModel):
    """One measured (target, level) and where it came from."""

    measured: Measured
    results: SweepResults
    profile: str
    bandwidth_efficiency: float

    @property
    def group(self) -> str:
        return f"{self.results.path}:{self.measured.target}"


def _roofline_bandwidth(path: str, gpu: str) -> float:
    """The sweep's measured copy rate over the datasheet bandwidth (cost's default if none)."""
    data = json.loads(Path(path).read_text("utf-8"))
    rates = [
        float(r["bandwidth_gb_s"])
        for r in data.get("roofline") or []
        if isinstance(r, dict) and isinstance(r.get("bandwidth_gb_s"), int | float)
    ]
    if not rates:
        return cost.BANDWIDTH_EFFICIENCY
    return sum(rates) / len(rates) / find_gpu(gpu).memory_bandwidth_gbs


def load_points(paths: Sequence[Path], gpu: str | None = None) -> tuple[list[Point], list[Source]]:
    points: list[Point] = []
    sources: list[Source] = []
    for path in paths:
        res = load_results(path)
        where = gpu or res.gpu
        if where is None:
            raise UsageError(f"{res.path}: no GPU in its roofline entries; give --gpu")
        if res.input_tokens is None or res.output_tokens is None:
            raise UsageError(f"{res.path}: no workload input/output tokens")
        bw = _roofline_bandwidth(res.path, where)
        res = res.model_copy(update={"gpu": where})
        for m in res.measured:
            if m.output_tok_s and m.decode_tok_s_per_user and m.engine:
                name = efficiency.profile_name(m.engine, m.cuda_graphs)
                points.append(Point(measured=m, results=res, profile=name, bandwidth_efficiency=bw))
        sources.append(
            Source(
                path=res.path,
                gpu=where,
                targets=sorted({m.target for m in res.measured}),
                input_tokens=res.input_tokens,
                output_tokens=res.output_tokens,
            )
        )
    if not points:
        raise UsageError("no valid runs with throughput and TPOT in the given sweeps")
    return points, sources


def eager_allreduce_floor_us(table: Path | None = None) -> float:
    """Commbench's eager small-message floor: median of ``eager_points`` up to 64 KiB."""
    if table is None:
        text = resources.files("crossover.advise").joinpath(ALLREDUCE_TABLE).read_text("utf-8")
    else:
        try:
            text = table.read_text("utf-8")
        except OSError as exc:
            raise UsageError(f"--allreduce: cannot read {table}") from exc
    raw = json.loads(text)
    pts = raw.get("eager_points") if isinstance(raw, dict) else None
    small = sorted(
        float(p["latency_us"])
        for p in pts or []
        if isinstance(p, dict) and float(p.get("size_bytes", 0)) <= SMALL_MESSAGE_BYTES
    )
    if not small:
        raise UsageError(f"{table or ALLREDUCE_TABLE}: no eager_points up to 64 KiB")
    return small[len(small) // 2]


class _NoComm:
    name = "none (1 GPU)"

    def latency_us(self, size_bytes: float, n: int) -> float:
        return 0.0


def _arrays(points: list[Point], model: ModelFacts, floor_us: float) -> SimpleNamespace:
    import numpy as np

    rows: list[efficiency.Terms] = []
    for p in points:
        m, res = p.measured, p.results
        layout = Layout(tp=m.tp, pp=m.pp)
        system = system_from_flags(str(res.gpu), layout.gpus)
        curve: AllReduceCurve = cost.default_curve(system) if layout.gpus > 1 else _NoComm()
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
    if parent is not None:
        values.update({t: float(getattr(parent, t)) for t in FIT_TERMS})
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


def _rows(points: list[Point], model: ModelFacts, profiles: dict[str, EngineProfile]) -> list[Row]:
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
            out.extend(_rows(test, model, {**profiles, name: refit}))
    return out


def reference_rows(calibration: Calibration) -> list[Row]:
    """``data/references.yaml`` (never fitted) against the calibrated profiles."""
    from crossover.advise.reference import references

    out: list[Row] = []
    for ref in references():
        graphs = ref.get("cuda_graphs", True) is not False
        profile = calibration.profile(str(ref["engine"]), graphs)
        if profile is None:
            continue
        system = system_from_flags(ref["gpu"], int(ref["gpus"]), ref.get("interconnect"))
        layout = Layout(tp=int(ref.get("tp", 1)), pp=int(ref.get("pp", 1)))
        model = load_model(ref["model"])
        curve: AllReduceCurve = cost.default_curve(system) if layout.gpus > 1 else _NoComm()
        for conc, measured in sorted(ref["output_tok_s"].items()):
            pred = efficiency.predict(
                model,
                system,
                layout,
                ref["quant"],
                curve,
                profile,
                concurrency=int(conc),
                input_tokens=int(ref["input_tokens"]),
                output_tokens=int(ref["output_tokens"]),
            )
            out.append(
                Row(
                    target=str(ref["id"]),
                    engine=str(ref["engine"]),
                    profile=profile.name,
                    concurrency=int(conc),
                    regime=regime(int(conc)),
                    metric="output_tok_s",
                    predicted=pred.output_tok_s,
                    measured=float(measured),
                    error_pct=(pred.output_tok_s - measured) / measured * 100,
                    sweep="data/references.yaml",
                )
            )
    return out


class Report(BaseModel):
    calibration: Calibration
    in_sample: list[Row]
    heldout_levels: list[Row]
    heldout_targets: list[Row]
    references: list[Row]


def calibrate(
    paths: Sequence[Path],
    model_name: str,
    gpu: str | None = None,
    allreduce: Path | None = None,
    command: str | None = None,
    starts: int = 3,
) -> Report:
    """Fit every profile the sweeps measure, then the held-out and reference errors."""
    model = load_model(model_name)
    points, sources = load_points(paths, gpu)
    floor = eager_allreduce_floor_us(allreduce)
    profiles = fit(points, model, floor, starts)
    in_sample = _rows(points, model, profiles)
    levels = heldout(points, model, profiles, lambda p: str(p.measured.concurrency))
    targets = heldout(points, model, profiles, lambda p: p.group)
    gpus = sorted({s.gpu for s in sources})
    cal = Calibration(
        schema_="crossover.calibration/1",
        gpu=",".join(gpus),
        model=model_name,
        command=command
        or "python -m crossover.advise.calibrate "
        + " ".join(f"--sweep {shlex.quote(str(p))}" for p in paths)
        + f" --model {model_name}",
        sources=sources,
        profiles=profiles,
        borrow={k: v for k, v in BORROW.items() if v in profiles},
        errors={
            "in_sample": summarize(in_sample),
            "heldout_levels": summarize(levels),
            "heldout_targets": summarize(targets),
        },
        worst=worst(levels),
    )
    refs = reference_rows(cal)
    cal.errors["references"] = summarize(refs)
    return Report(
        calibration=cal,
        in_sample=in_sample,
        heldout_levels=levels,
        heldout_targets=targets,
        references=refs,
    )


def at_bound(profile: EngineProfile) -> list[str]:
    """Fitted terms that ended on a bound: the data do not pin them down."""
    out = []
    for t in profile.fitted:
        lo, hi = BOUNDS[t]
        v = float(getattr(profile, t))
        if v <= lo * 1.01 or v >= hi * 0.99:
            out.append(t)
    return out


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}%"


def markdown(report: Report) -> str:
    cal = report.calibration
    lines = ["## Fitted profiles", ""]
    lines.append(
        "| profile | points | bandwidth eff. | decode compute eff. | step us/layer | us/sequence "
        "| prefill compute eff. | prefill overhead ms | all-reduce floor us | fitted (at a bound) |"
    )
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for p in cal.profiles.values():
        bound = at_bound(p)
        fitted = ", ".join(f"{t}*" if t in bound else t for t in p.fitted)
        if p.inherited_from:
            fitted += f"; rest from {p.inherited_from}"
        lines.append(
            f"| {p.name} | {p.points} | {p.bandwidth_efficiency:.3f} "
            f"| {p.decode_compute_efficiency:.3f} | {p.step_us_per_layer:.1f} | {p.seq_us:.1f} "
            f"| {p.prefill_compute_efficiency:.3f} | {p.prefill_overhead_ms:.1f} "
            f"| {p.allreduce_floor_us:.1f} | {fitted} |"
        )
    borrowed = ", ".join(f"{k} uses {v}" for k, v in cal.borrow.items())
    lines += [
        "",
        f"Not measured, borrowed: {borrowed or 'none'}. `*`: the term ended on its bound.",
        "",
    ]
    schemes = [
        ("in-sample (fitted to these rows)", "in_sample"),
        ("held-out levels (each level refitted without it)", "heldout_levels"),
        ("held-out targets (each target refitted without it)", "heldout_targets"),
        ("references.yaml (never fitted)", "references"),
    ]
    names = sorted({k for s in cal.errors.values() for k in s.per_engine})
    lines.append("## Mean absolute error (output tok/s and decode tok/s per user)")
    lines.append("")
    lines.append("| rows | n | all | " + " | ".join(names) + " | " + " | ".join(REGIMES) + " |")
    lines.append("|---|---:|---:|" + "---:|" * (len(names) + len(REGIMES)))
    for label, key in schemes:
        s = cal.errors.get(key)
        if s is None:
            continue
        lines.append(
            f"| {label} | {s.n} | {_pct(s.mean_abs_error_pct)} | "
            + " | ".join(_pct(s.per_engine.get(n)) for n in names)
            + " | "
            + " | ".join(_pct(s.per_regime.get(r)) for r in REGIMES)
            + " |"
        )
    if cal.worst is not None:
        w = cal.worst
        lines += [
            "",
            f"Worst regime (held-out levels): **{w.profile} at {w.regime}**, "
            f"mean |error| {w.mean_abs_error_pct:.1f}% over {w.n} rows.",
        ]
    for title, rows in (
        ("Held-out levels", report.heldout_levels),
        ("Held-out targets", report.heldout_targets),
        ("References (never fitted)", report.references),
    ):
        lines += ["", f"## {title}", "", _row_table(rows)]
    return "\n".join(lines) + "\n"


def _row_table(rows: list[Row]) -> str:
    lines = [
        "| profile | target | sweep | c | metric | measured | predicted | error |",
        "|---|---|---|---:|---|---:|---:|---:|",
    ]
    for r in sorted(
        rows, key=lambda r: (r.profile or "", r.sweep or "", r.target, r.concurrency, r.metric)
    ):
        sweep = Path(r.sweep).parent.name if r.sweep and r.sweep.endswith(".json") else r.sweep
        lines.append(
            f"| {r.profile} | {r.target} | {sweep} | {r.concurrency} | {r.metric} "
            f"| {r.measured:.1f} | {r.predicted:.1f} | {r.error_pct:+.1f}% |"
        )
    return "\n".join(lines)


HEADER = (
    "# Engine efficiency profiles fitted to measured sweeps (crossover.advise.calibrate).\n"
    "# Written by the command below; refit with it rather than editing by hand.\n"
    "# Terms: crossover/advise/efficiency.py; error tables: docs/results/h200/calibration.md\n"
)


def dump(cal: Calibration) -> str:
    data = cal.model_dump(by_alias=True, mode="json")
    return HEADER + yaml.safe_dump(_rounded(data), sort_keys=False, width=100)


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m crossover.advise.calibrate",
        description="Fit engine efficiency profiles to sweeps; print the error tables.",
    )
    parser.add_argument(
        "--sweep",
        type=Path,
        action="append",
        required=True,
        help="sweep.json or its folder (repeatable)",
    )
    parser.add_argument("--model", default="llama-3.1-8b", help="the swept model's shape")
    parser.add_argument("--gpu", default=None, help="GPU (default: from each sweep's roofline)")
    parser.add_argument(
        "--allreduce",
        type=Path,
        default=None,
        help="commbench table with eager_points (default: the 2x H200 one)",
    )
    parser.add_argument("--out", type=Path, default=None, help="write the calibration YAML here")
    args = parser.parse_args(argv)
    command = (
        "python -m crossover.advise.calibrate "
        + " ".join(f"--sweep {shlex.quote(str(p))}" for p in args.sweep)
        + f" --model {shlex.quote(args.model)}"
    )
    if args.gpu:
        command += f" --gpu {shlex.quote(args.gpu)}"
    if args.allreduce:
        command += f" --allreduce {shlex.quote(str(args.allreduce))}"
    try:
        report = calibrate(
            args.sweep, args.model, args.gpu, args.allreduce, command + " --out PATH"
        )
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(dump(report.calibration), "utf-8")
    except UsageError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    sys.stdout.write(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
