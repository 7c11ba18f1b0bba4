"""A sweep's figures predicted before it runs, to be committed and then measured against.

For each target (an engine, its weight format, its concurrency levels) this prints what
the cost model computes, unedited: the calibrated estimate (the engine's profile from
``data/calibration.yaml``, or the profile it borrows where the engine was never
measured) beside the roofline upper bound (``cost.predict``). For a mixture of experts
the decode read is the dense weights plus the experts the batch touches under uniform
routing (``cost.touched_experts``) plus the KV cache; compute is 2 x active parameters
per token. ``python -m crossover.advise.forecast --help`` for the flags; the H200 MoE
prediction in docs/results/h200/moe/ was written by it.
"""

from __future__ import annotations

import datetime as dt
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from crossover.advise import cost, efficiency, memory
from crossover.advise.cost import Layout
from crossover.advise.efficiency import Calibration, load_calibration
from crossover.advise.hardware import System, system_from_flags
from crossover.advise.model import ModelFacts, load_model
from crossover.advise.rules import ENGINES
from crossover.errors import UsageError, argument_parser, parse_list, unknown_choice
from crossover.files import check_output_file, write_output

SCHEMA = "crossover.forecast/1"
# a quant suffix: the GGUF keeps token embeddings and output head in F16 (2 bytes/param)
F16_EMBEDDINGS = "+f16-embeddings"


class ForecastTarget(BaseModel):
    name: str
    engine: str
    quant: str  # a cost.BYTES_PER_PARAM key, optionally with F16_EMBEDDINGS
    concurrency: list[int]


class ForecastRow(BaseModel):
    target: str
    engine: str
    quant: str
    concurrency: int
    batch: int
    profile: str | None  # None: no profile, the row is the roofline
    profile_note: str
    experts_touched_per_layer: float | None
    read_gb_per_step: float  # weights touched + KV, the whole batch, one decode step
    step_ms: float
    decode_tok_s_per_user: float
    output_tok_s: float
    total_tok_s: float
    bound: str
    roofline_step_ms: float
    roofline_output_tok_s: float
    roofline_total_tok_s: float


def parse_target(text: str, default_levels: list[int]) -> ForecastTarget:
    """``NAME=ENGINE:QUANT[@C1,C2,...]``."""
    name, sep, rest = text.partition("=")
    engine, sep2, quant = rest.partition(":")
    if not (sep and sep2 and name and engine and quant):
        raise UsageError(f"--target {text!r}: want NAME=ENGINE:QUANT[@C1,C2,...]")
    quant, at, levels = quant.partition("@")
    conc = parse_list(levels, f"--target {text!r}") if at else default_levels
    if engine not in ENGINES:  # else "no memory figures for engine 'x' in memory.yaml"
        raise UsageError(f"--target {text!r}: {unknown_choice('engine', engine, ENGINES)}")
    base = quant.removesuffix(F16_EMBEDDINGS)
    if base not in cost.BYTES_PER_PARAM:
        raise UsageError(f"--target {text!r}: unknown quant {base!r}")
    return ForecastTarget(name=name, engine=engine, quant=quant, concurrency=conc)


def checkpoint(model: ModelFacts, quant: str) -> tuple[ModelFacts, str]:
    """The model as its checkpoint would read, and the plain quant name.

    ``gguf-X+f16-embeddings``: the byte counts a GGUF header would give when every
    layer tensor is X and the token embeddings and output head are F16."""
    if not quant.endswith(F16_EMBEDDINGS):
        return model, quant
    base = quant.removesuffix(F16_EMBEDDINGS)
    if not base.startswith("gguf-"):
        raise UsageError(f"{quant}: {F16_EMBEDDINGS} applies to GGUF quants")
    bpp = cost.BYTES_PER_PARAM[base]
    body = model.params - model.embedding_params
    facts = model.model_copy(
        update={
            "weight_bytes": int(body * bpp + model.embedding_params * 2),
            "expert_bytes": int(model.expert_params * bpp) if model.is_moe else None,
            "gguf_file_type": base.removeprefix("gguf-").upper(),
        }
    )
    return facts, base


def _profile_note(cal: Calibration, engine: str) -> tuple[str | None, str]:
    profile = cal.profile(engine)
    if profile is None:
        return None, "roofline only: no profile for this engine"
    lent = cal.borrowed(engine)
    if lent:
        return profile.name, f"estimate: borrowed {lent} profile"
    fitted = ", ".join(profile.targets) or "-"
    return profile.name, f"{profile.name} profile (fitted to {fitted})"


def forecast(
    model: ModelFacts,
    system: System,
    targets: list[ForecastTarget],
    *,
    input_tokens: int,
    output_tokens: int,
    calibration: Calibration | None = None,
    shared_prefix_tokens: int = 0,
) -> list[ForecastRow]:
    """One row per (target, concurrency): calibrated estimate and roofline bound
    (``shared_prefix_tokens``: each prompt's shared start, not prefilled by the engines
    with a prefix cache)."""
    cost.check_shared_prefix(shared_prefix_tokens, input_tokens)
    cal = calibration if calibration is not None else load_calibration()
    layout = Layout()
    curve = cost.NoComm()
    ctx = input_tokens + output_tokens / 2
    rows: list[ForecastRow] = []
    for t in targets:
        facts, quant = checkpoint(model, t.quant)
        fit = memory.fit(
            t.engine,
            facts,
            system.gpu,
            layout,
            quant,
            max(t.concurrency),
            input_tokens + output_tokens,
        )
        if not fit.weights_fit:
            raise UsageError(f"{t.name}: the weights do not fit one {system.gpu.id}")
        name, note = _profile_note(cal, t.engine)
        profile = cal.profile(t.engine)
        cached = cost.cached_prefix_tokens(t.engine, shared_prefix_tokens)
        for c in t.concurrency:
            kw: dict[str, Any] = {
                "concurrency": c,
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "max_batch": max(1, fit.max_concurrency),
                "cached_tokens": cached,
            }
            roof = cost.predict(facts, system, layout, quant, curve, **kw)
            est = (
                efficiency.predict(facts, system, layout, quant, curve, profile, **kw)
                if profile is not None
                else roof
            )
            read = cost.touched_weight_bytes(facts, quant, est.batch)
            read += est.batch * ctx * cost.kv_bytes_per_token_per_gpu(facts, layout)
            touched = (
                cost.touched_experts(facts.experts, facts.experts_per_token, est.batch)
                if facts.is_moe and facts.experts and facts.experts_per_token
                else None
            )
            rows.append(
                ForecastRow(
                    target=t.name,
                    engine=t.engine,
                    quant=t.quant,
                    concurrency=c,
                    batch=est.batch,
                    profile=name,
                    profile_note=note,
                    experts_touched_per_layer=touched,
                    read_gb_per_step=read / 1e9,
                    step_ms=est.step_ms,
                    decode_tok_s_per_user=est.decode_tok_s_per_user,
                    output_tok_s=est.output_tok_s,
                    total_tok_s=est.total_tok_s,
                    bound=est.bound,
                    roofline_step_ms=roof.step_ms,
                    roofline_output_tok_s=roof.output_tok_s,
                    roofline_total_tok_s=roof.total_tok_s,
                )
            )
    return rows


def roofline_entry(
    target: ForecastTarget, model: ModelFacts, bandwidth_gb_s: float, context_tokens: int, gpu: str
) -> dict[str, Any]:
    """The sweep YAML ``roofline:`` item for a target (RooflineFacts keys), MoE-aware."""
    facts, quant = checkpoint(model, target.quant)
    entry: dict[str, Any] = {
        "target": target.name,
        "model_bytes": float(f"{cost.weight_bytes(facts, quant):.4g}"),
        "bandwidth_gb_s": bandwidth_gb_s,
        "kv_bytes_per_token": cost.kv_bytes_per_token_per_gpu(facts, Layout()),
        "context_tokens": context_tokens,
        "gpu": gpu,
    }
    if facts.is_moe and facts.experts and facts.experts_per_token:
        entry |= {
            "experts": facts.experts,
            "experts_per_token": facts.experts_per_token,
            "expert_bytes": float(f"{cost.expert_weight_bytes(facts, quant):.4g}"),
        }
    entry["source"] = (
        f"python -m crossover.advise.forecast: {model.name} {target.quant}, "
        f"{model.params / 1e9:.2f}e9 params ({model.expert_params / 1e9:.2f}e9 in experts)"
    )
    return entry


def markdown(rows: list[ForecastRow]) -> str:
    lines = [
        "| target | engine | quant | c | experts touched /layer | GB read /step "
        "| predicted step ms | output tok/s | total tok/s | bound "
        "| roofline step ms | roofline output tok/s | profile |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---|",
    ]
    for r in rows:
        touched = (
            f"{r.experts_touched_per_layer:.1f}" if r.experts_touched_per_layer is not None else "-"
        )
        lines.append(
            f"| {r.target} | {r.engine} | {r.quant} | {r.concurrency} | {touched} "
            f"| {r.read_gb_per_step:.2f} | {r.step_ms:.2f} | {r.output_tok_s:.0f} "
            f"| {r.total_tok_s:.0f} | {r.bound} | {r.roofline_step_ms:.2f} "
            f"| {r.roofline_output_tok_s:.0f} | {r.profile_note.split(' (')[0]} |"
        )
    return "\n".join(lines) + "\n"


def document(
    model: ModelFacts,
    system: System,
    targets: list[ForecastTarget],
    rows: list[ForecastRow],
    *,
    input_tokens: int,
    output_tokens: int,
    command: str,
    date: str,
    calibration: Calibration,
    shared_prefix_tokens: int = 0,
) -> dict[str, Any]:
    notes = sorted({f"{r.target}: {r.profile_note}" for r in rows})
    return {
        "schema": SCHEMA,
        "date": date,
        "command": command,
        "gpu": system.gpu.id,
        "datasheet_bandwidth_gbs": system.gpu.memory_bandwidth_gbs,
        "model": {
            "name": model.name,
            "params": model.params,
            "active_params": model.active_params,
            "expert_params": model.expert_params,
            "experts": model.experts,
            "experts_per_token": model.experts_per_token,
            "moe_ffn": model.moe_ffn,
            "moe_layers": model.moe_layers,
            "vocab": model.vocab,
        },
        "workload": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "shared_prefix_tokens": shared_prefix_tokens,
        },
        "calibration": {
            "command": calibration.command,
            "gpu": calibration.gpu,
            "model": calibration.model,
        },
        "profiles": notes,
        "targets": [t.model_dump() for t in targets],
        "rows": [r.model_dump() for r in rows],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(
        prog="python -m crossover.advise.forecast",
        description="Predict a sweep's figures before it runs (markdown table, JSON).",
    )
    parser.add_argument("--model", required=True, help="known name, config.json or GGUF")
    parser.add_argument("--gpu", required=True)
    parser.add_argument("--input-tokens", type=int, required=True)
    parser.add_argument("--output-tokens", type=int, required=True)
    parser.add_argument(
        "--shared-prefix-tokens",
        type=int,
        default=0,
        help="each prompt's shared start, served from the prefix cache where the engine has one",
    )
    parser.add_argument("--concurrency", default="1,2,4,8,16,32,64,128,256")
    parser.add_argument(
        "--target", action="append", required=True, help="NAME=ENGINE:QUANT[@C1,C2,...]"
    )
    parser.add_argument("--calibration", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None, help="write the JSON here")
    parser.add_argument("--date", default=None, help="the date written (default: today)")
    parser.add_argument(
        "--roofline-yaml",
        type=Path,
        default=None,
        help="write the sweep's roofline: entries for these targets here",
    )
    parser.add_argument(
        "--bandwidth-gb-s",
        type=float,
        default=None,
        help="bandwidth for the roofline entries (default: the datasheet figure)",
    )
    args = parser.parse_args(argv)
    try:
        if args.input_tokens < 1 or args.output_tokens < 1:  # 0 output: a ZeroDivisionError
            raise UsageError("--input-tokens and --output-tokens must be >= 1")
        check_output_file(args.json, "--json")  # before the work, not a traceback after it
        check_output_file(args.roofline_yaml, "--roofline-yaml", keep=[args.json])
        levels = parse_list(args.concurrency, "--concurrency")
        targets = [parse_target(t, levels) for t in args.target]
        names = [t.name for t in targets]
        twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
        if twice is not None:
            raise UsageError(f"--target {twice!r} given twice: each target needs its own name")
        model = load_model(args.model)
        system = system_from_flags(args.gpu, 1)
        cal = load_calibration(args.calibration)
        rows = forecast(
            model,
            system,
            targets,
            input_tokens=args.input_tokens,
            output_tokens=args.output_tokens,
            calibration=cal,
            shared_prefix_tokens=args.shared_prefix_tokens,
        )
    except (UsageError, ValueError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    sys.stdout.write(markdown(rows))
    if args.roofline_yaml is not None:
        import yaml

        bw = args.bandwidth_gb_s or system.gpu.memory_bandwidth_gbs
        ctx = args.input_tokens + args.output_tokens
        entries = [roofline_entry(t, model, bw, ctx, system.gpu.id) for t in targets]
        text = yaml.safe_dump({"roofline": entries}, sort_keys=False, width=200)
        if not _written(args.roofline_yaml, text, "--roofline-yaml"):
            return 2
    if args.json is not None:
        command = "python -m crossover.advise.forecast " + shlex.join(
            a for a in (argv if argv is not None else sys.argv[1:])
        )
        doc = document(
            model,
            system,
            targets,
            rows,
            input_tokens=args.input_tokens,
            output_tokens=args.output_tokens,
            shared_prefix_tokens=args.shared_prefix_tokens,
            command=command,
            date=args.date or dt.date.today().isoformat(),
            calibration=cal,
        )
        if not _written(args.json, json.dumps(doc, indent=2) + "\n", "--json"):
            return 2
    return 0


def _written(path: Path, text: str, flag: str) -> bool:
    """Write an output whole (or not at all); a failure is one line, as the CLI's."""
    try:
        write_output(path, text, flag)
    except UsageError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return False
    return True


if __name__ == "__main__":
    from crossover.pipes import run_tool

    run_tool(main)
