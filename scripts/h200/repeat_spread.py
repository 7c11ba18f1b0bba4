"""How far a level's repeats lie apart, and what a pair's conclusions become, in sweeps that
measured the same targets and levels differently: repeats back to back on one engine start
(a plain grid) against each repeat on its own start (``restart_between_repeats``).

    PYTHONPATH=src python scripts/h200/repeat_spread.py \\
        docs/results/h100/moe-warm-grid docs/results/h100/moe-warm-restart \\
        --targets vllm,sglang --max-level 64 --tie-margin 0.03

For each sweep folder (its ``sweep.json``), on the targets and levels every folder has
(at most ``--max-level``): per metric, a level's spread is ``(max - min) / mean`` of its
valid repeats; the table gives the median and the largest over the levels with two repeats
or more. Then each pair's conclusion per metric, from the sweep's own analysis of those
levels alone (``crossover.analysis.crossovers.analyze_sweep``, with ``--tie-margin``), as
the decision's comparison states it (``crossover.decide.replay.describe``).
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from crossover.analysis.crossovers import Finding, analyze_sweep, metric_spec
from crossover.analysis.schema import SweepFile
from crossover.analysis.spread import level_spreads
from crossover.decide.replay import describe
from crossover.errors import UsageError, argument_parser
from crossover.report.load import load_sweep

METRICS = ("total_tokens_per_s", "ttft_ms.p50", "itl_ms.p50")


def restrict(sweep: SweepFile, targets: Sequence[str], levels: set[float]) -> SweepFile:
    """The sweep with only these targets' runs at these levels (concurrency axis)."""
    runs = [
        r
        for r in sweep.runs
        if r.target in targets and r.axis == "concurrency" and r.level in levels
    ]
    kept = [t for t in sweep.targets if t.name in targets]
    return sweep.model_copy(update={"runs": runs, "targets": kept})


def conclusions(sweep: SweepFile, tie: float) -> dict[tuple[str, str, str], str]:
    """Each pair's conclusion per metric of :data:`METRICS`."""
    by: dict[tuple[str, str, str], list[Finding]] = {}
    for f in analyze_sweep(sweep, metrics=[metric_spec(m) for m in METRICS], tie_rel=tie):
        by.setdefault((f.a, f.b, f.metric), []).append(f)
    return {k: describe(v) for k, v in by.items()}


def _levels(sweep: SweepFile, targets: Sequence[str], max_level: float) -> set[float]:
    out: set[float] | None = None
    for t in targets:
        mine = {r.level for r in sweep.runs if r.target == t and r.axis == "concurrency"}
        out = mine if out is None else out & mine
    return {x for x in out or set() if x <= max_level}


def main(argv: list[str]) -> int:
    parser = argument_parser("repeat_spread.py", __doc__)
    parser.add_argument("folders", nargs="+", type=Path, help="sweep folders (sweep.json)")
    parser.add_argument("--targets", default="vllm,sglang", help="comma-separated")
    parser.add_argument("--max-level", type=float, default=float("inf"))
    parser.add_argument("--tie-margin", type=float, default=0.0)
    args = parser.parse_args(argv)
    if not 0.0 <= args.tie_margin < 1.0:
        parser.error(f"--tie-margin {args.tie_margin:g}: give a share, 0 <= M < 1")
    try:
        return report(args.folders, [t for t in args.targets.split(",") if t], args)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def report(folders: Sequence[Path], targets: Sequence[str], args: Any) -> int:
    """Print the spreads and the conclusions (see the module's docstring)."""
    sweeps = {}
    for folder in args.folders:
        path = folder / "sweep.json"
        if not path.is_file():
            raise UsageError(f"{folder}: no sweep.json")
        sweep = load_sweep(path)
        missing = [t for t in targets if t not in sweep.target_names()]
        if missing:
            raise UsageError(f"{folder}: no target {', '.join(missing)}")
        sweeps[folder] = sweep
    common: set[float] | None = None
    for sweep in sweeps.values():
        mine = _levels(sweep, targets, args.max_level)
        common = mine if common is None else common & mine
    if not common:
        raise UsageError("the folders share no level of these targets")
    cut = {f: restrict(s, targets, common) for f, s in sweeps.items()}
    shown = ", ".join(f"{x:g}" for x in sorted(common))
    print(f"targets {', '.join(targets)} at concurrency {shown}")
    print("spread of a level's repeats, (max - min) / mean: median, largest (where)")
    for folder, sweep in cut.items():
        print(f"  {folder}")
        for m in METRICS:
            s = sorted(level_spreads(sweep, m))
            if not s:
                print(f"    {metric_spec(m).label:<16} no level with two repeats")
                continue
            med = statistics.median(x for x, _, _ in s)
            top, t, level = s[-1]
            print(
                f"    {metric_spec(m).label:<16} {100 * med:5.1f}%  {100 * top:5.1f}% "
                f"({t} c={level:g}; {len(s)} levels)"
            )
    margin = f" (tie margin {100 * args.tie_margin:g}%)" if args.tie_margin else ""
    print(f"conclusions on these levels{margin}")
    for folder, sweep in cut.items():
        print(f"  {folder}")
        for (a, b, m), text in conclusions(sweep, args.tie_margin).items():
            print(f"    {metric_spec(m).label}: {a} vs {b}: {text}")
    return 0


if __name__ == "__main__":
    from crossover.pipes import run_tool

    run_tool(lambda: main(sys.argv[1:]))
