"""``crossover commbench``: all-reduce across the local GPUs -> an ``--allreduce-table``."""

from __future__ import annotations

from pathlib import Path

import typer

from crossover.errors import UsageError


def _size(text: str, flag: str) -> int:
    units = {"": 1, "b": 1, "k": 1024, "kib": 1024, "m": 1024**2, "mib": 1024**2}
    units |= {"g": 1024**3, "gib": 1024**3}
    t = text.strip().lower()
    num = t.rstrip("kmgib")
    unit = t[len(num) :]
    if not num.isdigit() or unit not in units:
        raise UsageError(f"{flag} wants a size like 1K, 64KiB, 1G; got {text!r}")
    return int(num) * units[unit]


def commbench_command(
    out: Path = typer.Option(
        Path("allreduce.json"), "--out", help="JSON table for advise --allreduce-table"
    ),
    gpus: int | None = typer.Option(None, "--gpus", help="GPUs to use (default: all local)"),
    min_size: str = typer.Option("1K", "--min-size", help="smallest message (bytes, K, M, G)"),
    max_size: str = typer.Option("1G", "--max-size", help="largest message"),
    factor: int = typer.Option(2, "--factor", help="size step: 2 or 4"),
    warmup: int = typer.Option(5, "--warmup", help="untimed calls per size and mode"),
    iters: int = typer.Option(50, "--iters", help="timed calls per size (fewer for big ones)"),
    graph_calls: int = typer.Option(20, "--graph-calls", help="all-reduces per CUDA graph"),
    eager_only: bool = typer.Option(False, "--eager-only", help="skip CUDA-graph replay"),
    gpu: str | None = typer.Option(
        None, "--gpu", help="GPU name for the link budget (default: what CUDA reports)"
    ),
) -> None:
    """NCCL all-reduce latency, algorithm and bus bandwidth, eager and CUDA-graph replayed.

    NVLink multicast stays off (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
    NVSHMEM_DISABLE_NVLS=1 for this process and its workers).
    """
    from crossover.commbench import run_commbench

    if factor not in (2, 4):
        raise UsageError(f"--factor wants 2 or 4; got {factor}")
    lo, hi = _size(min_size, "--min-size"), _size(max_size, "--max-size")
    if lo < 2 or hi < lo:
        raise UsageError(f"want 2 bytes <= --min-size <= --max-size; got {min_size}, {max_size}")
    if warmup < 0 or iters < 1 or graph_calls < 1:
        raise UsageError("want --warmup >= 0, --iters >= 1, --graph-calls >= 1")
    result = run_commbench(
        gpus=gpus,
        min_bytes=lo,
        max_bytes=hi,
        factor=factor,
        warmup=warmup,
        iters=iters,
        graph_calls=graph_calls,
        eager_only=eager_only,
        device_name=gpu,
    )
    result.write(out)
    echo = typer.echo
    echo(f"{result.gpus}x {result.device}, NCCL {result.nccl}, torch {result.torch}")
    echo(f"{'size':>12} {'graph us':>10} {'eager us':>10} {'busbw GB/s':>11} {'of link':>8}")
    eager = {p.size_bytes: p for p in result.eager_points}
    for p in result.points:
        e = eager.get(p.size_bytes)
        frac = f"{p.link_fraction:.0%}" if p.link_fraction is not None else "-"
        echo(
            f"{p.size_bytes:>12} {p.latency_us:>10.2f} "
            f"{(e.latency_us if e else float('nan')):>10.2f} {p.busbw_gbs:>11.1f} {frac:>8}"
        )
    s = result.summary
    echo(
        f"floor {s.floor_us:.1f} us (<= {s.floor_max_bytes // 1024} KiB); peak bus bandwidth "
        f"{s.peak_busbw_gbs:.0f} GB/s at {s.peak_at_bytes} B"
        + (
            f" = {s.peak_link_fraction:.0%} of {s.link_gbs_per_direction:.0f} GB/s per direction"
            if s.peak_link_fraction is not None
            else " (link bandwidth unknown for this GPU)"
        )
    )
    echo(f"wrote {out} (use: crossover advise ... --allreduce-table {out})")


EXAMPLE = (
    "\b\n"
    "Examples:\n"
    "  crossover commbench --out allreduce.json   # on a machine with 2+ GPUs\n"
    "  crossover advise --gpu H200 --gpus 2 --model llama-3.1-8b --allreduce-table allreduce.json\n"
)


def register(app: typer.Typer) -> None:
    app.command("commbench", epilog=EXAMPLE)(commbench_command)
