"""``crossover plan``: write everything needed to build and serve one configuration."""

from __future__ import annotations

from pathlib import Path

import typer

from crossover.words import plural


def plan_command(
    engine: str = typer.Option(
        ..., "--engine", help="trtllm|triton|vllm|sglang|llamacpp|transformers"
    ),
    model: str = typer.Option(
        ..., "--model", help="HF folder/config.json, GGUF, hub id or known name"
    ),
    out: Path = typer.Option(..., "--out", help="directory to write the plan into"),
    tp: int = typer.Option(1, "--tp"),
    pp: int = typer.Option(1, "--pp"),
    quant: str | None = typer.Option(None, "--quant"),
    max_concurrency: int = typer.Option(64, "--max-concurrency"),
    max_seq_len: int = typer.Option(4096, "--max-seq-len"),
    trtllm_version: str = typer.Option("1.2.1", "--trtllm-version"),
    bls: bool = typer.Option(False, "--bls", help="add tensorrt_llm_bls to the Triton repo"),
    no_cuda_graphs: bool = typer.Option(False, "--no-cuda-graphs"),
    port: int = typer.Option(8000, "--port"),
    engine_dir: str = typer.Option(
        "/models/trtllm_engine", "--engine-dir", help="Triton: absolute engine path"
    ),
    hosted: str = typer.Option(
        "tensorrtllm",
        "--hosted",
        help="Triton: tensorrtllm (the ensemble), or llamacpp / vllm in the Python backend",
    ),
    instances: int | None = typer.Option(
        None, "--instances", min=1, help="Triton Python backend: model instances (default 1)"
    ),
    load_format: str | None = typer.Option(
        None,
        "--load-format",
        help="vLLM (--engine vllm, or triton --hosted vllm): e.g. dummy, random weights "
        "from a config-only folder (for measuring)",
    ),
) -> None:
    """Build/serve scripts, engine configs, a Triton repository, and plan.json."""
    from crossover.plan import PlanRequest, make_plan, write_plan

    plan = make_plan(
        PlanRequest(
            engine=engine,
            model=model,
            tp=tp,
            pp=pp,
            quant=quant,
            max_concurrency=max_concurrency,
            max_seq_len=max_seq_len,
            trtllm_version=trtllm_version,
            bls=bls,
            cuda_graphs=not no_cuda_graphs,
            port=port,
            engine_dir=engine_dir,
            hosted=hosted,
            instances=instances,
            load_format=load_format,
        )
    )
    written = write_plan(plan, out)
    typer.echo(f"wrote {plural(len(written), 'file')} to {out}")
    for note in plan.plan["notes"]:
        typer.echo(f"note: {note}")


EXAMPLE = (
    "\b\nExamples:\n  crossover plan --engine vllm --model gemma-3-270m --out plan-vllm\n"
    "  crossover plan --engine triton --hosted llamacpp --model gemma.gguf --out plan-triton\n"
)


def register(app: typer.Typer) -> None:
    app.command("plan", epilog=EXAMPLE)(plan_command)
