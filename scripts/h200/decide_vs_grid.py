"""A live ``crossover decide`` against the grid it stands for (issue 42, Proof 2): each pair
and metric's conclusion from the decision's ``decision.json`` beside the grid's own analysis
of every run in a committed sweep database, compared by the replay's rule
(``crossover.decide.replay.same_conclusion``: same leader where the grid has one, every
crossover on the same sides with overlapping intervals, inconclusive where the grid is),
and the decision's GPU time beside the grid's measuring time.

    PYTHONPATH=src python scripts/h200/decide_vs_grid.py \\
        docs/results/h200/moe-decide docs/results/h200/moe

Both must come from the same card: where both databases keep the machine they ran on
(``hosts``) and their GPUs differ it stops (exit 2) unless ``--any-card``.

Exit 0 when every conclusion is the grid's, 1 otherwise.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

from crossover.analysis.crossovers import Finding
from crossover.decide.recorded import Recorded
from crossover.decide.replay import describe, replay, same_conclusion
from crossover.decide.state import PolicyConfig
from crossover.errors import UsageError, argument_parser
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


def _gpus(db: Path) -> list[str] | None:
    """The GPU names of the machines a database's sweep ran on (``hosts``, kept since
    2026-12-05), ``None`` for one measured before crossover kept them."""
    from crossover.measure.host import kept_hosts
    from crossover.records.store import Store

    with Store(db, read_only=True) as store:
        hosts = kept_hosts(store.get_meta("hosts"))
    if not hosts:
        return None
    return sorted({g.name for h in hosts for g in h.gpus})


def same_card(live_db: Path, grid_db: Path, any_card: bool) -> str:
    """The line saying which card each ran on; a ``UsageError`` where the cards differ
    (a decision is compared with a grid measured on the same card) unless ``any_card``."""
    mine, theirs = _gpus(live_db), _gpus(grid_db)
    if mine is None or theirs is None:
        return (
            "cards: not recorded in "
            + " and ".join(
                w for w, g in (("the decision", mine), ("the grid", theirs)) if g is None
            )
            + " (measured before crossover kept its machine): check them in the READMEs"
        )
    on = {w: ", ".join(g) or "no GPU" for w, g in (("decision", mine), ("grid", theirs))}
    both = f"the decision on {on['decision']}, the grid on {on['grid']}"
    if mine != theirs and not any_card:
        raise UsageError(
            f"{both}: compare a decision with a grid from the same card (--any-card to go on)"
        )
    return f"cards: {both}" + ("" if mine == theirs else " (--any-card: they differ)")


def compare(decision_dir: Path, grid: Path, tie: float = 0.0, any_card: bool = False) -> int:
    path = decision_dir / "decision.json"
    if not path.is_file():
        raise UsageError(f"no decision.json in {decision_dir}")
    d = orjson.loads(path.read_bytes())
    q = d["question"]
    if q.get("kind", "crossover") != "crossover":  # lead: per level; capacity: brackets
        raise UsageError(f"{path}: a {q['kind']} decision; this compares crossover answers")
    decided = [finding(f) for f in d["findings"]]
    cfg = PolicyConfig(tie_rel=tie)
    with tempfile.TemporaryDirectory() as tmp:
        grid_db = copy_database(grid, Path(tmp) / "grid.db")
        live_db = copy_database(decision_dir, Path(tmp) / "live.db")
        cards = same_card(live_db, grid_db, any_card)
        r = replay(grid_db, targets=q["targets"], metrics=q["metrics"], cfg=cfg)
        # the decision's own database read as the replay reads a grid: the sweep analysis
        # of all its runs (each pair's lead level by level) and each target's measuring
        # time (its runs' spans, every call of a resumed decision)
        mine = replay(live_db, targets=q["targets"], metrics=q["metrics"], cfg=cfg)
        rec = Recorded(live_db)
        try:
            live_levels, starts = sorted(rec.runs), rec.engine_starts()
        finally:
            rec.close()
    mine_all = mine.grid_findings
    if tie > 0.0:  # decision.json's findings were read without the margin
        decided = list(mine_all)
    same = 0
    rows = []
    for c in r.comparisons:
        pair = {c.a, c.b}
        ours = [f for f in decided if {f.a, f.b} == pair and f.metric == c.metric]
        theirs = [f for f in r.grid_findings if {f.a, f.b} == pair and f.metric == c.metric]
        ok = same_conclusion(theirs, ours)
        same += ok
        rows.append((c.a, c.b, c.metric, describe(theirs), describe(ours), ok))
    print(cards)
    print()
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
    # what the decision cost, beside the grid: measuring time and engine starts
    live_s = mine.grid_seconds
    grid_s = r.grid_seconds
    print()
    print("| target | levels | measuring s | grid's measuring s | starts: ready s (stop s) |")
    print("|---|---|---:|---:|---|")
    for t in q["targets"]:
        levels = sorted({c for tt, c, _ in live_levels if tt == t})
        st = ", ".join(
            f"{x.ready_s:.0f} ({x.stop_s:.1f})" if x.stop_s is not None else f"{x.ready_s:.0f}"
            for x in starts
            if x.target == t
        )
        print(
            f"| {t} | {','.join(str(c) for c in levels)} | {live_s.get(t, 0.0):.0f} | "
            f"{grid_s.get(t, 0.0):.0f} | {st} |"
        )
    measuring, grid_total = sum(live_s.values()), sum(grid_s.values())
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
    parser.add_argument(
        "--any-card",
        action="store_true",
        help="compare even where the decision and the grid ran on different GPUs",
    )
    args = parser.parse_args(argv)
    if not 0.0 <= args.tie_margin < 1.0:
        parser.error(f"--tie-margin {args.tie_margin:g}: give a share, 0 <= M < 1")
    try:
        return compare(args.decision, args.grid, args.tie_margin, args.any_card)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    from crossover.pipes import run_tool

    run_tool(lambda: main(sys.argv[1:]))
