"""All-reduce measurements as data: bandwidth math, the summary, the JSON table.

The JSON is the table ``crossover advise --allreduce-table`` reads
(``crossover.advise.cost.load_curve``): ``{"gpus": n, "points": [{"size_bytes",
"latency_us", ...}]}``. ``points`` holds the CUDA-graph-replayed latencies (decode runs
in graphs); ``eager_points`` the same calls made one by one from Python.
"""

from __future__ import annotations

import json
from pathlib import Path
from statistics import median

from pydantic import BaseModel

from crossover.files import write_atomic

SCHEMA = "crossover.commbench/1"
KIB = 1024
# Messages up to this size sit on the latency floor on NVLink (decode's all-reduces are
# batch x hidden x 2 bytes: 8 KiB for one Llama-3-8B token).
FLOOR_MAX_BYTES = 64 * KIB


def message_sizes(min_bytes: int = KIB, max_bytes: int = KIB**3, factor: int = 2) -> list[int]:
    """``min_bytes`` .. ``max_bytes`` in steps of ``factor`` (2 or 4), both ends included."""
    if factor not in (2, 4):
        raise ValueError("factor must be 2 or 4")
    if min_bytes < 2 or max_bytes < min_bytes:
        raise ValueError("want 2 <= min_bytes <= max_bytes")
    sizes: list[int] = []
    size = min_bytes
    while size <= max_bytes:
        sizes.append(size)
        size *= factor
    if sizes[-1] != max_bytes:
        sizes.append(max_bytes)
    return sizes


def algbw_gbs(size_bytes: float, latency_us: float) -> float:
    """Algorithm bandwidth: bytes reduced per second (GB/s, 1e9)."""
    return size_bytes / (latency_us * 1e-6) / 1e9


def busbw_gbs(size_bytes: float, latency_us: float, gpus: int) -> float:
    """Bus bandwidth (nccl-tests): algbw x 2(n-1)/n, what each link carries in a ring."""
    return algbw_gbs(size_bytes, latency_us) * 2 * (gpus - 1) / gpus


class Point(BaseModel):
    size_bytes: int
    latency_us: float
    algbw_gbs: float
    busbw_gbs: float
    link_fraction: float | None  # busbw / the link's per-direction bandwidth

    @classmethod
    def of(cls, size_bytes: int, latency_us: float, gpus: int, link_gbs: float | None) -> Point:
        bus = busbw_gbs(size_bytes, latency_us, gpus)
        return cls(
            size_bytes=size_bytes,
            latency_us=round(latency_us, 3),
            algbw_gbs=round(algbw_gbs(size_bytes, latency_us), 3),
            busbw_gbs=round(bus, 3),
            link_fraction=round(bus / link_gbs, 4) if link_gbs else None,
        )


class Summary(BaseModel):
    floor_us: float  # median latency of messages <= FLOOR_MAX_BYTES (or the smallest)
    floor_max_bytes: int
    peak_busbw_gbs: float
    peak_at_bytes: int
    peak_link_fraction: float | None
    link_gbs_per_direction: float | None
    link_source: str | None


def summarize(
    points: list[Point], link_gbs: float | None, link_source: str | None = None
) -> Summary:
    if not points:
        raise ValueError("no points to summarize")
    small = [p.latency_us for p in points if p.size_bytes <= FLOOR_MAX_BYTES]
    floor = median(small) if small else min(points, key=lambda p: p.size_bytes).latency_us
    peak = max(points, key=lambda p: p.busbw_gbs)
    return Summary(
        floor_us=round(floor, 3),
        floor_max_bytes=FLOOR_MAX_BYTES,
        peak_busbw_gbs=peak.busbw_gbs,
        peak_at_bytes=peak.size_bytes,
        peak_link_fraction=peak.link_fraction,
        link_gbs_per_direction=link_gbs,
        link_source=link_source,
    )


class CommbenchResult(BaseModel):
    """The file commbench writes; ``gpus`` + ``points`` are what ``load_curve`` reads."""

    schema_: str = SCHEMA
    gpus: int
    device: str
    torch: str | None = None
    nccl: str | None = None
    dtype: str = "bfloat16"
    mode: str  # what ``points`` holds
    source: str
    env: dict[str, str]
    points: list[Point]
    eager_points: list[Point]
    graph_calls: int
    summary: Summary
    eager_summary: Summary | None = None

    def to_json(self) -> str:
        data = self.model_dump()
        data = {"schema": data.pop("schema_"), **data}
        return json.dumps(data, indent=1) + "\n"

    def write(self, path: Path) -> None:
        """Written whole or not at all (its folder made where missing)."""
        write_atomic(path, self.to_json())
