"""Fit engine efficiency profiles to measured sweeps; report the error they leave.

    python -m crossover.advise.calibrate \\
        --sweep docs/results/h200/vllm-a/sweep.json --sweep docs/results/h200/sweep/sweep.json \\
        --sweep docs/results/h200/sglang-a/sweep.json --exclude sglang-incremental \\
        --model llama-3.1-8b --out src/crossover/advise/data/calibration.yaml

One profile per engine and mode (CUDA graphs on, or off: ``vllm``, ``vllm-nographs``,
...). Its terms (``efficiency.py``) are fitted by least squares on log(predicted /
measured) of output tokens/s and decode tokens/s per user over every valid level
(repeats averaged; sessions pooled: a profile measured in several sweeps is fitted to all
of them, and the held-out targets below say how well one session predicts another;
``--exclude`` leaves out a target the advice does not model, named in the constants).
``bandwidth_efficiency`` is not fitted: it is the copy rate the sweep measured on its GPU
(``roofline.bandwidth_gb_s``) over the datasheet figure; the eager all-reduce floor of the
``-nographs`` profiles is commbench's (``--allreduce``). A profile with fewer than
``fit.FULL_FIT_LEVELS`` levels fits only its overheads (and, without a graphs-on sibling
to inherit the rest from, its prefill rate).

Then, honestly: every level of a profile predicted by a fit without that level
(held-out levels); every target of a profile fitted to several predicted by a fit to the
others (held-out targets: vLLM bf16 <-> FP8 and across two sessions, llama.cpp across two
sweeps); and the figures of ``data/references.yaml``, never fitted. The markdown tables
(``fit_report.py``) go to stdout.
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

from crossover.advise import cost, efficiency
from crossover.advise.accuracy import Row, regime, summarize, worst
from crossover.advise.cost import AllReduceCurve, Layout
from crossover.advise.efficiency import Calibration, Source
from crossover.advise.fit import Point, fit, fit_moe, heldout, heldout_moe, in_sample_rows
from crossover.advise.fit_report import Report, at_bound, markdown
from crossover.advise.hardware import find_gpu, system_from_flags
from crossover.advise.model import load_model
from crossover.advise.results import read_sweep, results_of
from crossover.analysis.schema import SweepFile
from crossover.engines import registry
from crossover.errors import UsageError, argument_parser
from crossover.files import check_output_file, write_output

__all__ = [
    "Report",
    "at_bound",
    "calibrate",
    "command_line",
    "dump",
    "eager_allreduce_floor_us",
    "load_points",
    "main",
    "markdown",
    "parser",
    "reference_rows",
    "run",
]


# Engines never measured borrow a measured engine's profile (said in the advice).
def _borrow() -> dict[str, str]:
    pairs = [(s.name, t.borrows_profile) for s in registry.specs() if (t := s.advise)]
    lent = [(name, other) for name, other in pairs if other is not None]
    return dict(lent + [(f"{n}-nographs", f"{o}-nographs") for n, o in lent])


BORROW: dict[str, str] = _borrow()
ALLREDUCE_TABLE = "data/allreduce/h200x2-nvlink.json"
SMALL_MESSAGE_BYTES = 64 * 1024


def _roofline_bandwidth(sweep: SweepFile, gpu: str) -> float:
    """The sweep's measured copy rate over the datasheet bandwidth (cost's default if none)."""
    rates = [r.bandwidth_gb_s for r in sweep.roofline]
    if not rates:
        return cost.BANDWIDTH_EFFICIENCY
    return sum(rates) / len(rates) / find_gpu(gpu).memory_bandwidth_gbs


def _excluded(spec: str, path: Path, target: str) -> bool:
    """``TARGET`` (in any sweep) or ``SWEEP:TARGET`` (SWEEP: the sweep's folder name)."""
    where, sep, name = spec.rpartition(":")
    if not sep:
        return spec == target
    folder = path.parent.name if path.suffix == ".json" else path.name
    return name == target and where in (folder, str(path))


def load_points(
    paths: Sequence[Path], gpu: str | None = None, exclude: Sequence[str] = ()
) -> tuple[list[Point], list[Source]]:
    """Every valid measured level of the sweeps, but for the ``exclude``d targets."""
    points: list[Point] = []
    sources: list[Source] = []
    unused = set(exclude)
    for path in paths:
        file = path / "sweep.json" if path.is_dir() else path
        sweep = read_sweep(file)
        res = results_of(sweep, file)
        left_out = sorted(
            {m.target for m in res.measured if any(_excluded(e, path, m.target) for e in exclude)}
        )
        unused -= {e for e in exclude for t in left_out if _excluded(e, path, t)}
        where = gpu or res.gpu
        if where is None:
            raise UsageError(f"{res.path}: no GPU in its roofline entries; give --gpu")
        if res.input_tokens is None or res.output_tokens is None:
            raise UsageError(f"{res.path}: no workload input/output tokens")
        bw = _roofline_bandwidth(sweep, where)
        res = res.model_copy(update={"gpu": where})
        for m in res.measured:
            if m.target in left_out:
                continue
            if m.output_tok_s and m.decode_tok_s_per_user and m.engine:
                name = efficiency.profile_name(m.engine, m.cuda_graphs)
                points.append(Point(measured=m, results=res, profile=name, bandwidth_efficiency=bw))
        sources.append(
            Source(
                path=res.path,
                gpu=where,
                targets=sorted({m.target for m in res.measured} - set(left_out)),
                excluded=left_out,
                input_tokens=res.input_tokens,
                output_tokens=res.output_tokens,
            )
        )
    if unused:
        raise UsageError(f"--exclude {', '.join(sorted(unused))}: no such target in the sweeps")
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


DEFAULT_MOE_MODEL = "qwen3-30b-a3b"


def calibrate(
    paths: Sequence[Path],
    model_name: str,
    gpu: str | None = None,
    allreduce: Path | None = None,
    command: str | None = None,
    starts: int = 3,
    exclude: Sequence[str] = (),
    moe_paths: Sequence[Path] = (),
    moe_model: str = DEFAULT_MOE_MODEL,
    moe_targets: Sequence[str] = (),
) -> Report:
    """Fit every profile the sweeps measure (but the ``exclude``d targets), then the
    held-out and reference errors. With ``moe_paths``: each of ``moe_targets`` in those
    sweeps (of ``moe_model``) fits its profile's MoE terms (per sequence and per step),
    the dense terms held."""
    model = load_model(model_name)
    points, sources = load_points(paths, gpu, exclude)
    floor = eager_allreduce_floor_us(allreduce)
    profiles = fit(points, model, floor, starts)
    moe_points: list[Point] = []
    moe_sources: list[Source] = []
    if moe_paths:
        if not moe_targets:
            raise UsageError("--moe-sweep needs --moe-target (the targets whose MoE term to fit)")
        moe_points, moe_sources = _moe_points(moe_paths, gpu, moe_targets)
        moe_facts = load_model(moe_model)
        profiles = fit_moe(moe_points, moe_facts, profiles, starts)
    in_sample = in_sample_rows(points, model, profiles)
    levels = heldout(points, model, profiles, lambda p: str(p.measured.concurrency))
    targets = heldout(points, model, profiles, lambda p: p.group)
    gpus = sorted({s.gpu for s in sources})
    cal = Calibration(
        schema_="crossover.calibration/1",
        gpu=",".join(gpus),
        model=model_name,
        command=command
        or command_line(
            paths,
            model_name,
            exclude=exclude,
            moe_paths=moe_paths,
            moe_model=moe_model,
            moe_targets=moe_targets,
        ),
        sources=sources,
        moe_sources=moe_sources,
        profiles=profiles,
        # only for what was not measured: a measured engine uses its own profile
        borrow={k: v for k, v in BORROW.items() if v in profiles and k not in profiles},
        errors={
            "in_sample": summarize(in_sample),
            "heldout_levels": summarize(levels),
            "heldout_targets": summarize(targets),
        },
        worst=worst(levels),
    )
    refs = reference_rows(cal)
    cal.errors["references"] = summarize(refs)
    moe_in: list[Row] = []
    moe_held: list[Row] = []
    if moe_points:
        moe_facts = load_model(moe_model)
        moe_in = in_sample_rows(moe_points, moe_facts, profiles)
        moe_held = heldout_moe(moe_points, moe_facts, profiles)
        cal.errors["moe_in_sample"] = summarize(moe_in)
        cal.errors["moe_heldout_levels"] = summarize(moe_held)
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
        moe_in_sample=moe_in,
        moe_heldout_levels=moe_held,
    )


def _moe_points(
    paths: Sequence[Path], gpu: str | None, targets: Sequence[str]
) -> tuple[list[Point], list[Source]]:
    """The named targets' levels of the MoE sweeps (every other target left out)."""
    everything, _ = load_points(paths, gpu)
    known = {p.measured.target for p in everything}
    unknown = sorted(set(targets) - known)
    if unknown:
        raise UsageError(
            f"--moe-target {', '.join(unknown)}: not in the MoE sweeps "
            f"(they have {', '.join(sorted(known))})"
        )
    others = sorted(known - set(targets))
    points, sources = load_points(paths, gpu, others)
    return points, sources


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


def command_line(
    paths: Sequence[Path],
    model_name: str,
    gpu: str | None = None,
    allreduce: Path | None = None,
    exclude: Sequence[str] = (),
    moe_paths: Sequence[Path] = (),
    moe_model: str = DEFAULT_MOE_MODEL,
    moe_targets: Sequence[str] = (),
) -> str:
    """The command that refits these constants (without ``--out``)."""
    parts = ["python -m crossover.advise.calibrate"]
    parts += [f"--sweep {shlex.quote(str(p))}" for p in paths]
    parts += [f"--exclude {shlex.quote(e)}" for e in exclude]
    parts.append(f"--model {shlex.quote(model_name)}")
    parts += [f"--moe-sweep {shlex.quote(str(p))}" for p in moe_paths]
    parts += [f"--moe-target {shlex.quote(t)}" for t in moe_targets if moe_paths]
    if moe_paths and moe_model != DEFAULT_MOE_MODEL:
        parts.append(f"--moe-model {shlex.quote(moe_model)}")
    if gpu:
        parts.append(f"--gpu {shlex.quote(gpu)}")
    if allreduce:
        parts.append(f"--allreduce {shlex.quote(str(allreduce))}")
    return " ".join(parts)


def parser() -> argparse.ArgumentParser:
    p = argument_parser(
        prog="python -m crossover.advise.calibrate",
        description="Fit engine efficiency profiles to sweeps; print the error tables.",
    )
    p.add_argument(
        "--sweep",
        type=Path,
        action="append",
        required=True,
        help="sweep.json or its folder (repeatable)",
    )
    p.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="[SWEEP:]TARGET",
        help="leave a measured target out of the fit (SWEEP: its folder name; repeatable)",
    )
    p.add_argument("--model", default="llama-3.1-8b", help="the swept model's shape")
    p.add_argument("--gpu", default=None, help="GPU (default: from each sweep's roofline)")
    p.add_argument(
        "--allreduce",
        type=Path,
        default=None,
        help="commbench table with eager_points (default: the 2x H200 one)",
    )
    p.add_argument(
        "--moe-sweep",
        type=Path,
        action="append",
        default=[],
        help="an MoE sweep whose --moe-target levels fit their profile's MoE terms (repeatable)",
    )
    p.add_argument(
        "--moe-target",
        action="append",
        default=[],
        help="a target of the MoE sweeps to fit the MoE terms to (repeatable)",
    )
    p.add_argument("--moe-model", default=DEFAULT_MOE_MODEL, help="the MoE sweeps' model shape")
    p.add_argument("--out", type=Path, default=None, help="write the calibration YAML here")
    return p


def run(args: argparse.Namespace) -> Report:
    """``calibrate`` for parsed arguments, recording the command that refits them."""
    command = command_line(
        args.sweep,
        args.model,
        args.gpu,
        args.allreduce,
        args.exclude,
        moe_paths=args.moe_sweep,
        moe_model=args.moe_model,
        moe_targets=args.moe_target,
    )
    return calibrate(
        args.sweep,
        args.model,
        args.gpu,
        args.allreduce,
        command + " --out PATH",
        exclude=args.exclude,
        moe_paths=args.moe_sweep,
        moe_model=args.moe_model,
        moe_targets=args.moe_target,
    )


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        sweeps = [*args.sweep, *(p / "sweep.json" for p in args.sweep)]
        check_output_file(args.out, "--out", keep=sweeps)  # not a traceback after the fit
        report = run(args)
        if args.out is not None:
            write_output(args.out, dump(report.calibration), "--out")
    except UsageError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    sys.stdout.write(markdown(report))
    return 0


if __name__ == "__main__":
    from crossover.pipes import run_tool

    run_tool(main)
