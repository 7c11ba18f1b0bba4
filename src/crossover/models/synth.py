"""Random-weight checkpoints of real architectures' shapes, as GGUF and HF folder.

``synth(shape, out_dir)`` writes::

    out_dir/README.txt               the random-weights warning and provenance
    out_dir/shape.json               the shape used, with its source
    out_dir/<name>-<dtype>.gguf      for llama.cpp
    out_dir/hf/                      for transformers / vLLM (config, safetensors, tokenizer)

Both share the tokenizer of a vocab-only GGUF from the pinned llama.cpp tree, so
every engine tokenizes a prompt into the same ids. Fit for performance only.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from crossover.builds.llamacpp_source import source_version, vocab_gguf
from crossover.errors import UsageError
from crossover.models.random_weights import DTYPES, RANDOM_WEIGHTS_NOTICE
from crossover.models.shapes import ArchShape, validate_shape
from crossover.models.tensors import MATRIX_KINDS, tensor_specs

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


def parse_formats(text: str) -> tuple[str, ...]:
    formats = tuple(f.strip().lower() for f in text.split(",") if f.strip())
    bad = [f for f in formats if f not in FORMATS]
    if not formats or bad:
        raise UsageError(f"--format must be a comma list of {', '.join(FORMATS)}; got {text!r}")
    return formats


def _bytes(shape: ArchShape, dtype: str, fmt: str) -> int:
    total = 0
    for spec in tensor_specs(shape):
        n = 1
        for d in spec.shape:
            n *= d
        total += n * (2 if spec.kind in MATRIX_KINDS or fmt == "hf" else 4)
    return total


def _prepare_out(out_dir: Path) -> None:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create output directory {out_dir}: {exc}") from exc
    if not os.access(out_dir, os.W_OK):
        raise UsageError(f"output directory {out_dir} is not writable")


def _readme(shape: ArchShape, dtype: str, formats: tuple[str, ...], vocab_file: str) -> str:
    return "\n".join(
        [
            "!!! " + RANDOM_WEIGHTS_NOTICE,
            "",
            f"architecture shape: {shape.name} ({shape.family}), "
            f"{shape.n_params() / 1e9:.3f} B parameters",
            f"shape source: {shape.source}",
            f"hidden {shape.hidden}, layers {shape.layers}, heads {shape.heads}, kv heads "
            f"{shape.kv_heads}, ffn {shape.ffn}, vocab {shape.vocab}, "
            f"rope theta {shape.rope_theta}, context {shape.ctx}",
            f"dtype: {dtype}; formats: {', '.join(formats)}",
            f"tokenizer: {vocab_file} from the llama.cpp tree in {source_version()} "
            "(a real tokenizer)",
            "written by: crossover models synth",
            "",
        ]
    )


def synth(
    shape: ArchShape,
    out_dir: Path,
    formats: tuple[str, ...] = FORMATS,
    dtype: str = "f16",
    progress: bool = True,
    seed: int = 0,
) -> SynthResult:
    """Write the checkpoint(s); see the module docstring for the layout."""
    from rich.console import Console

    from crossover.models.synth_gguf import write_gguf
    from crossover.models.synth_hf import write_hf

    if dtype not in DTYPES:
        raise UsageError(f"--dtype must be one of {', '.join(DTYPES)}; got {dtype!r}")
    validate_shape(shape)
    _prepare_out(out_dir)
    vocab = vocab_gguf(shape.vocab_file)
    console = Console(stderr=True, highlight=False)
    if progress:
        console.print(f"[bold yellow]warning:[/] {RANDOM_WEIGHTS_NOTICE}")
    (out_dir / "README.txt").write_text(_readme(shape, dtype, formats, shape.vocab_file))
    (out_dir / "shape.json").write_text(json.dumps(shape.as_dict(), indent=2) + "\n")

    gguf_path: Path | None = None
    hf_dir: Path | None = None
    for fmt in formats:
        total = _bytes(shape, dtype, fmt)
        label = f"writing {shape.name} {fmt} ({total / 1e9:.2f} GB)"
        with _progress(console, label, total, progress) as advance:
            if fmt == "gguf":
                gguf_path = write_gguf(
                    shape, vocab, out_dir / f"{shape.name}-{dtype}.gguf", dtype, seed, advance
                )
            else:
                hf_dir = write_hf(shape, vocab, out_dir / "hf", dtype, seed, advance)
                (hf_dir / "README.txt").write_text(_readme(shape, dtype, formats, shape.vocab_file))
    return SynthResult(out_dir, gguf_path, hf_dir, shape, dtype)


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
