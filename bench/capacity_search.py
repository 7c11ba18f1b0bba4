"""Levels and seconds ``crossover capacity`` spends vs a fixed grid of the same precision.

Against a calibration server whose TTFT grows with the requests in flight (the model of
tests/capacity: TTFT = ttft + c x others, so the capacity under a mean-TTFT SLO is
known in closed form), this runs the search once, then a geometric grid with steps of
(1 + precision) over the range the search covered, every grid level measured the same
way (same duration, same overload stop). It prints a table and writes JSON. The grid
is reported twice: whole (what a rate sweep measures) and cut at its first miss (the
best a grid can do when it walks upwards and stops). Usage:

    .venv/bin/python bench/capacity_search.py --precision 0.1 --duration-s 3 \
        --json docs/results/capacity_search.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from crossover.calibration.server import build_config, spawn
from crossover.capacity.runner import CapacityConfig, CapacityRunner
from crossover.capacity.search import grid_levels
from crossover.spec.slo import parse_slo

TTFT_MS, PER_STREAM_MS, ITL_MS, N = 10.0, 40.0, 10.0, 4


def truth_rps(slo_ms: float) -> float:
    return (slo_ms - TTFT_MS) / (PER_STREAM_MS * (slo_ms + (N - 1) * ITL_MS) / 1000.0)


async def _run(args: argparse.Namespace, url: str, work: Path) -> dict[str, Any]:
    cfg = CapacityConfig(
        url=url,
        engine="vllm",
        model="calibration",
        output_tokens=N,
        input_tokens=16,
        slo=parse_slo(f"ttft_ms.mean={args.slo_ms}"),
        precision=args.precision,
        start_rps=args.start_rate,
        duration_s_per_level=args.duration_s,
    )
    search = CapacityRunner(cfg, work / "search")
    try:
        found = await search.run()
    finally:
        search.close()
    rates = [lv.rate_rps for lv in found.levels]
    grid = grid_levels(min(rates), max(rates), args.precision)
    runner = CapacityRunner(cfg, work / "grid")
    spent: list[tuple[float, bool, float]] = []
    try:
        for r in grid:
            t0 = time.perf_counter()
            met = await runner.measure_level(r)
            spent.append((r, met, time.perf_counter() - t0))
    finally:
        runner.close()
    first_miss = next((i for i, (_, met, _) in enumerate(spent) if not met), len(spent) - 1)
    passing = [r for r, met, _ in spent[:first_miss] if met]
    return {
        "slo": f"ttft_ms.mean<={args.slo_ms:g}",
        "precision": args.precision,
        "duration_s_per_level": args.duration_s,
        "truth_rps": round(truth_rps(args.slo_ms), 3),
        "search": {
            "levels": len(found.levels),
            "seconds": found.seconds,
            "interval": found.interval,
            "rates": [round(r, 3) for r in rates],
        },
        "grid": {
            "levels": len(spent),
            "seconds": round(sum(s for _, _, s in spent), 3),
            "interval": [passing[-1] if passing else None, spent[first_miss][0]],
            "rates": [round(r, 3) for r, _, _ in spent],
        },
        "grid_to_first_miss": {
            "levels": first_miss + 1,
            "seconds": round(sum(s for _, _, s in spent[: first_miss + 1]), 3),
        },
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--precision", type=float, default=0.1)
    ap.add_argument("--duration-s", type=float, default=3.0)
    ap.add_argument("--slo-ms", type=float, default=66.8)
    ap.add_argument("--start-rate", type=float, default=2.0)
    ap.add_argument("--json", type=Path, default=Path("capacity_search.json"))
    args = ap.parse_args()
    cal = build_config(ttft_ms=TTFT_MS, ttft_per_stream_ms=PER_STREAM_MS, itl_ms=ITL_MS)
    with spawn(cal) as url, tempfile.TemporaryDirectory() as tmp:
        res = asyncio.run(_run(args, url, Path(tmp)))
    args.json.write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")
    print(f"{res['slo']}, precision {res['precision']}, {res['duration_s_per_level']} s a level;"
          f" computed capacity {res['truth_rps']} requests/s")  # fmt: skip
    print(f"{'method':<20} {'levels':>6} {'seconds':>8}  bracket (requests/s)")
    for name, key in (("search", "search"), ("grid", "grid"), ("grid to first miss", None)):
        row = res[key or "grid_to_first_miss"]
        lo, hi = res[key or "grid"]["interval"]
        bracket = f"[{lo:.3g}, {hi:.3g}]" if lo is not None and hi is not None else "-"
        print(f"{name:<20} {row['levels']:>6} {row['seconds']:>8.1f}  {bracket}")
    print(f"written: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
