"""Random-weight checkpoints of real architectures' shapes, as GGUF and HF folder.

``synth(shape, out_dir)`` writes::

    out_dir/README.txt               the random-weights warning and provenance
    out_dir/shape.json               the shape used, with its source
    out_dir/<name>-<dtype>.gguf      for llama.cpp (f16, bf16 or q8_0)
    out_dir/hf/                      for transformers / vLLM / SGLang (config, safetensors,
                                     tokenizer; config and tokenizer only if config_only,
                                     for ``--load-format dummy``)

Both share the tokenizer of a vocab-only GGUF from the pinned llama.cpp tree, so
every engine tokenizes a prompt into the same ids. A shape cut to fewer layers
(shapes.with_layers) is named ``<name>-L<n>`` in every file. Fit for performance only.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from crossover.builds.llamacpp_source import source_version, vocab_gguf
from crossover.errors import UsageError, parse_names
from crossover.models.random_weights import DTYPES, GGUF_ONLY_DTYPES, RANDOM_WEIGHTS_NOTICE
from crossover.models.shapes import ArchShape, validate_shape
from crossover.models.tensors import gguf_nbytes, tensor_specs

FORMATS = ("gguf", "hf")
# Part of ensure_synth's cache folder name: bump when the written files change.
SYNTH_RECIPE = 2  # 2: the output projection keeps whole-word rows only


@dataclass(frozen=True)
class SynthResult:
    out_dir: Path
    gguf: Path | None
    hf_dir: Path | None
    shape: ArchShape
    dtype: str
    #: per format written: (bytes, seconds)
    written: dict[str, tuple[int, float]] = field(default_factory=dict)


def parse_formats(text: str) -> tuple[str, ...]:
    formats = tuple(parse_names(text, "--format", lower=True))
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise UsageError(f"--format must be a comma list of {', '.join(FORMATS)}; got {text!r}")
    return formats


def check_options(formats: tuple[str, ...], dtype: str, config_only: bool) -> None:
    """UsageError for a dtype or config-only that a format cannot hold."""
    if dtype not in DTYPES:
        raise UsageError(f"--dtype must be one of {', '.join(DTYPES)}; got {dtype!r}")
    if dtype in GGUF_ONLY_DTYPES and "hf" in formats:
        raise UsageError(f"--dtype {dtype} is GGUF only; use --format gguf (hf: f16 or bf16)")
    if config_only and "gguf" in formats:
        raise UsageError("--config-only writes an HF folder without weights; use --format hf")


def _bytes(shape: ArchShape, dtype: str, fmt: str, config_only: bool) -> int:
    if fmt == "hf":
        return 0 if config_only else sum(2 * s.numel for s in tensor_specs(shape))
    return sum(gguf_nbytes(s, dtype) for s in tensor_specs(shape))


def _prepare_out(out_dir: Path) -> None:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create output directory {out_dir}: {exc}") from exc
    if not os.access(out_dir, os.W_OK):
        raise UsageError(f"output directory {out_dir} is not writable")


def _readme(
    shape: ArchShape, dtype: str, formats: tuple[str, ...], config_only: bool = False
) -> str:
    lines = [
        "!!! " + RANDOM_WEIGHTS_NOTICE,
        "",
        f"architecture shape: {shape.name} ({shape.family}), "
        f"{shape.n_params() / 1e9:.3f} B parameters"
        + (f", {shape.n_active_params() / 1e9:.3f} B active per token" if shape.is_moe else ""),
        f"shape source: {shape.source}",
        f"hidden {shape.hidden}, layers {shape.layers}, heads {shape.heads}, kv heads "
        f"{shape.kv_heads}, head dim {shape.head_dim_}, ffn {shape.ffn}, vocab {shape.vocab}, "
        f"rope theta {shape.rope_theta}, context {shape.ctx}",
    ]
    if shape.is_moe:
        lines.append(
            f"mixture of experts: {shape.experts} experts per layer, {shape.experts_used} "
            f"per token, expert ffn {shape.expert_ffn}"
        )
    if shape.full_layers is not None:
        lines.append(
            f"LAYER CUT: {shape.layers} of the published {shape.full_layers} layers "
            "(same per-layer shape); results measure this cut model, not the full one"
        )
    lines.append(f"dtype: {dtype}; formats: {', '.join(formats)}")
    if dtype == "q8_0":
        lines.append(
            "q8_0: expert and attention matrices are Q8_0 blocks copied from one pool of "
            "random blocks drawn once and reused across tensors at shifting offsets "
            "(performance work only); embedding and output projection F16, norms and "
            "routers F32"
        )
    if config_only:
        lines.append(
            "hf: config and tokenizer only, NO WEIGHTS (for engines started with "
            "--load-format dummy, which make their own random weights)"
        )
    lines += [
        f"tokenizer: {shape.vocab_file} from the llama.cpp tree in {source_version()} "
        "(a real tokenizer)",
        "written by: crossover models synth",
        "",
    ]
    return "\n".join(lines)


def synth(
    shape: ArchShape,
    out_dir: Path,
    formats: tuple[str, ...] = FORMATS,
    dtype: str = "f16",
    progress: bool = True,
    seed: int = 0,
    config_only: bool = False,
) -> SynthResult:
    """Write the checkpoint(s); see the module docstring for the layout."""
    from rich.console import Console

    from crossover.models.synth_gguf import write_gguf
    from crossover.models.synth_hf import write_hf

    check_options(formats, dtype, config_only)
    validate_shape(shape)
    _prepare_out(out_dir)
    vocab = vocab_gguf(shape.vocab_file)
    console = Console(stderr=True, highlight=False)
    if progress:
        console.print(f"[bold yellow]warning:[/] {RANDOM_WEIGHTS_NOTICE}")
    readme = _readme(shape, dtype, formats, config_only)
    (out_dir / "README.txt").write_text(readme)
    info = shape.as_dict() | {"n_params": shape.n_params()}
    if shape.is_moe:
        info["n_active_params"] = shape.n_active_params()
    info |= {"dtype": dtype, "config_only": config_only}
    (out_dir / "shape.json").write_text(json.dumps(info, indent=2) + "\n")

    gguf_path: Path | None = None
    hf_dir: Path | None = None
    written: dict[str, tuple[int, float]] = {}
    for fmt in formats:
        total = _bytes(shape, dtype, fmt, config_only)
        label = f"writing {shape.name} {fmt} ({total / 1e9:.2f} GB)"
        started = time.perf_counter()
        with _progress(console, label, total, progress) as advance:
            if fmt == "gguf":
                gguf_path = write_gguf(
                    shape, vocab, out_dir / f"{shape.name}-{dtype}.gguf", dtype, seed, advance
                )
            else:
                hf_dir = write_hf(
                    shape, vocab, out_dir / "hf", dtype, seed, advance, config_only=config_only
                )
                (hf_dir / "README.txt").write_text(readme)
        written[fmt] = (total, time.perf_counter() - started)
    return SynthResult(out_dir, gguf_path, hf_dir, shape, dtype, written)


class _NoProgress:
    def __enter__(self) -> _Advance:
        return _Advance(None, None)

    def __exit__(self, *exc: object) -> None:
        return None


class _Advance:
    def __init__(self, bar: object, task: object) -> None:
        self.bar = bar
        self.task = task

    def __call__(self, nbytes: int) -> None:
        if self.bar is not None:
            self.bar.update(self.task, advance=nbytes)  # type: ignore[attr-defined]


class _BarProgress:
    def __init__(self, console: object, label: str, total: int) -> None:
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TimeElapsedColumn(),
            console=console,  # type: ignore[arg-type]
        )
        self.task = self.bar.add_task(label, total=total)

    def __enter__(self) -> _Advance:
        self.bar.start()
        return _Advance(self.bar, self.task)

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()


def _progress(console: object, label: str, total: int, show: bool) -> _NoProgress | _BarProgress:
    return _BarProgress(console, label, total) if show else _NoProgress()


def ensure_synth(
    arch: str, formats: tuple[str, ...] = ("gguf",), dtype: str = "f16", progress: bool = False
) -> SynthResult:
    """A known shape synthesized once into ``<cache>/models/synth/<arch>-<dtype>-rN/``, reused.

    Meant for tests and demos (``ensure_synth("tiny-llama")`` takes seconds once, then
    nothing). Formats are added to the cached folder as asked.
    """
    from crossover.builds.cache import cache_subdir, file_lock
    from crossover.models.shapes import get_shape

    shape = get_shape(arch)
    root = cache_subdir("models", "synth")
    out = root / f"{arch}-{dtype}-r{SYNTH_RECIPE}"
    gguf_path, hf_dir = out / f"{arch}-{dtype}.gguf", out / "hf"
    done = {"gguf": out / ".gguf-complete", "hf": out / ".hf-complete"}
    with file_lock(out.with_name(out.name + ".lock")):
        missing = tuple(f for f in formats if not done[f].is_file())
        if missing:
            synth(shape, out, missing, dtype, progress=progress)
            for f in missing:
                done[f].touch()
    return SynthResult(
        out,
        gguf_path if done["gguf"].is_file() else None,
        hf_dir if done["hf"].is_file() else None,
        shape,
        dtype,
    )
