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
from pathlib import Path
from typing import Any

import orjson

from crossover.analysis.crossovers import Finding
from crossover.decide.replay import describe, replay, same_conclusion
from crossover.errors import UsageError
from crossover.records.copies import copy_database


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


def compare(decision_dir: Path, grid: Path) -> int:
    path = decision_dir / "decision.json"
    if not path.is_file():
        raise UsageError(f"no decision.json in {decision_dir}")
    d = orjson.loads(path.read_bytes())
    q = d["question"]
    decided = [finding(f) for f in d["findings"]]
    with tempfile.TemporaryDirectory() as tmp:
        db = copy_database(grid, Path(tmp) / "grid.db")
        r = replay(db, targets=q["targets"], metrics=q["metrics"])
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
    live = d.get("live") or {}
    times = live.get("times") or {}
    grid_s = r.grid_seconds
    print()
    print(
        "| target | levels measured | measuring s | grid's measuring s | starts | ready s | GPU s |"
    )
    print("|---|---|---|---|---|---|---|")
    for t, tt in times.items():
        ready = ", ".join(f"{x:.0f}" for x in tt.get("ready_s") or [])
        gpu = (live.get("gpu_time") or {}).get("per_target", {}).get(t)
        levels = ",".join(str(x) for x in tt["levels"])
        print(
            f"| {t} | {levels} | {tt['measuring_s']:.0f} | {grid_s.get(t, 0.0):.0f} | "
            f"{tt['starts']} | {ready} | {'' if gpu is None else f'{gpu:.0f}'} |"
        )
    total = (live.get("gpu_time") or {}).get("total_s")
    measuring = sum(tt["measuring_s"] for tt in times.values())
    print()
    print(
        f"measuring {measuring:.0f} s of the grid's {sum(grid_s.values()):.0f} s "
        f"({measuring / max(sum(grid_s.values()), 1e-9):.0%})"
        + (f"; GPU time {total:.0f} s ({total / 60:.1f} GPU-minutes)" if total else "")
    )
    return 0 if same == len(rows) else 1


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: decide_vs_grid.py DECISION_DIR GRID_FOLDER", file=sys.stderr)
        return 2
    try:
        return compare(Path(argv[0]), Path(argv[1]))
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
