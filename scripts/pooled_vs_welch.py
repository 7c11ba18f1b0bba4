"""How the committed grids' level-by-level significance reads under two statistics: the
sweep's and decide's today (Welch's interval of one level's repeats, two each, so one
degree of freedom: ``crossover.analysis.stats.difference_interval``) and the one
``crossover compare`` reads (each target's repeat noise pooled over its levels, in log,
never below the level's own: ``ratio_interval_pooled``). The input of the next design step
of the analysis (docs/decide.md, "What is left"): pooling is not uniformly sharper.

    PYTHONPATH=src python scripts/pooled_vs_welch.py docs/results/h200/moe \\
        docs/results/h200/vllm-a [--json out.json]

Per results folder and metric: the target pairs' common levels, how many each statistic
calls significant, how many only one of them does, and how many the two call significant
with opposite signs (none is expected: both are centred on the same means).
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import orjson

from crossover.analysis.crossovers import level_values, metric_spec
from crossover.analysis.stats import difference_interval, pooled_log_noise, ratio_interval_pooled
from crossover.errors import UsageError, argument_parser
from crossover.report.load import load_sweep
from crossover.spec.load import Axis

METRICS = ("total_tokens_per_s", "ttft_ms.p50", "itl_ms.p50")


@dataclass
class Row:
    folder: str
    metric: str
    levels: int = 0
    welch: int = 0
    pooled: int = 0
    welch_only: int = 0
    pooled_only: int = 0
    opposite: int = 0


def count(folder: Path, label: str) -> list[Row]:
    """One row per metric of the sweep in ``folder`` (its ``sweep.json``: every run's
    summary is there, so the database is not read)."""
    sweep = load_sweep(folder)
    names = [t.name for t in sweep.targets]
    axis: Axis = "rate" if any(r.axis == "rate" for r in sweep.runs) else "concurrency"
    rows = []
    for m in METRICS:
        spec = metric_spec(m)
        values = {n: level_values(sweep.runs, n, spec.path, axis, spec.steady_only) for n in names}
        noise = {n: pooled_log_noise(values[n].values()) for n in names}
        row = Row(label, m)
        for a, b in itertools.combinations(names, 2):
            for c in sorted(set(values[a]) & set(values[b])):
                x, y = values[a][c], values[b][c]
                w = difference_interval(x, y)
                p = ratio_interval_pooled(x, y, noise_a=noise[a], noise_b=noise[b])
                ps = p is not None and p.significant
                row.levels += 1
                row.welch += w.significant
                row.pooled += ps
                row.welch_only += w.significant and not ps
                row.pooled_only += ps and not w.significant
                if w.significant and ps and p is not None:
                    row.opposite += (w.mean > 0) != (p.ratio > 1.0)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argument_parser("pooled_vs_welch.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", type=Path, help="results folders (their sweep.json)")
    ap.add_argument("--json", type=Path, help="write the rows here too")
    args = ap.parse_args(argv)
    try:
        rows = [r for f in args.folders for r in count(f, str(f))]
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("folder | metric | levels | Welch | pooled | Welch only | pooled only | opposite")
    for r in rows:
        print(" | ".join(str(v) for v in asdict(r).values()))
    if args.json:
        args.json.write_bytes(orjson.dumps([asdict(r) for r in rows], option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
