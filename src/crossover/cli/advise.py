"""``crossover advise``: ranked engine/parallelism candidates per load regime."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from crossover.cli.common import check_output_file, parse_list, write_output
from crossover.errors import UsageError


def advise_command(
    model: str = typer.Option(
        ..., "--model", help="HF config.json or folder, GGUF, or a known name"
    ),
    gpu: str | None = typer.Option(
        None,
        "--gpu",
        help="GPU name as `crossover gpus` lists it (exact: RTX-4090-Laptop, "
        "'NVIDIA GeForce RTX 4090 Laptop GPU'), or local (NVML; the default without --gpu-spec)",
    ),
    gpu_spec: str | None = typer.Option(
        None,
        "--gpu-spec",
        help="describe a GPU: memory=16GiB,bandwidth=576GB/s,bf16=82,fp8=165,fp4=..,arch=sm89 "
        "(dense TFLOPS); alone for a GPU the table lacks, beside --gpu to replace its figures",
    ),
    gpus: int = typer.Option(1, "--gpus", help="number of GPUs"),
    interconnect: str | None = typer.Option(
        None, "--interconnect", help="nvlink|pcie|pcie-no-p2p|tcp"
    ),
    quant: str | None = typer.Option(
        None,
        "--quant",
        help="narrow the weight formats, one or a comma list: bf16,fp8,fp8-block,nvfp4,"
        "int4-awq,gguf-q4_k_m,... (default: every format each engine has kernels for here)",
    ),
    engine_versions: str | None = typer.Option(
        None, "--engine-versions", help="e.g. trtllm=1.2.1,vllm=0.26.0"
    ),
    input_tokens: int = typer.Option(512, "--input-tokens"),
    output_tokens: int = typer.Option(256, "--output-tokens"),
    shared_prefix_tokens: int = typer.Option(
        0,
        "--shared-prefix-tokens",
        help="the start of every prompt that other requests share (a system prompt): engines "
        "with a prefix cache (vLLM, SGLang, TensorRT-LLM, a llama.cpp slot) skip its prefill",
    ),
    concurrency: str = typer.Option("1,8,64", "--concurrency"),
    results: Path | None = typer.Option(None, "--results", help="sweep dir with sweep.json"),
    allreduce_table: Path | None = typer.Option(
        None, "--allreduce-table", help="measured all-reduce JSON [{size_bytes, latency_us}]"
    ),
    engines: str | None = typer.Option(
        None, "--engines", help="consider only these, e.g. llamacpp,vllm (default: all)"
    ),
    reserve_gib: str | None = typer.Option(
        None,
        "--reserve-gib",
        help="GiB per GPU for everything besides weights and KV, replacing the engines' "
        "measured overheads: 1.5, or llamacpp=0.8,vllm=2",
    ),
    host_mem_bandwidth: str | None = typer.Option(
        None,
        "--host-mem-bandwidth",
        help="host memory bandwidth for llama.cpp's CPU expert offload (--n-cpu-moe): GB/s "
        "(DDR5-4800 x 2 channels: 76.8) or ddr5-dual, ddr5-dual-4800, ddr4-dual, ddr5-8ch "
        "(default: ddr5-dual, said in the row)",
    ),
    roofline: bool = typer.Option(
        False, "--roofline", help="rank by roofline upper bounds instead of calibrated estimates"
    ),
    calibration_path: Path | None = typer.Option(
        None,
        "--calibration",
        help="engine profiles fitted by python -m crossover.advise.calibrate (default: packaged)",
    ),
    explain: bool = typer.Option(
        False, "--explain", help="every ranked row's reasons, the rules and their sources"
    ),
    json_path: Path | None = typer.Option(None, "--json", help="write the advice JSON here"),
    emit_sweep_path: Path | None = typer.Option(
        None,
        "--emit-sweep",
        help="write a sweep config for the top candidates (it passes crossover sweep --check; "
        "needs the model's files: --model as a path, or --model-path)",
    ),
    model_path: list[str] | None = typer.Option(
        None,
        "--model-path",
        help="with --emit-sweep: the files each engine loads, a GGUF file (llama.cpp) and/or "
        "an HF folder or hub id ORG/NAME (vLLM, SGLang, TensorRT-LLM, transformers); repeat",
    ),
) -> None:
    """Rank engines and TP/PP layouts per load regime, with reasons and cited rules."""
    import json

    from crossover.advise import (
        AdviceRequest,
        advise,
        load_calibration,
        load_curve,
        load_model,
        load_results,
    )
    from crossover.advise.cost import host_bandwidth
    from crossover.advise.hardware import resolve_system
    from crossover.advise.memory import parse_reserve
    from crossover.advise.rules import parse_engines, parse_versions
    from crossover.advise.text import explain_lines, table_lines

    if model_path and emit_sweep_path is None:  # before the table, not after it
        raise UsageError("--model-path goes with --emit-sweep")
    host_bandwidth(host_mem_bandwidth)  # a bad figure: one line before any work
    system = resolve_system(gpu, gpus, interconnect, gpu_spec)
    request = AdviceRequest(
        system=system,
        model=load_model(model),
        quant=quant,
        engine_versions=parse_versions(engine_versions),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        shared_prefix_tokens=shared_prefix_tokens,
        concurrency=parse_list(concurrency, "--concurrency"),
        reserve_gib=parse_reserve(reserve_gib),
        host_mem_bandwidth=host_mem_bandwidth,
        predictions="roofline" if roofline else "calibrated",
        **({"engines": parse_engines(engines)} if engines else {}),
    )
    if roofline and calibration_path is not None:
        raise UsageError("--roofline and --calibration exclude each other")
    inputs = [Path(model), calibration_path, allreduce_table, results]
    inputs += [results / "sweep.json"] if results is not None else []
    check_output_file(json_path, "--json", keep=inputs)
    check_output_file(emit_sweep_path, "--emit-sweep", keep=[*inputs, json_path])
    cal = load_calibration(calibration_path) if calibration_path else None
    curve = load_curve(allreduce_table) if allreduce_table else None
    sweep = load_results(results) if results else None
    advice = advise(request, curve=curve, results=sweep, calibration=cal)
    for line in (explain_lines if explain else table_lines)(advice):
        typer.echo(line)
    if json_path is not None:
        write_output(json_path, json.dumps(advice, indent=2) + "\n", "--json")
    if emit_sweep_path is not None:
        _emit(advice, model, model_path or [], emit_sweep_path)


def _emit(advice: dict[str, Any], model: str, paths: list[str], out: Path) -> None:
    """Write the sweep config (``crossover.advise.sweep_config.sweep_for``), headed by
    the command that made it, and say what it holds."""
    import shlex
    import sys

    from crossover.advise.sweep_config import sweep_for
    from crossover.advise.text import emitted_lines

    config = sweep_for(advice, model, paths)
    command = "crossover " + shlex.join(sys.argv[1:]) if sys.argv[1:] else None
    write_output(out, config.to_yaml(command), "--emit-sweep")
    for line in emitted_lines(out, config):
        typer.echo(line)


EXAMPLE = (
    "\b\n"
    "Examples:\n"
    "  crossover advise --model gemma-3-270m --gpu H200\n"
    "  crossover advise --model qwen3-8b --gpu 'RTX 4090 Laptop'\n"
    "  crossover advise --model qwen3-8b \\\n"
    "      --gpu-spec memory=16GiB,bandwidth=576GB/s,bf16=79,arch=sm89\n"
    "  crossover advise --model llama-3.1-8b --gpu H200 --emit-sweep sweep.yaml \\\n"
    "      --model-path /models/llama-3.1-8b --model-path /models/llama-3.1-8b-f16.gguf\n"
)


def register(app: typer.Typer) -> None:
    app.command("advise", epilog=EXAMPLE)(advise_command)
