"""Print the README's results table from a sweep.json: per target and level, total
tokens/s, TTFT p50 and ITL p50 of each valid repeat (min-max when there are two or more).
A target with no valid repeat at a level shows its `unverified` repeats instead, marked so
(transformers serve: usage claims more tokens than its stream carried chunks, and no
second witness can vouch; docs/metrics.md).

    python scripts/h200/table.py docs/results/h200/vllm-a/sweep.json [TARGET,TARGET,...]

The optional second argument keeps only those targets, in that order (the README splits
the vLLM and llama.cpp columns into two tables).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict


def cell(values: list[float], fmt: str) -> str:
    if not values:
        return "–"
    lo, hi = min(values), max(values)
    return (
        fmt.format(lo)
        if len(values) == 1 or fmt.format(lo) == fmt.format(hi)
        else (fmt.format(lo) + "–" + fmt.format(hi))
    )


def main(path: str, only: list[str] | None = None) -> None:
    with open(path, encoding="utf-8") as f:
        sweep = json.load(f)
    names = [t["name"] for t in sweep["targets"]]
    runs: dict[tuple[str, int], list[dict]] = defaultdict(list)
    unverified: dict[tuple[str, int], list[dict]] = defaultdict(list)
    bad: dict[tuple[str, int], int] = defaultdict(int)
    for r in sweep["runs"]:
        key = (r["target"], r["concurrency"])
        verdict = (r.get("summary") or {}).get("verdict")
        if verdict == "valid":
            runs[key].append(r["summary"])
        elif verdict == "unverified":
            unverified[key].append(r["summary"])
        else:
            bad[key] += 1
    levels = sorted({c for _, c in runs} | {c for _, c in unverified} | {c for _, c in bad})
    shown = [n for n in (only or names) if any(k[0] == n for k in [*runs, *unverified])]
    print("| c | " + " | ".join(shown) + " |")
    print("|---:|" + "---|" * len(shown))
    for c in levels:
        row = []
        for n in shown:
            s = runs.get((n, c), [])
            mark = ""
            if not s and unverified.get((n, c)):
                s, mark = unverified[(n, c)], ", unverified"
            if not s:
                row.append("invalid" if bad.get((n, c)) else "not run")
                continue
            tok = cell([x["throughput"]["total_tokens_per_s"] for x in s], "{:,.0f}")
            ttft = cell([x["ttft_ms"]["p50"] for x in s], "{:,.0f}")
            itl = cell([x["itl_ms"]["p50"] for x in s], "{:.2f}")
            row.append(f"{tok}; {ttft}; {itl} ({len(s)}{mark})")
        print(f"| {c} | " + " | ".join(row) + " |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2].split(",") if len(sys.argv) > 2 else None)
