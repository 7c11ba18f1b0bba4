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
with fewer than ``fit.FULL_FIT_LEVELS`` levels fits only its overheads (and, without a
graphs-on sibling to inherit the rest from, its prefill rate).

Then, honestly: every level of a profile predicted by a fit without that level
(held-out levels); every target of a profile fitted to several predicted by a fit to the
others (held-out targets: vLLM bf16 <-> FP8, llama.cpp across two sweeps); and the
figures of ``data/references.yaml``, never fitted. The markdown tables go to stdout.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from crossover.advise import cost, efficiency
from crossover.advise.accuracy import REGIMES, Row, regime, summarize, worst
from crossover.advise.cost import AllReduceCurve, Layout
from crossover.advise.efficiency import FIT_TERMS, Calibration, EngineProfile, Source
from crossover.advise.fit import BOUNDS, Point, fit, heldout, in_sample_rows
from crossover.advise.hardware import find_gpu, system_from_flags
from crossover.advise.model import load_model
from crossover.advise.results import STALL_TTFT_RATIO, load_results
from crossover.engines import registry
from crossover.errors import UsageError


# Engines never measured borrow a measured engine's profile (said in the advice).
def _borrow() -> dict[str, str]:
    pairs = [(s.name, t.borrows_profile) for s in registry.specs() if (t := s.advise)]
    lent = [(name, other) for name, other in pairs if other is not None]
    return dict(lent + [(f"{n}-nographs", f"{o}-nographs") for n, o in lent])


BORROW: dict[str, str] = _borrow()
ALLREDUCE_TABLE = "data/allreduce/h200x2-nvlink.json"
SMALL_MESSAGE_BYTES = 64 * 1024


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
        curve: AllReduceCurve = cost.default_curve(system) if layout.gpus > 1 else cost.NoComm()
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
    stalled: list[str] = []  # "target c=N: k of n repeats" left out as stalls


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
    in_sample = in_sample_rows(points, model, profiles)
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
    stalled = [
        f"{m.target} c={m.concurrency}: {m.stalled} of {m.runs + m.stalled} repeats"
        for m in (p.measured for p in points)
        if m.stalled
    ]
    return Report(
        calibration=cal,
        in_sample=in_sample,
        heldout_levels=levels,
        heldout_targets=targets,
        references=refs,
        stalled=stalled,
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
        elif set(p.fitted) != set(FIT_TERMS):
            fitted += "; rest: roofline defaults"
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
    if report.stalled:
        lines += [
            "Left out as stalls (TTFT p50 at least "
            f"{STALL_TTFT_RATIO:g}x the level's fastest repeat): "
            + "; ".join(report.stalled)
            + ".",
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
