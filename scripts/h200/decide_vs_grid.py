"""A live ``crossover decide`` against the grid it stands for (issue 42, Proof 2): each pair
and metric's conclusion from the decision's ``decision.json`` beside the grid's own analysis
of every run in a committed sweep database, compared by the replay's rule
(``crossover.decide.replay.same_conclusion``: same leader where the grid has one, every
crossover on the same sides with overlapping intervals, inconclusive where the grid is),
and the decision's GPU time beside the grid's measuring time.

    PYTHONPATH=src python scripts/h200/decide_vs_grid.py \\
        docs/results/h200/moe-decide docs/results/h200/moe

Exit 0 when every conclusion is the grid's, 1 otherwise.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from crossover.analysis.crossovers import Finding
from crossover.analysis.schema import EngineStart
from crossover.decide.recorded import Recorded
from crossover.decide.replay import describe, replay, same_conclusion
from crossover.decide.state import PolicyConfig
from crossover.errors import UsageError, argument_parser
from crossover.records.copies import copy_database
from crossover.records.store import Store


def finding(d: dict[str, Any]) -> Finding:
    """A finding as ``decision.json`` writes it."""

    def pair(v: Any) -> tuple[float, float] | None:
        return (float(v[0]), float(v[1])) if v else None

    return Finding(
        kind=d["kind"],
        metric=d["metric"],
        a=d["a"],
        b=d["b"],
        levels=tuple(float(x) for x in d.get("levels") or ()),
        below=d.get("below"),
        above=d.get("above"),
        concurrency=d.get("concurrency"),
        interval=pair(d.get("interval")),
        bracket=pair(d.get("bracket")),
        leader=d.get("leader"),
    )


@dataclass
class Spent:
    seconds: dict[str, float]
    levels: list[tuple[str, int, int]]


def replay_seconds(folder: Path, q: dict[str, Any]) -> Spent:
    """Each target's measuring time in a decision's database: its runs' spans (first send,
    warm-up included, to the last request's end), as the replay counts a grid's."""
    with tempfile.TemporaryDirectory() as tmp:
        rec = Recorded(copy_database(folder, Path(tmp) / "spent.db"))
        try:
            seconds: dict[str, float] = {}
            for (t, _, _), run in rec.runs.items():
                seconds[t] = seconds.get(t, 0.0) + rec.span(run.run_id)[0]
            return Spent(seconds, sorted(rec.runs))
        finally:
            rec.close()


def compare(decision_dir: Path, grid: Path, tie: float = 0.0) -> int:
    path = decision_dir / "decision.json"
    if not path.is_file():
        raise UsageError(f"no decision.json in {decision_dir}")
    d = orjson.loads(path.read_bytes())
    q = d["question"]
    decided = [finding(f) for f in d["findings"]]
    with tempfile.TemporaryDirectory() as tmp:
        db = copy_database(grid, Path(tmp) / "grid.db")
        r = replay(db, targets=q["targets"], metrics=q["metrics"], cfg=PolicyConfig(tie_rel=tie))
    # level by level: each pair's significant lead in the grid and in the decision's own
    # runs (the sweep analysis over the decision's database, as the replay reads a grid)
    with tempfile.TemporaryDirectory() as tmp:
        db = copy_database(decision_dir, Path(tmp) / "live.db")
        mine_all = replay(
            db, targets=q["targets"], metrics=q["metrics"], cfg=PolicyConfig(tie_rel=tie)
        ).grid_findings
    if tie > 0.0:  # decision.json's findings were read without the margin
        decided = list(mine_all)
    same = 0
    rows = []
    for c in r.comparisons:
        pair = {c.a, c.b}
        mine = [f for f in decided if {f.a, f.b} == pair and f.metric == c.metric]
        theirs = [f for f in r.grid_findings if {f.a, f.b} == pair and f.metric == c.metric]
        ok = same_conclusion(theirs, mine)
        same += ok
        rows.append((c.a, c.b, c.metric, describe(theirs), describe(mine), ok))
    print(f"| pair | metric | grid ({grid}) | live decide | same |")
    print("|---|---|---|---|---|")
    for a, b, m, g, mine_text, ok in rows:
        print(f"| {a} vs {b} | {m} | {g} | {mine_text} | {'yes' if ok else '**no**'} |")
    print()
    print(f"{same} of {len(rows)} conclusions the same as the grid's")
    grid_lead = {
        (frozenset((f.a, f.b)), f.metric, lv.concurrency): (f.a, lv)
        for f in r.grid_findings
        for lv in f.per_level
    }
    print()
    print("| pair | metric | level | grid: lead (a − b) | decide: lead (a − b) | |")
    print("|---|---|---:|---|---|---|")
    contradictions, seen = 0, set()
    for f in mine_all:
        for lv in f.per_level:
            key = (frozenset((f.a, f.b)), f.metric, lv.concurrency)
            if key not in grid_lead or key in seen:
                continue
            seen.add(key)
            ga, gl = grid_lead[key]
            sign = 1.0 if ga == f.a else -1.0
            bad = lv.lead is not None and gl.lead is not None and lv.lead != gl.lead
            contradictions += bad
            print(
                f"| {f.a} vs {f.b} | {f.metric} | {lv.concurrency:g} | {gl.lead or 'none'} "
                f"({sign * (gl.mean_a - gl.mean_b):+.4g}) | {lv.lead or 'none'} "
                f"({lv.mean_a - lv.mean_b:+.4g}) | {'**contradicts**' if bad else ''} |"
            )
    print()
    print(f"{contradictions} level(s) where the decision's significant lead is the grid's reverse")
    # what the decision cost: its runs' measuring time (the records' stamps, every call)
    # and its engine starts (the database's), beside the grid's
    with tempfile.TemporaryDirectory() as tmp:
        db = copy_database(decision_dir, Path(tmp) / "live.db")
        with Store(db) as store:
            starts = [EngineStart.model_validate(x) for x in store.get_meta("engine_starts") or []]
    live_s = replay_seconds(decision_dir, q)
    grid_s = r.grid_seconds
    print()
    print("| target | levels | measuring s | grid's measuring s | starts: ready s (stop s) |")
    print("|---|---|---:|---:|---|")
    for t in q["targets"]:
        levels = sorted({c for tt, c, _ in live_s.levels if tt == t})
        st = ", ".join(
            f"{x.ready_s:.0f} ({x.stop_s:.1f})" if x.stop_s is not None else f"{x.ready_s:.0f}"
            for x in starts
            if x.target == t
        )
        print(
            f"| {t} | {','.join(str(c) for c in levels)} | {live_s.seconds.get(t, 0.0):.0f} | "
            f"{grid_s.get(t, 0.0):.0f} | {st} |"
        )
    measuring, grid_total = sum(live_s.seconds.values()), sum(grid_s.values())
    ready = sum(x.ready_s + (x.stop_s or 0.0) for x in starts)
    print()
    print(
        f"measuring {measuring:.0f} s of the grid's {grid_total:.0f} s "
        f"({measuring / max(grid_total, 1e-9):.0%}); {len(starts)} engine starts, "
        f"{ready:.0f} s from launch to ready and stopping"
    )
    live = (d.get("live") or {}).get("gpu_time") or {}
    if live.get("total_s"):
        print(
            f"the last call's own GPU time (engines up, start to stop): {live['total_s']:.0f} s "
            "(a resumed decision counts only the call that settled it)"
        )
    return 0 if same == len(rows) else 1


def main(argv: list[str]) -> int:
    parser = argument_parser("decide_vs_grid.py", __doc__)
    parser.add_argument("decision", type=Path, help="the decision's --out folder")
    parser.add_argument("grid", type=Path, help="the grid's results folder (sweep.db or .xz)")
    parser.add_argument(
        "--tie-margin",
        type=float,
        default=0.0,
        help="both analysed with this tie margin (crossover decide --tie-margin); the "
        "decision's conclusions are then its runs analysed again, not decision.json's",
    )
    args = parser.parse_args(argv)
    if not 0.0 <= args.tie_margin < 1.0:
        parser.error(f"--tie-margin {args.tie_margin:g}: give a share, 0 <= M < 1")
    try:
        return compare(args.decision, args.grid, args.tie_margin)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
