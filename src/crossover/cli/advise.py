"""``crossover advise``: ranked engine/parallelism candidates per load regime."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from crossover.errors import UsageError


def parse_int_list(text: str, flag: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise UsageError(f"{flag} wants comma-separated integers, got {text!r}") from exc
    if not values or min(values) < 1:
        raise UsageError(f"{flag} wants positive integers, got {text!r}")
    return values


def parse_versions(text: str | None) -> dict[str, str]:
    from crossover.advise.rules import ENGINES, version_key

    out: dict[str, str] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        engine, sep, version = item.partition("=")
        engine = (
            engine.strip()
            .lower()
            .replace("tensorrt-llm", "trtllm")
            .replace("llama.cpp", "llamacpp")
        )
        if not sep or engine not in ENGINES or not version.strip():
            raise UsageError(
                f"--engine-versions wants ENGINE=VERSION[,...] with ENGINE in "
                f"{', '.join(ENGINES)}; got {item!r}"
            )
        version_key(version)
        out[engine] = version.strip()
    return out


def parse_engines(text: str) -> list[str]:
    from crossover.advise.rules import ENGINES

    names = [x.strip().lower() for x in text.split(",") if x.strip()]
    bad = [n for n in names if n not in ENGINES]
    if bad or not names:
        raise UsageError(f"--engines wants a comma list of {', '.join(ENGINES)}; got {text!r}")
    return names


def _print(advice: dict[str, Any]) -> None:
    echo = typer.echo
    hw, model = advice["hardware"], advice["model"]
    echo(
        f"{hw['count']}x {hw['gpu']} ({hw['interconnect']}), {model['name']} "
        f"{model['params'] / 1e9:.2f}B params, quant {model['quant']}"
    )
    for rec in advice["recommendations"]:
        fig = rec["measured"] if rec["figures_from"] == "measured" else rec["predicted"]
        per_user, total = fig.get("decode_tok_s_per_user"), fig.get("output_tok_s")
        cfg = rec["config"]
        echo(
            f"  {rec['regime']:>4} c={rec['concurrency']:<4} #{rec['rank']} "
            f"{rec['engine']:<12} tp={cfg['tp']} pp={cfg['pp']}  "
            + (f"{per_user:7.0f} tok/s/user " if per_user else "        - tok/s/user ")
            + (f"{total:8.0f} tok/s total " if total else "         - tok/s total ")
            + (
                f"(measured: {rec['measured']['target']}) "
                if rec["figures_from"] == "measured"
                else f"(predicted; ranked at {rec['ranked_by']['value']:.0f}) "
                if rec["ranked_by"]["scale"] is not None
                else "(predicted) "
            )
            + f"[{', '.join(r['id'] for r in rec['rules'][:4])}]"
        )
    shown: set[str] = set()
    rejected = advice["rejected"]
    if rejected:
        echo(f"rejected {len(rejected)} candidates, e.g.:")
    for row in rejected:
        key = f"{row['engine']}:{row['rule']}"
        if key not in shown:
            shown.add(key)
            cfg = row["config"]
            echo(
                f"  {row['engine']} tp={cfg['tp']} pp={cfg['pp']}: {row['reason']} [{row['rule']}]"
            )
    for note in advice["notes"]:
        echo(f"note: {note}")
    for cmp in advice["comparisons"]:
        err = cmp["error_pct"].get("output_tok_s")
        if err is not None:
            echo(f"measured {cmp['target']} c={cmp['concurrency']}: prediction error {err:+.0f}%")


def advise_command(
    model: str = typer.Option(
        ..., "--model", help="HF config.json or folder, GGUF, or a known name"
    ),
    gpu: str | None = typer.Option(None, "--gpu", help="GPU name (default: read NVML)"),
    gpus: int = typer.Option(1, "--gpus", help="number of GPUs"),
    interconnect: str | None = typer.Option(
        None, "--interconnect", help="nvlink|pcie|pcie-no-p2p|tcp"
    ),
    quant: str | None = typer.Option(
        None, "--quant", help="bf16|fp8|fp8-block|nvfp4|int4-awq|gguf-q4_k_m|..."
    ),
    engine_versions: str | None = typer.Option(
        None, "--engine-versions", help="e.g. trtllm=1.2.1,vllm=0.26.0"
    ),
    input_tokens: int = typer.Option(512, "--input-tokens"),
    output_tokens: int = typer.Option(256, "--output-tokens"),
    concurrency: str = typer.Option("1,8,64", "--concurrency"),
    results: Path | None = typer.Option(None, "--results", help="sweep dir with sweep.json"),
    allreduce_table: Path | None = typer.Option(
        None, "--allreduce-table", help="measured all-reduce JSON [{size_bytes, latency_us}]"
    ),
    engines: str | None = typer.Option(
        None, "--engines", help="consider only these, e.g. llamacpp,vllm (default: all)"
    ),
    json_path: Path | None = typer.Option(None, "--json", help="write the advice JSON here"),
    emit_sweep_path: Path | None = typer.Option(
        None, "--emit-sweep", help="write a sweep config for the top candidates"
    ),
) -> None:
    """Rank engines and TP/PP layouts per load regime, with reasons and cited rules."""
    import json

    import yaml

    from crossover.advise import (
        AdviceRequest,
        advise,
        emit_sweep,
        load_curve,
        load_model,
        load_results,
        system_from_flags,
        system_from_nvml,
    )

    system = system_from_flags(gpu, gpus, interconnect) if gpu else system_from_nvml()
    if gpu is None and interconnect is not None:
        from crossover.advise.hardware import INTERCONNECTS

        if interconnect not in INTERCONNECTS:
            raise UsageError(f"--interconnect must be one of {', '.join(INTERCONNECTS)}")
        system = system.model_copy(update={"interconnect": interconnect})
    request = AdviceRequest(
        system=system,
        model=load_model(model),
        quant=quant,
        engine_versions=parse_versions(engine_versions),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        concurrency=parse_int_list(concurrency, "--concurrency"),
        **({"engines": parse_engines(engines)} if engines else {}),
    )
    curve = load_curve(allreduce_table) if allreduce_table else None
    sweep = load_results(results) if results else None
    advice = advise(request, curve=curve, results=sweep)
    _print(advice)
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(advice, indent=2) + "\n", "utf-8")
    if emit_sweep_path is not None:
        config = emit_sweep(advice, model)
        emit_sweep_path.parent.mkdir(parents=True, exist_ok=True)
        emit_sweep_path.write_text(yaml.safe_dump(config.model_dump(), sort_keys=False), "utf-8")


def register(app: typer.Typer) -> None:
    app.command("advise")(advise_command)
