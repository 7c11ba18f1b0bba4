"""Crossovers between targets of two sweeps measured on different days (cross-session).

    python scripts/h200/cross_session.py \\
        docs/results/h200/sglang-a/sweep.json sglang,vllm \\
        docs/results/h200/vllm-a/sweep.json llamacpp-graphs-nocache,vllm \\
        [--metrics total_tokens_per_s,itl_ms.p50] [--detail] [--out DIR]

Each target is renamed NAME@SESSION (SESSION: the sweep's folder name, e.g.
`sglang@sglang-a`, `vllm@vllm-a`), the runs of both sweeps go into one sweep file, and the
project's own analysis (`crossover.analysis.crossovers.analyze_sweep`: per level the
difference of the means with a Welch interval from the repeats, a crossover only between
two levels with significant, opposite leads) runs on the union. Only levels that both
targets of a pair measured are compared.

Every pair is labelled `same session` or `cross-session`. A cross-session result compares
machines on different days as well as engines; a target that both sweeps measured under
the same name (vLLM here) is the drift check: it is compared with itself across the two
sessions, level by level, and printed first. A cross-session lead is only worth what the
drift check allows.

`--detail` prints every level of every pair (A - B relative to B, the interval,
significant or not), as the drift check does. With `--out DIR` the union is
written to DIR/sweep.json (findings included), for `crossover report DIR`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from crossover.analysis.crossovers import (
    METRICS,
    Finding,
    analyze_sweep,
    findings_to_schema,
    format_crossover,
    metric_spec,
)
from crossover.analysis.schema import SweepFile

#: workload fields that must agree for two sweeps' runs to be the same work
SAME_WORK = ("input_tokens", "output_tokens", "endpoint", "seed", "prompts_file")


def session_name(path: Path) -> str:
    return path.resolve().parent.name


def take(sweep: SweepFile, names: list[str], session: str) -> SweepFile:
    """The named targets of one sweep, renamed NAME@SESSION."""
    missing = [n for n in names if n not in sweep.target_names()]
    if missing:
        raise SystemExit(f"{session}: no target {', '.join(missing)} (has {sweep.target_names()})")
    targets = [
        t.model_copy(update={"name": f"{t.name}@{session}"})
        for t in sweep.targets
        if t.name in names
    ]
    runs = [
        r.model_copy(update={"target": f"{r.target}@{session}"})
        for r in sweep.runs
        if r.target in names
    ]
    roof = [
        f.model_copy(update={"target": f"{f.target}@{session}"})
        for f in sweep.roofline
        if f.target in names
    ]
    return SweepFile(targets=targets, runs=runs, roofline=roof, workload=sweep.workload)


def check_same_work(a: SweepFile, b: SweepFile, la: str, lb: str) -> None:
    wa, wb = a.workload or {}, b.workload or {}
    diff = [k for k in SAME_WORK if wa.get(k) != wb.get(k)]
    if diff:
        raise SystemExit(
            f"{la} and {lb} ran different work: "
            + ", ".join(f"{k} {wa.get(k)} vs {wb.get(k)}" for k in diff)
        )


def pct(x: float) -> str:
    return f"{100.0 * x:+.1f}%"


def drift_lines(f: Finding) -> list[str]:
    """Level by level: A - B relative to B, its interval, and whether it is significant."""
    out = []
    for lv in f.per_level:
        base = lv.mean_b or 1.0
        d = lv.diff
        sig = f"significant, {lv.lead} better" if lv.lead else "not significant"
        out.append(
            f"    c={lv.concurrency:g}: {lv.mean_a:,.1f} vs {lv.mean_b:,.1f} "
            f"({pct(d.mean / base)}, interval {pct(d.lo / base)} to {pct(d.hi / base)}, "
            f"{d.method}, n={lv.n_a}+{lv.n_b}; {sig})"
        )
    return out


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("sweep_a", type=Path)
    ap.add_argument("targets_a")
    ap.add_argument("sweep_b", type=Path)
    ap.add_argument("targets_b")
    ap.add_argument("--metrics", default="", help="comma-separated metric keys (default: all)")
    ap.add_argument("--out", type=Path, default=None, help="write the union to OUT/sweep.json")
    ap.add_argument("--detail", action="store_true", help="every level of every pair too")
    args = ap.parse_args(argv)

    la, lb = session_name(args.sweep_a), session_name(args.sweep_b)
    if la == lb:
        la, lb = f"{la}-a", f"{lb}-b"
    sa, sb = SweepFile.read(args.sweep_a), SweepFile.read(args.sweep_b)
    check_same_work(sa, sb, la, lb)
    a = take(sa, args.targets_a.split(","), la)
    b = take(sb, args.targets_b.split(","), lb)
    union = SweepFile(
        targets=[*a.targets, *b.targets],
        runs=[*a.runs, *b.runs],
        roofline=[*a.roofline, *b.roofline],
        workload=sa.workload,
        started_at=sa.started_at,
    )
    metrics = tuple(metric_spec(k) for k in args.metrics.split(",")) if args.metrics else METRICS
    findings = analyze_sweep(union, metrics=metrics)

    def session(name: str) -> str:
        return name.rsplit("@", 1)[1]

    def base(name: str) -> str:
        return name.rsplit("@", 1)[0]

    # one entry per metric and pair (a pair's findings share its per-level differences)
    pairs: dict[tuple[str, str, str], list[Finding]] = {}
    for f in findings:
        pairs.setdefault((f.metric, f.a, f.b), []).append(f)

    def verdict(fs: list[Finding]) -> str:
        f = fs[0]
        if not f.per_level:
            return "no level measured by both"
        parts = []
        for x in fs:
            if x.kind == "crossover":
                parts.append(format_crossover(x).split(": ", 1)[1])
            elif x.kind == "inconclusive":
                assert x.bracket is not None
                parts.append(
                    f"inconclusive between {x.bracket[0]:g} and {x.bracket[1]:g} ({x.reason})"
                )
        sig = [f"{lv.concurrency:g} ({lv.lead})" for lv in f.per_level if lv.lead]
        if not parts:
            parts.append("no crossover in the range measured")
        levels = f"{f.per_level[0].concurrency:g}-{f.per_level[-1].concurrency:g}"
        lead = "significant at c=" + ", ".join(sig) if sig else "no level significant"
        return f"{'; '.join(parts)}; levels {levels}, {lead}"

    print(f"cross-session: {la} (started {sa.started_at}) and {lb} (started {sb.started_at})")
    work = ", ".join(f"{k}={(sa.workload or {}).get(k)}" for k in SAME_WORK)
    print(f"workload (the same in both): {work}")
    # the drift check: one target name in both sessions, compared with itself
    shared = sorted({base(t.name) for t in a.targets} & {base(t.name) for t in b.targets})
    for name in shared:
        print(f"\ndrift check: {name}@{la} vs {name}@{lb} (the same target on two days)")
        for (metric, fa, fb), fs in pairs.items():
            if {fa, fb} != {f"{name}@{la}", f"{name}@{lb}"} or not fs[0].per_level:
                continue
            print(f"  {metric_spec(metric).label}: {verdict(fs)}")
            print("\n".join(drift_lines(fs[0])))
    for label, same in (("cross-session", False), ("same session", True)):
        print(f"\n{label} pairs:")
        for (metric, fa, fb), fs in pairs.items():
            if (session(fa) == session(fb)) != same or base(fa) == base(fb):
                continue
            print(f"  [{label}] {metric_spec(metric).label}: {fa} vs {fb}: {verdict(fs)}")
            if args.detail and fs[0].per_level:
                print("\n".join(drift_lines(fs[0])))
    if args.out:
        xs, inc = findings_to_schema(findings)
        union.crossovers, union.inconclusive = xs, inc
        args.out.mkdir(parents=True, exist_ok=True)
        union.write(args.out / "sweep.json")
        print(f"\nwritten: {args.out / 'sweep.json'} (crossover report {args.out})")


if __name__ == "__main__":
    main(sys.argv[1:])
