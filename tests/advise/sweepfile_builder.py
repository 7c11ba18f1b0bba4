"""Valid ``crossover.sweep/1`` documents for the advise tests, with defaults.

The advisor reads sweep.json through :class:`crossover.analysis.schema.SweepFile`, which
refuses a partial run summary; these helpers fill in what a test does not care about, so
a test states only the figures it is about (throughput, TPOT, TTFT, the verdict).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from crossover.analysis.schema import SweepFile


def _stats(p50: float | None) -> dict[str, Any]:
    return {"p50": p50, "count": 0 if p50 is None else 1}


def summary(
    *,
    output: float | None = None,
    total: float | None = None,
    tpot_p50: float | None = None,
    ttft_p50: float | None = None,
    verdict: str = "valid",
    concurrency: int = 1,
) -> dict[str, Any]:
    """A complete ``crossover.run/1`` summary with these figures (others missing)."""
    return {
        "schema": "crossover.run/1",
        "verdict": verdict,
        "problems": [],
        "requests": {"sent": 10, "succeeded": 10, "failed": 0, "matched": 10},
        "load": {"mode": "concurrency", "concurrency": concurrency},
        "throughput": {"total_tokens_per_s": total, "output_tokens_per_s": output},
        "ttft_ms": _stats(ttft_p50),
        "tpot_ms": _stats(tpot_p50),
        "itl_ms": _stats(None),
        "chunk_gap_ms": _stats(None),
        "e2e_ms": _stats(None),
        "queue_ms": _stats(None),
        "engine": {"name": "test", "url": "http://127.0.0.1:1", "model": "m"},
        "workload": {"input_tokens": 16, "output_tokens": 32, "endpoint": "completions"},
        "started_at": "2026-11-30T09:00:00+00:00",
        "duration_s": 1.0,
    }


def run(
    target: str,
    concurrency: int,
    *,
    output: float | None = None,
    total: float | None = None,
    tpot_p50: float | None = None,
    ttft_p50: float | None = None,
    verdict: str = "valid",
    repeat: int = 0,
) -> dict[str, Any]:
    """One closed-loop run of ``target`` at ``concurrency``."""
    return {
        "target": target,
        "concurrency": concurrency,
        "repeat": repeat,
        "summary": summary(
            output=output,
            total=total,
            tpot_p50=tpot_p50,
            ttft_p50=ttft_p50,
            verdict=verdict,
            concurrency=concurrency,
        ),
    }


def target(
    name: str, engine: str | None = None, settings: dict[str, Any] | None = None, **more: Any
) -> dict[str, Any]:
    """A declared target; ``more`` sets ``model``, ``url`` or ``version``."""
    return {"name": name, "engine": engine, "settings": settings or {}, **more}


def roofline(
    target: str, gpu: str, bandwidth_gb_s: float, model_bytes: float = 16e9
) -> dict[str, Any]:
    """A roofline entry: the GPU and its measured copy rate (what the advisor reads)."""
    return {
        "target": target,
        "gpu": gpu,
        "bandwidth_gb_s": bandwidth_gb_s,
        "model_bytes": model_bytes,
    }


def sweep_file(
    targets: list[dict[str, Any]],
    runs: list[dict[str, Any]],
    *,
    workload: dict[str, Any] | None = None,
    roofline: list[dict[str, Any]] | None = None,
) -> SweepFile:
    """The sweep file, validated as the sweep runner would write it."""
    return SweepFile.model_validate(
        {
            "schema": "crossover.sweep/1",
            "targets": targets,
            "runs": runs,
            "workload": workload,
            "roofline": roofline or [],
        }
    )


def write_sweep(folder: Path, sweep: SweepFile) -> Path:
    """``folder/sweep.json`` (the folder made if missing); returns the file's path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "sweep.json"
    sweep.write(path)
    return path
