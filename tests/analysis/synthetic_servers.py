"""Closed-form servers for the analysis tests: throughput c / (a + b c), with noise."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

# A leads at low concurrency (smaller a), B at high (smaller b)
SERVER_A = (1.0, 0.02)
SERVER_B = (1.3, 0.0085)
TRUE_CROSSOVER = (SERVER_B[0] - SERVER_A[0]) / (SERVER_A[1] - SERVER_B[1])  # 26.087


def throughput(params: tuple[float, float], c: float) -> float:
    a, b = params
    return 1000.0 * c / (a + b * c)


def summary(verdict: str = "valid", **values: Any) -> dict[str, Any]:
    """A complete ``crossover.run/1`` summary; ``values`` may set ``total`` (tokens/s),
    ``ttft_ms``/``itl_ms``/``tpot_ms`` (p50 = p99), ``first_wave_ttft_ms``, ``concurrency`` and
    ``problems``."""

    def stats(v: float | None) -> dict[str, Any]:
        return {"mean": v, "p50": v, "p90": v, "p95": v, "p99": v, "min": v, "max": v,
                "count": 0 if v is None else 10}  # fmt: skip

    waves = (
        {"waves": {"first_ttft_ms": stats(values["first_wave_ttft_ms"])}}
        if "first_wave_ttft_ms" in values
        else {}
    )
    return {
        **waves,
        "schema": "crossover.run/1",
        "verdict": verdict,
        "problems": values.get("problems", []),
        "requests": {"sent": 10, "succeeded": 10, "failed": 0, "matched": 10},
        "load": {"mode": "concurrency", "concurrency": values.get("concurrency", 1)},
        "throughput": {
            "total_tokens_per_s": values.get("total"),
            "output_tokens_per_s": values.get("output"),
            "requests_per_s": None,
        },
        **{k: stats(values.get(k)) for k in ("ttft_ms", "tpot_ms", "itl_ms", "chunk_gap_ms")},
        "e2e_ms": stats(None),
        "queue_ms": stats(None),
        "engine": {"name": "test", "url": "http://127.0.0.1:1", "model": "m", "version": None},
        "workload": {"input_tokens": 16, "output_tokens": 32, "endpoint": "completions"},
        "started_at": "2026-11-30T09:00:00+00:00",
        "duration_s": 1.0,
    }


def synthetic_runs(
    levels: Iterable[int], rng: np.random.Generator, *, noise: float, repeats: int
) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    for c in levels:
        for name, params in (("A", SERVER_A), ("B", SERVER_B)):
            for r in range(repeats):
                v = throughput(params, c) * (1.0 + noise * rng.standard_normal())
                runs.append(
                    {"target": name, "concurrency": c, "repeat": r, "summary": summary(total=v)}
                )
    return runs
