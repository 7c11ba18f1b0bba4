"""``crossover engines install|which``: engines built from pinned source or pinned wheels."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from crossover.errors import UsageError

if TYPE_CHECKING:
    from crossover.engines.spec import EngineSpec, InstallTraits


def _check(engine: str) -> tuple[EngineSpec, InstallTraits]:
    """The spec of an engine ``crossover engines install`` gets, and how it gets it."""
    from crossover.engines import registry

    spec = registry.ENGINES.get(engine)
    buildable = ", ".join(registry.with_trait("install"))
    if spec is None:
        raise UsageError(f"unknown engine {engine!r} to build; buildable: {buildable}")
    if spec.install is None:  # a known engine, installed its own way
        raise UsageError(
            f"crossover does not build or install {spec.display_name} (it comes from its own "
            f"package; `crossover engines list` shows where its program is); buildable: "
            f"{buildable}"
        )
    return spec, spec.install


def install(
    engine: Annotated[str, typer.Argument(help="engine to build or install (llamacpp, triton)")],
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
    python: Annotated[
        str | None,
        typer.Option(help="triton: the Python the backend stub runs (default: this one)"),
    ] = None,
    engine_python: Annotated[
        str | None,
        typer.Option(
            help="triton: an interpreter whose packages (torch, vLLM) the stub may import, "
            "after its own NumPy 1.26"
        ),
    ] = None,
    llamacpp: Annotated[
        bool,
        typer.Option(
            "--llamacpp/--no-llamacpp",
            help="triton: build libllama.so and the llama.cpp bindings for the stub",
        ),
    ] = True,
    wheels: Annotated[
        Path | None,
        typer.Option(
            help="triton, without a network: a folder with the nvidia-pytriton wheel and the "
            "stub environment's (NumPy 1.26.4, typing-extensions, diskcache, Jinja2, "
            "MarkupSafe, for the stub's Python)"
        ),
    ] = None,
) -> None:
    """Build the engine from its pinned source, or install its pinned wheel (cached;
    instant when already done)."""
    import time

    spec, how = _check(engine)
    if wheels is not None and how.kind != "wheel":
        raise UsageError("--wheels is for triton (llama.cpp builds from its pinned source)")
    from crossover.engines.install import cached_program

    started = time.monotonic()
    name = spec.default_executable[0]
    before = cached_program(spec)
    if how.kind == "wheel":
        path = _install_triton(
            cuda, cuda_arch, jobs, quiet, python, engine_python, llamacpp, wheels
        )
    else:
        from crossover.builds.llamacpp import ensure_llama_server

        built = ensure_llama_server(cuda, progress=not quiet, cuda_arch=cuda_arch, jobs=jobs)
        path = str(built)
    if not quiet:
        if before is not None and Path(path) == before:  # nothing was built or installed
            typer.echo(f"{name} already {how.done} (cached), nothing to do", err=True)
        else:
            typer.echo(f"{name} ready in {time.monotonic() - started:.1f} s", err=True)
    typer.echo(path)


def _install_triton(
    cuda: bool | None,
    cuda_arch: str | None,
    jobs: int | None,
    quiet: bool,
    python: str | None,
    engine_python: str | None,
    llamacpp: bool,
    wheels: Path | None = None,
) -> str:
    from crossover.builds.libllama import ensure_libllama
    from crossover.builds.triton import ensure_triton

    if llamacpp:
        ensure_libllama(cuda, progress=not quiet, cuda_arch=cuda_arch, jobs=jobs)
    inst = ensure_triton(python, engine_python, progress=not quiet, wheels=wheels)
    return str(inst.tritonserver)


def which(engine: Annotated[str, typer.Argument(help="engine (llamacpp, triton)")]) -> None:
    """Print the path of the built engine binary; exit 2 if it is not built yet."""
    from crossover.engines.install import cached_program, install_hint

    spec, how = _check(engine)
    path = cached_program(spec)
    if path is None:
        program = spec.default_executable[0]
        raise UsageError(f"{program} is not {how.done} yet: run `{install_hint(spec)}`")
    typer.echo(str(path))


def list_engines() -> None:
    """Every engine crossover launches, and where its program is here (or how to get it)."""
    import shutil

    from crossover.engines import registry
    from crossover.engines.install import cached_program, install_hint
    from crossover.sweep.check import importable, python_module

    for spec in registry.specs():
        program = spec.default_executable[0]
        found: str | None = shutil.which(program)
        how = f"not found ({program} on PATH)"
        if found is None and spec.install is not None:
            built = cached_program(spec)
            found = str(built) if built else None
            how = f"not {spec.install.done}: {install_hint(spec)}"
        # a `python3 -m PKG` engine is here only where that python finds PKG
        module = python_module(list(spec.default_executable))
        if found is not None and module is not None and not importable(found, module, {}):
            how = f"not found ({found} cannot import {module})"
            found = None
        typer.echo(f"{spec.name:<13} {spec.display_name:<20} {found or how}")


INSTALL_EXAMPLE = (
    "\b\n"
    "Examples:\n"
    "  crossover engines install llamacpp          # CUDA when nvcc and a GPU are here\n"
    "  crossover engines install llamacpp --cpu -j 2\n"
    "  crossover engines install triton            # tritonserver 2.51 + llama.cpp bindings\n"
    "  crossover engines install triton --no-llamacpp --python /usr/bin/python3.12 \\\n"
    "      --engine-python /opt/venv/bin/python    # vLLM in the Python backend\n"
)
WHICH_EXAMPLE = "\b\nExample:\n  crossover engines which llamacpp\n"
LIST_EXAMPLE = "\b\nExample:\n  crossover engines list\n"


def register(app: typer.Typer) -> None:
    sub = typer.Typer(
        help="Build serving engines from pinned source and locate them.", no_args_is_help=True
    )
    sub.command("install", epilog=INSTALL_EXAMPLE)(install)
    sub.command("which", epilog=WHICH_EXAMPLE)(which)
    sub.command("list", epilog=LIST_EXAMPLE)(list_engines)
    app.add_typer(sub, name="engines")
