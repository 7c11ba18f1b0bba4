"""The advisor's forecast against a sweep's measurements, level by level: total tokens/s
(the mean over the valid repeats) and the forecast's error.

    python scripts/h200/forecast_vs_measured.py SWEEP.json MEASURED=FORECAST.json:TARGET ...

Each pair names a measured target and a forecast row set (``python -m
crossover.advise.forecast ... --json FORECAST.json``) and its target name there.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from statistics import mean


def main(argv: list[str]) -> int:
    sweep = json.loads(Path(argv[0]).read_text())
    measured: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for run in sweep["runs"]:
        s = run["summary"]
        if s.get("verdict") == "valid":
            measured[run["target"]][run["concurrency"]].append(
                s["throughput"]["total_tokens_per_s"]
            )
    print("| measured target | forecast | c | measured total tok/s | forecast | error |")
    print("|---|---|---:|---:|---:|---:|")
    for pair in argv[1:]:
        name, rest = pair.split("=", 1)
        path, target = rest.rsplit(":", 1)
        rows = [r for r in json.loads(Path(path).read_text())["rows"] if r["target"] == target]
        for r in rows:
            got = measured[name].get(r["concurrency"])
            if not got:
                continue
            m, f = mean(got), r["total_tok_s"]
            print(
                f"| {name} | {Path(path).name}:{target} | {r['concurrency']} | {m:,.0f} | "
                f"{f:,.0f} | {100 * (f - m) / m:+.0f}% |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
