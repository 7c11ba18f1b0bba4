"""The calibration's report: fitted profiles, error tables and held-out rows, as markdown.

``python -m crossover.advise.calibrate`` prints it; docs/results/h200/calibration.md
carries it unedited (a test checks it is current).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from crossover.advise.accuracy import REGIMES, Row
from crossover.advise.efficiency import FIT_TERMS, Calibration, EngineProfile
from crossover.advise.fit import BOUNDS
from crossover.advise.results import STALL_TTFT_RATIO
from crossover.words import plural


class Report(BaseModel):
    calibration: Calibration
    in_sample: list[Row]
    heldout_levels: list[Row]
    heldout_targets: list[Row]
    references: list[Row]
    stalled: list[str] = []  # "target c=N: k of n repeats" left out as stalls
    moe_in_sample: list[Row] = []  # the MoE sweep's rows under the fitted MoE term
    moe_heldout_levels: list[Row] = []  # each MoE level refitted without it


def at_bound(profile: EngineProfile) -> list[str]:
    """Fitted terms that ended on a bound: the data do not pin them down."""
    out = []
    for t in profile.fitted:
        lo, hi = BOUNDS[t]
        v = float(getattr(profile, t))
        if v <= lo * 1.01 or v >= hi * 0.99:
            out.append(t)
    return out


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}%"


def markdown(report: Report) -> str:
    cal = report.calibration
    lines = ["## Fitted profiles", ""]
    lines.append(
        "| profile | points | bandwidth eff. | decode compute eff. | step us/layer | us/sequence "
        "| prefill compute eff. | prefill overhead ms | all-reduce floor us | fitted (at a bound) |"
    )
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for p in cal.profiles.values():
        bound = at_bound(p)
        fitted = ", ".join(f"{t}*" if t in bound else t for t in p.fitted)
        if p.inherited_from:
            fitted += f"; rest from {p.inherited_from}"
        elif set(p.fitted) != set(FIT_TERMS):
            fitted += "; rest: roofline defaults"
        lines.append(
            f"| {p.name} | {p.points} | {p.bandwidth_efficiency:.3f} "
            f"| {p.decode_compute_efficiency:.3f} | {p.step_us_per_layer:.1f} | {p.seq_us:.1f} "
            f"| {p.prefill_compute_efficiency:.3f} | {p.prefill_overhead_ms:.1f} "
            f"| {p.allreduce_floor_us:.1f} | {fitted} |"
        )
    borrowed = ", ".join(f"{k} uses {v}" for k, v in cal.borrow.items())
    lines += [
        "",
        f"Not measured, borrowed: {borrowed or 'none'}. `*`: the term ended on its bound.",
        "",
    ]
    if report.stalled:
        lines += [
            "Left out as stalls (TTFT p50 at least "
            f"{STALL_TTFT_RATIO:g}x the level's fastest repeat): "
            + "; ".join(report.stalled)
            + ".",
            "",
        ]
    schemes = [
        ("in-sample (fitted to these rows)", "in_sample"),
        ("held-out levels (each level refitted without it)", "heldout_levels"),
        ("held-out targets (each target refitted without it)", "heldout_targets"),
        ("references.yaml (never fitted)", "references"),
        ("MoE in-sample (the MoE term fitted to these rows)", "moe_in_sample"),
        ("MoE held-out levels (the MoE term refitted without each)", "moe_heldout_levels"),
    ]
    names = sorted({k for s in cal.errors.values() for k in s.per_engine})
    lines.append("## Mean absolute error (output tok/s and decode tok/s per user)")
    lines.append("")
    lines.append("| rows | n | all | " + " | ".join(names) + " | " + " | ".join(REGIMES) + " |")
    lines.append("|---|---:|---:|" + "---:|" * (len(names) + len(REGIMES)))
    for label, key in schemes:
        s = cal.errors.get(key)
        if s is None:
            continue
        lines.append(
            f"| {label} | {s.n} | {_pct(s.mean_abs_error_pct)} | "
            + " | ".join(_pct(s.per_engine.get(n)) for n in names)
            + " | "
            + " | ".join(_pct(s.per_regime.get(r)) for r in REGIMES)
            + " |"
        )
    if cal.worst is not None:
        w = cal.worst
        lines += [
            "",
            f"Worst regime (held-out levels): **{w.profile} at {w.regime}**, "
            f"mean |error| {w.mean_abs_error_pct:.1f}% over {plural(w.n, 'row')}.",
        ]
    moe = [p for p in cal.profiles.values() if p.moe_seq_us_per_layer is not None]
    if moe:
        lines += ["", "## MoE terms (every other term held at the dense fit)", ""]
        lines += [
            f"* {p.name}: {p.moe_seq_us_per_layer:.1f} us per sequence per step per MoE layer "
            f"(dense: {p.seq_us:.1f} us per sequence per step)"
            + _moe_step_text(p.moe_step_us_per_layer)
            + ", fitted to "
            + ", ".join(p.moe_targets)
            for p in moe
        ]
    for title, rows in (
        ("MoE held-out levels", report.moe_heldout_levels),
        ("Held-out levels", report.heldout_levels),
        ("Held-out targets", report.heldout_targets),
        ("References (never fitted)", report.references),
    ):
        lines += ["", f"## {title}", "", _row_table(rows)]
    return "\n".join(lines) + "\n"


def _row_table(rows: list[Row]) -> str:
    lines = [
        "| profile | target | sweep | c | metric | measured | predicted | error |",
        "|---|---|---|---:|---|---:|---:|---:|",
    ]
    for r in sorted(
        rows, key=lambda r: (r.profile or "", r.sweep or "", r.target, r.concurrency, r.metric)
    ):
        sweep = Path(r.sweep).parent.name if r.sweep and r.sweep.endswith(".json") else r.sweep
        lines.append(
            f"| {r.profile} | {r.target} | {sweep} | {r.concurrency} | {r.metric} "
            f"| {r.measured:.1f} | {r.predicted:.1f} | {r.error_pct:+.1f}% |"
        )
    return "\n".join(lines)


def _moe_step_text(us: float | None) -> str:
    """The MoE step term beside the per-sequence one: `` and 19.7 us per step per MoE
    layer whatever the batch``; nothing where it was not fitted or came out nil (under
    0.1 us: the fit's floor, llama.cpp's)."""
    if us is None or us < 0.1:
        return ""
    return f" and {us:.1f} us per step per MoE layer whatever the batch"
