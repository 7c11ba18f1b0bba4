"""What Triton costs: a Triton-hosted engine against the same engine served bare, level by
level, from one sweep folder (issue 40, item 5; docs/triton.md).

    python scripts/h200/triton_cost.py docs/results/h200/triton [--triton triton-vllm]
        [--bare vllm]

Part 1, crossover's figures: per level and metric (total tokens/s, TTFT p50, ITL p50),
Triton's mean relative to the bare engine's, with the project's interval for the
difference of the means (`crossover.analysis.crossovers.analyze_sweep`: Welch over the
repeats, the noise floor with one), and whether it is significant.

Part 2, Triton's own figures for the Triton target: per level, the rise over the run of the
counters the sweep scraped (`nv_inference_request_success`, `nv_inference_queue_duration_us`,
`nv_inference_compute_infer_duration_us`, `nv_inference_request_duration_us`) as
microseconds per request, beside crossover's TTFT p50 for the same run. For a decoupled
model these end when `execute` hands the request to the engine (docs/triton.md, "What
Triton's own durations cover"). The database, `sweep.db` or `sweep.db.xz`, is copied (or
decompressed) into a temporary folder first (`crossover.records.copies.copy_database`).

Part 3, where the time goes, for both targets from sweep.json: per run, the streamed
events the client received per request and output tokens per event (above 1: the server
sent several tokens in one event, because its side fell behind the engine), the gap
between events at p50, the GPU's mean utilisation over the run's samples and the share of
samples below 50% (a host-bound server leaves the GPU waiting), and the client's event-loop
lag at p99 (the client's own share).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
from pathlib import Path

from crossover.analysis.crossovers import analyze_sweep, metric_spec
from crossover.analysis.schema import SweepFile
from crossover.errors import UsageError
from crossover.records.copies import copy_database

METRICS = ("total_tokens_per_s", "ttft_ms.p50", "itl_ms.p50")
COUNTERS = (
    "nv_inference_request_success_total",
    "nv_inference_queue_duration_us_total",
    "nv_inference_compute_infer_duration_us_total",
    "nv_inference_request_duration_us_total",
)


def pct(x: float) -> str:
    return f"{100.0 * x:+.1f}%"


def crossover_part(sweep: SweepFile, triton: str, bare: str) -> list[str]:
    keep = {triton, bare}
    sub = SweepFile(
        targets=[t for t in sweep.targets if t.name in keep],
        runs=[r for r in sweep.runs if r.target in keep],
        roofline=[],
        workload=sweep.workload,
        started_at=sweep.started_at,
    )
    out = [f"{triton} against {bare} (Triton - bare, relative to bare; 95% interval)"]
    seen: set[str] = set()
    for f in analyze_sweep(sub, metrics=tuple(metric_spec(k) for k in METRICS)):
        if f.metric in seen or not f.per_level:
            continue
        seen.add(f.metric)
        out.append(f"  {f.metric}:")
        for lv in f.per_level:
            d = lv.diff
            if f.a == triton:
                t, b, rel, lo, hi = lv.mean_a, lv.mean_b, d.mean, d.lo, d.hi
            else:
                t, b, rel, lo, hi = lv.mean_b, lv.mean_a, -d.mean, -d.hi, -d.lo
            base = b or 1.0
            sig = f"significant, {lv.lead} better" if lv.lead else "not significant"
            out.append(
                f"    c={lv.concurrency:g}: {t:,.2f} vs {b:,.2f} ({pct(rel / base)}, "
                f"{pct(lo / base)} to {pct(hi / base)}, {d.method}, n={lv.n_a}+{lv.n_b}; {sig})"
            )
    return out


def open_db(folder: Path, tmp: Path) -> Path:
    try:
        return copy_database(folder, tmp / "sweep.db")
    except UsageError as exc:
        sys.exit(str(exc))


def triton_part(db: Path, triton: str) -> list[str]:
    con = sqlite3.connect(db)
    out = [
        f"{triton}: Triton's own figures per request (rise of its counters over each run)",
        "  run: requests; queue us; compute us; request us | crossover TTFT p50 ms",
    ]
    runs = [
        (run_id, key, summary)
        for run_id, key, summary in con.execute("SELECT run_id, key, summary FROM runs")
        if (key or "").startswith(triton + "|")
    ]

    def order(run: tuple[str, str, str | None]) -> tuple[float, str]:
        level = run[1].split("|")[1].partition("=")[2]  # "target|c=N|r=K"
        return (float(level) if level.replace(".", "", 1).isdigit() else 0.0, run[1])

    for run_id, key, summary in sorted(runs, key=order):
        first: dict[str, float] = {}
        last: dict[str, float] = {}
        rows = con.execute(
            "SELECT data FROM samples WHERE run_id = ? AND source = 'prometheus' ORDER BY t_s",
            (run_id,),
        )
        for (data,) in rows:
            values = json.loads(data)
            for name in COUNTERS:
                v = values.get(name)
                if isinstance(v, int | float):
                    first.setdefault(name, float(v))
                    last[name] = float(v)
        if not all(n in last for n in COUNTERS):
            out.append(f"  {key}: Triton's counters were not scraped")
            continue
        n = last[COUNTERS[0]] - first[COUNTERS[0]]
        ttft = (json.loads(summary or "{}").get("ttft_ms") or {}).get("p50")
        ttft_s = f"{ttft:.1f}" if isinstance(ttft, int | float) else "-"
        if n <= 0:
            out.append(f"  {key}: no request finished between two scrapes | {ttft_s}")
            continue
        per = [(last[c] - first[c]) / n for c in COUNTERS[1:]]
        out.append(f"  {key}: {n:g}; {per[0]:,.0f}; {per[1]:,.0f}; {per[2]:,.0f} | {ttft_s}")
    con.close()
    return out


def delivery_part(folder: Path, names: list[str]) -> list[str]:
    runs = json.loads((folder / "sweep.json").read_text())["runs"]
    out = [
        "where the time goes (sweep.json): per run",
        "  run: events/request; tokens/event; event gap p50 ms; GPU util mean %"
        " (samples < 50%); client loop lag p99 ms",
    ]
    for name in names:
        mine = [r for r in runs if r["target"] == name]
        for r in sorted(mine, key=lambda r: (r["concurrency"], r["repeat"])):
            s = r.get("summary") or {}
            n = (s.get("requests") or {}).get("succeeded") or 0
            events = (s.get("delivery") or {}).get("events")
            expected = s.get("expected_output_tokens") or {}
            tokens = n * (expected.get("mean") or 0)
            gap = (s.get("chunk_gap_ms") or {}).get("p50")
            lag = (s.get("client_loop") or {}).get("p99_ms")
            util = [g["util_pct"] for g in r.get("gpu") or [] if g.get("util_pct") is not None]
            # the first sample is taken before the first request arrives
            util = util[1:] if len(util) > 1 else util
            row = [
                f"{events / n:,.1f}" if events and n else "-",
                f"{tokens / events:.2f}" if events and tokens else "-",
                f"{gap:.1f}" if isinstance(gap, int | float) else "-",
                (
                    f"{sum(util) / len(util):.0f} ({sum(u < 50 for u in util)}/{len(util)})"
                    if util
                    else "-"
                ),
                f"{lag:.1f}" if isinstance(lag, int | float) else "-",
            ]
            out.append(f"  {name}|c={r['concurrency']:g}|r={r['repeat']}: " + "; ".join(row))
    return out


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("folder", type=Path)
    ap.add_argument("--triton", default="triton-vllm")
    ap.add_argument("--bare", default="vllm")
    args = ap.parse_args(argv)
    sweep = SweepFile.read(args.folder / "sweep.json")
    names = set(sweep.target_names())
    if args.triton not in names:
        sys.exit(
            f"{args.folder}/sweep.json has no target {args.triton!r} ({', '.join(sorted(names))})"
        )
    lines = (
        crossover_part(sweep, args.triton, args.bare)
        if args.bare in names
        else [f"no target {args.bare!r}: only Triton's own figures"]
    )
    with tempfile.TemporaryDirectory() as tmp:
        lines += triton_part(open_db(args.folder, Path(tmp)), args.triton)
    lines += delivery_part(args.folder, [n for n in (args.bare, args.triton) if n in names])
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
