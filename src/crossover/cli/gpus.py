"""``crossover gpus``: the GPU table the advisor knows, and what NVML reads here."""

from __future__ import annotations

from typing import Annotated

import typer

from crossover.words import plural


def _fig(value: float | None, width: int) -> str:
    return f"{value:>{width}g}" if value is not None else f"{'-':>{width}}"


def _local(as_json: bool) -> None:
    """Every GPU NVML reads here (every GPU of the machine), its table row, those that
    crossover's own ``CUDA_VISIBLE_DEVICES`` hides marked, and a last line saying which
    GPUs crossover uses, as advise's ``local GPUs:`` line says it."""
    import json

    from crossover.advise import nvml
    from crossover.advise.hardware import (
        gpus_assumed,
        local_entry,
        match_local,
        visible_positions,
    )

    # `gpus` takes no --gpu: its hint is the table, and the commands that do take one
    hint = (
        "`crossover gpus` without --local lists the table, and advise and plan take the "
        "GPU by name (--gpu)"
    )
    gpus = nvml.read(hint=hint).gpus
    picked, chosen = visible_positions(gpus)
    for k, gpu in enumerate(gpus):
        row = match_local(gpu)
        seen = (
            f"GPU {gpu.index}: {gpu.name}, {gpu.memory_gib:.1f} GiB, cc "
            f"{gpu.compute_capability}, {gpu.sm_count or '-'} SMs, max SM clock "
            f"{gpu.max_sm_clock_mhz or '-'} MHz"
        )
        entry = local_entry(gpu)
        matched = (
            f"{seen} -> {row.id}"
            if row is not None
            else f"{seen} -> not in the table: advise needs --gpu-spec bandwidth=..,bf16=.."
        )
        typer.echo(matched if k in picked else f"{matched} [hidden by {chosen}]")
        if as_json:
            where = {
                "nvml_index": gpu.index,
                "visible": k in picked,
                "gpus_chosen": chosen,
            }
            typer.echo(json.dumps({**entry.model_dump(), **where}, indent=2))
    said = gpus_assumed(len(gpus), [gpus[k].index for k in picked], chosen)
    typer.echo(f"local GPUs: {said}")


def gpus_command(
    name: Annotated[
        str | None, typer.Argument(help="show only rows whose id or alias contains this")
    ] = None,
    local: Annotated[
        bool, typer.Option("--local", help="read the local GPUs through NVML and match them")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the rows as JSON")] = False,
) -> None:
    """List the known GPUs (datasheet figures, dense TFLOPS; - where no source states one)."""
    import json

    from crossover.advise.hardware import _norm, closest_names, known_gpus
    from crossover.errors import UsageError

    if local:
        _local(as_json)
        return
    rows = known_gpus()
    if name:
        want = _norm(name)
        rows = [r for r in rows if any(want in _norm(a) for a in (r.id, *r.aliases))]
        if not rows:  # "0 GPUs" and exit 0 read as an empty table, not as a typo
            close = closest_names(name)
            near = f"closest: {', '.join(close)}" if close else "no close name"
            raise UsageError(
                f"no GPU's name contains {name!r}; {near} (crossover gpus lists the "
                f"{len(known_gpus())} known)"
            )
    if as_json:
        typer.echo(json.dumps([r.model_dump() for r in rows], indent=2))
        return
    typer.echo(
        f"{'GPU':<22} {'form':<11} {'arch':<18} {'cc':>6} {'GiB':>5} {'GB/s':>6} "
        f"{'bf16':>7} {'fp8':>7} {'fp4':>7}  (dense TFLOPS)"
    )
    for r in rows:
        typer.echo(
            f"{r.id:<22} {r.form:<11} {r.arch:<18} {r.compute_capability:>6} "
            f"{r.memory_gib:>5g} {_fig(r.memory_bandwidth_gbs, 6)} {_fig(r.bf16_tflops, 7)} "
            f"{_fig(r.fp8_tflops, 7)} {_fig(r.fp4_tflops, 7)}"
            + (f"  engines: {', '.join(r.engines)}" if r.engines else "")
        )
    typer.echo(
        f"{plural(len(rows), 'GPU')}; sources: crossover gpus --json. A GPU not listed: "
        "crossover advise --gpu-spec memory=..GiB,bandwidth=..GB/s,bf16=..,arch=smXY"
    )


EXAMPLE = (
    "\b\n"
    "Examples:\n"
    "  crossover gpus\n"
    "  crossover gpus laptop\n"
    "  crossover gpus 'RTX 4090' --json\n"
    "  crossover gpus --local\n"
)


def register(app: typer.Typer) -> None:
    app.command("gpus", epilog=EXAMPLE)(gpus_command)
