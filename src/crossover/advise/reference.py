"""Predictions against measured figures, error reported.

The cost model is a roofline upper bound; this module says by how much it misses:

* ``compare_references()``: the figures in ``data/references.yaml`` (measured on the
  project's H200 machine, docs/results/h200/llamacpp-transformers-2026-11-30.md, and one
  published TensorRT-LLM figure, docs/engines.md, advisor rules);
* ``compare_sweep(path)``: every valid run of a real sweep (``crossover.sweep/1``);
* ``compare_allreduce(table)``: the default all-reduce model against a measured table,
  per message size and as TP=2 decode/prefill communication per step.

so the error is visible rather than tuned away. ``python -m crossover.advise.reference
--sweep docs/results/h200/sweep/sweep.json --model llama-3.1-8b`` prints the markdown
table kept in ``docs/results/h200/prediction-vs-measurement.md``.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from crossover.advise import cost
from crossover.advise.cost import AllReduceCurve, Layout
from crossover.advise.hardware import system_from_flags
from crossover.advise.model import ModelFacts, load_model
from crossover.advise.results import read_sweep, results_of, target_quant, tpot_p50
from crossover.errors import UsageError, argument_parser


class Comparison(BaseModel):
    reference: str
    engine: str
    concurrency: int
    measured_output_tok_s: float
    predicted_output_tok_s: float
    error_pct: float  # (predicted - measured) / measured
    measured_fraction_of_prediction: float
    source: str
    quant: str | None = None
    measured_tpot_ms: float | None = None  # TPOT p50
    predicted_step_ms: float | None = None


def references() -> list[dict[str, Any]]:
    text = resources.files("crossover.advise").joinpath("data/references.yaml").read_text("utf-8")
    rows: list[dict[str, Any]] = yaml.safe_load(text)["references"]
    return rows


def _row(
    ref: str,
    engine: str,
    conc: int,
    measured: float,
    pred: cost.Prediction,
    source: str,
    **extra: Any,
) -> Comparison:
    return Comparison(
        reference=ref,
        engine=engine,
        concurrency=conc,
        measured_output_tok_s=measured,
        predicted_output_tok_s=pred.output_tok_s,
        error_pct=(pred.output_tok_s - measured) / measured * 100,
        measured_fraction_of_prediction=measured / pred.output_tok_s,
        source=source,
        predicted_step_ms=pred.step_ms,
        **extra,
    )


def compare_references() -> list[Comparison]:
    out: list[Comparison] = []
    for ref in references():
        system = system_from_flags(ref["gpu"], int(ref["gpus"]), ref.get("interconnect"))
        layout = Layout(tp=int(ref.get("tp", 1)), pp=int(ref.get("pp", 1)))
        model = load_model(ref["model"])
        curve = cost.default_curve(system)
        for conc, measured in sorted(ref["output_tok_s"].items()):
            pred = cost.predict(
                model,
                system,
                layout,
                ref["quant"],
                curve,
                concurrency=int(conc),
                input_tokens=int(ref["input_tokens"]),
                output_tokens=int(ref["output_tokens"]),
            )
            out.append(
                _row(
                    ref["id"],
                    ref["engine"],
                    int(conc),
                    float(measured),
                    pred,
                    ref["source"],
                    quant=ref["quant"],
                )
            )
    return out


def compare_sweep(
    path: Path, model: ModelFacts, gpu: str | None = None, gpus: int = 1
) -> list[Comparison]:
    """Every valid (target, concurrency) of a sweep against its prediction.

    The GPU comes from the sweep's roofline entries unless given; the model is given
    (a sweep's targets name local paths). TP/PP come from the target's settings."""
    file = path / "sweep.json" if path.is_dir() else path
    data = read_sweep(file, "--sweep")
    results = results_of(data, file)
    if gpu is None:
        gpu = next((r.gpu for r in data.roofline if r.gpu), None)
    if gpu is None:
        raise UsageError(f"{results.path}: no GPU in its roofline entries; give --gpu")
    workload = data.workload or {}
    try:
        input_tokens, output_tokens = int(workload["input_tokens"]), int(workload["output_tokens"])
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{results.path}: no workload input/output tokens") from exc
    tpots = tpot_p50(data)
    out: list[Comparison] = []
    for m in results.measured:
        if m.output_tok_s is None:
            continue
        layout = Layout(tp=m.tp, pp=m.pp)
        system = system_from_flags(gpu, max(gpus, layout.gpus))
        quant = target_quant(data.target(m.target)) or "bf16"
        pred = cost.predict(
            model,
            system,
            layout,
            quant,
            cost.default_curve(system) if layout.gpus > 1 else _NO_COMM,
            concurrency=m.concurrency,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
        )
        out.append(
            _row(
                m.target,
                m.engine,
                m.concurrency,
                m.output_tok_s,
                pred,
                results.path,
                quant=quant,
                measured_tpot_ms=tpots.get((m.target, m.concurrency)),
            )
        )
    return out


class _NoComm:
    name = "none (1 GPU)"

    def latency_us(self, size_bytes: float, n: int) -> float:
        return 0.0


_NO_COMM: AllReduceCurve = _NoComm()


def markdown(rows: list[Comparison]) -> str:
    """The comparison as a markdown table (one row per target and concurrency)."""
    lines = [
        "| target | engine | quant | c | measured out tok/s | predicted out tok/s | error "
        "| measured/predicted | TPOT p50 ms | predicted step ms |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in sorted(rows, key=lambda r: (r.engine, r.reference, r.concurrency)):
        tpot = f"{r.measured_tpot_ms:.2f}" if r.measured_tpot_ms is not None else "-"
        step = f"{r.predicted_step_ms:.2f}" if r.predicted_step_ms is not None else "-"
        lines.append(
            f"| {r.reference} | {r.engine} | {r.quant or '-'} | {r.concurrency} "
            f"| {r.measured_output_tok_s:.0f} | {r.predicted_output_tok_s:.0f} "
            f"| {r.error_pct:+.0f}% | {r.measured_fraction_of_prediction:.0%} | {tpot} | {step} |"
        )
    return "\n".join(lines) + "\n"


class AllReduceRow(BaseModel):
    what: str  # "size" or "decode b=N" / "prefill N tokens"
    size_bytes: int
    measured_us: float
    predicted_us: float
    error_pct: float


def compare_allreduce(
    table: Path, model: str = "llama-3.1-8b", gpu: str = "H200", prompt_tokens: int = 200
) -> list[AllReduceRow]:
    """The default curve vs a measured table: per size, then TP decode/prefill per step
    (2 all-reduces per layer of batch x hidden x 2 bytes)."""
    measured = cost.load_curve(table)
    n = measured.gpus or 2
    default = cost.default_curve(system_from_flags(gpu, n, "nvlink"))
    facts = load_model(model)
    rows: list[AllReduceRow] = []

    def add(what: str, size: float, calls: int) -> None:
        m = measured.latency_us(size, n) * calls
        p = default.latency_us(size, n) * calls
        rows.append(
            AllReduceRow(
                what=what,
                size_bytes=int(size),
                measured_us=m,
                predicted_us=p,
                error_pct=(p - m) / m * 100,
            )
        )

    for size, _ in measured.points:
        add("size", size, 1)
    calls = 2 * facts.layers
    for batch in (1, 8, 32, 64, 128, 256):
        add(f"{facts.name} TP={n} decode step, batch {batch}", batch * facts.hidden * 2, calls)
    add(
        f"{facts.name} TP={n} prefill, {prompt_tokens} tokens",
        prompt_tokens * facts.hidden * 2,
        calls,
    )
    return rows


def allreduce_markdown(rows: list[AllReduceRow]) -> str:
    lines = [
        "| what | message bytes | measured | model | error |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        if r.what == "size":
            m, p = f"{r.measured_us:.1f} us", f"{r.predicted_us:.1f} us"
        else:
            m, p = f"{r.measured_us / 1e3:.3f} ms", f"{r.predicted_us / 1e3:.3f} ms"
        lines.append(f"| {r.what} | {r.size_bytes} | {m} | {p} | {r.error_pct:+.0f}% |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(
        prog="python -m crossover.advise.reference",
        description="Print predictions vs measurements as markdown tables.",
    )
    parser.add_argument("--sweep", type=Path, help="sweep.json (or its directory)")
    parser.add_argument("--model", default="llama-3.1-8b", help="the swept model's shape")
    parser.add_argument("--gpu", default=None, help="GPU (default: from the sweep)")
    parser.add_argument("--allreduce", type=Path, help="measured all-reduce table (JSON)")
    parser.add_argument("--references", action="store_true", help="data/references.yaml")
    args = parser.parse_args(argv)
    try:
        if args.sweep:
            sys.stdout.write(markdown(compare_sweep(args.sweep, load_model(args.model), args.gpu)))
        if args.allreduce:
            rows = compare_allreduce(args.allreduce, args.model, args.gpu or "H200")
            sys.stdout.write(allreduce_markdown(rows))
        if args.references or not (args.sweep or args.allreduce):
            sys.stdout.write(markdown(compare_references()))
    except UsageError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    return 0


if __name__ == "__main__":
    from crossover.pipes import run_tool

    run_tool(main)
