"""``crossover engines install|which``: engines built from pinned source."""

from __future__ import annotations

from typing import Annotated

import typer

from crossover.errors import UsageError

_BUILDABLE = ("llamacpp",)


def _check(engine: str) -> None:
    if engine not in _BUILDABLE:
        raise UsageError(f"unknown engine {engine!r} to build; buildable: {', '.join(_BUILDABLE)}")


def install(
    engine: Annotated[str, typer.Argument(help="engine to build (llamacpp)")],
    cuda: Annotated[
        bool | None,
        typer.Option(
            "--cuda/--cpu", help="force a CUDA or CPU build (default: CUDA if nvcc and a GPU)"
        ),
    ] = None,
    cuda_arch: Annotated[
        str | None, typer.Option(help="CUDA compute capability, e.g. 90 (default: from nvidia-smi)")
    ] = None,
    jobs: Annotated[
        int | None, typer.Option("--jobs", "-j", min=1, help="parallel compile jobs")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress output")] = False,
) -> None:
    """Build the engine from its pinned source (cached; instant when already built)."""
    import time

    from crossover.builds.llamacpp import ensure_llama_server

    _check(engine)
    started = time.monotonic()
    path = ensure_llama_server(cuda, progress=not quiet, cuda_arch=cuda_arch, jobs=jobs)
    if not quiet:
        typer.echo(f"llama-server ready in {time.monotonic() - started:.1f} s", err=True)
    typer.echo(str(path))


def which(engine: Annotated[str, typer.Argument(help="engine (llamacpp)")]) -> None:
    """Print the path of the built engine binary; exit 2 if it is not built yet."""
    from crossover.builds.llamacpp import find_llama_server

    _check(engine)
    path = find_llama_server()
    if path is None:
        raise UsageError("llama-server is not built yet: run `crossover engines install llamacpp`")
    typer.echo(str(path))


INSTALL_EXAMPLE = (
    "\b\n"
    "Examples:\n"
    "  crossover engines install llamacpp          # CUDA when nvcc and a GPU are here\n"
    "  crossover engines install llamacpp --cpu -j 2\n"
)
WHICH_EXAMPLE = "\b\nExample:\n  crossover engines which llamacpp\n"


def register(app: typer.Typer) -> None:
    sub = typer.Typer(
        help="Build serving engines from pinned source and locate them.", no_args_is_help=True
    )
    sub.command("install", epilog=INSTALL_EXAMPLE)(install)
    sub.command("which", epilog=WHICH_EXAMPLE)(which)
    app.add_typer(sub, name="engines")
