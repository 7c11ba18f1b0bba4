"""``crossover calibration-server`` (and ``python -m crossover.calibration``): run the
calibration server (latency model + faults)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def calibration_server(
    host: Annotated[str, typer.Option(help="address to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to bind (0: any free port)")] = 8000,
    ttft_ms: Annotated[float | None, typer.Option(help="TTFT of a lone request, ms")] = None,
    ttft_per_stream_ms: Annotated[
        float | None, typer.Option(help="extra TTFT per other request in flight, ms")
    ] = None,
    ttft_per_prompt_token_ms: Annotated[
        float | None, typer.Option(help="extra TTFT per prompt token, ms")
    ] = None,
    prefix_cache_block_tokens: Annotated[
        int | None,
        typer.Option(
            help="keep a prefix cache of blocks of this many prompt tokens: cached tokens "
            "cost no prefill time and are reported as usage.prompt_tokens_details"
        ),
    ] = None,
    itl_ms: Annotated[
        float | None, typer.Option(help="per-token gap of a lone request, ms")
    ] = None,
    itl_per_stream_ms: Annotated[
        float | None, typer.Option(help="extra per-token gap per other request in flight, ms")
    ] = None,
    tokens_per_chunk: Annotated[
        int | None, typer.Option(help="tokens per SSE chunk after the first")
    ] = None,
    natural_length: Annotated[
        int | None,
        typer.Option(help="stop early here (like EOS) unless ignore_eos/min_tokens force more"),
    ] = None,
    stall_s: Annotated[float | None, typer.Option(help="length of the 'stall' fault, s")] = None,
    model: Annotated[str | None, typer.Option(help="model name to report")] = None,
    fault: Annotated[
        list[str] | None,
        typer.Option(help="NAME or NAME:FRACTION; repeat for several faults"),
    ] = None,
    config: Annotated[
        Path | None, typer.Option(help="YAML file of CalibrationConfig settings")
    ] = None,
    cpu: Annotated[int | None, typer.Option(help="pin the server to this CPU core")] = None,
) -> None:
    """Serve a fast OpenAI-compatible fake engine with a latency model and switchable faults."""
    import os

    from crossover.calibration.config import build_config, load_config_file, parse_fault
    from crossover.calibration.server import run_server
    from crossover.errors import UsageError, check_port

    base = load_config_file(config) if config is not None else {}
    faults = [parse_fault(f) for f in fault] if fault else None
    cfg = build_config(
        base,
        ttft_ms=ttft_ms,
        ttft_per_stream_ms=ttft_per_stream_ms,
        ttft_per_prompt_token_ms=ttft_per_prompt_token_ms,
        prefix_cache_block_tokens=prefix_cache_block_tokens,
        itl_ms=itl_ms,
        itl_per_stream_ms=itl_per_stream_ms,
        tokens_per_chunk=tokens_per_chunk,
        natural_length_tokens=natural_length,
        stall_s=stall_s,
        model_name=model,
        faults=faults,
    )
    check_port(port, free=True)
    if cpu is not None:
        try:
            os.sched_setaffinity(0, {cpu})
        except (OSError, ValueError, AttributeError) as exc:
            raise UsageError(f"--cpu {cpu}: cannot pin to that core ({exc})") from None
    run_server(cfg, host, port)


EXAMPLE = "\b\nExample:\n  crossover calibration-server --port 8001 --ttft-ms 20 --itl-ms 2\n"
