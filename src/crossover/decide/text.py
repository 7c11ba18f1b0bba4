"""The decision as text (terminal lines) and as JSON (``--json``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from crossover.analysis.crossovers import Finding, format_crossover, metric_spec
from crossover.decide.model import Decision, LevelNum, Question, fmt_level, fmt_levels
from crossover.spec.slo import SloTerm


def slo_text(term: SloTerm) -> str:
    """``TTFT p99 <= 500 ms``: the term as the compared metric is labelled."""
    spec = metric_spec(term.path)
    return f"{spec.label} <= {term.limit:g} {spec.unit}".rstrip()


def _levels(levels: tuple[LevelNum, ...] | list[LevelNum]) -> str:
    return fmt_levels(levels)


def _num(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def level_lines(f: Finding, at: tuple[LevelNum, ...]) -> list[str]:
    """A lead question's answer for one pair and metric, at each of its levels alone
    (``total tokens/s at 64: batched leads fast (45,398 vs 9,103 tok/s)``): the
    analysis's own per-level difference, nothing placed between the levels."""
    spec = metric_spec(f.metric)
    unit = f" {spec.unit}" if spec.unit else ""
    per = " requests/s" if f.axis == "rate" else ""
    out: list[tuple[float, str]] = []
    compared = {lv.concurrency for lv in f.per_level}
    for c in at:
        if float(c) not in compared:
            # an asked level the comparison has no values of both at: said, not left blank
            why = (
                "a level too short for a steady state on a side, or without a valid run of "
                "both: the notes say which"
                if spec.steady_only and f.axis == "rate"
                else "no valid run of both there"
            )
            out.append(
                (float(c), f"{spec.label} at {c:g}{per}: {f.a} vs {f.b}: not compared ({why})")
            )
    for lv in f.per_level:
        if at and lv.concurrency not in at:
            continue
        level = f"{spec.label} at {lv.concurrency:g}{per}"
        means = f"({_num(lv.mean_a)} vs {_num(lv.mean_b)}{unit})"
        if lv.kept_up:
            line = f"{level}: {f.a} vs {f.b}: both kept up with the arrivals {means}"
        elif lv.lead is None:
            line = f"{level}: {f.a} vs {f.b}: no significant difference {means}"
        else:
            other = f.b if lv.lead == f.a else f.a
            lead, behind = (lv.mean_a, lv.mean_b) if lv.lead == f.a else (lv.mean_b, lv.mean_a)
            line = f"{level}: {lv.lead} leads {other} ({_num(lead)} vs {_num(behind)}{unit})"
        out.append((lv.concurrency, line))
    return [line for _, line in sorted(out, key=lambda x: x[0])]


def lead_at(f: Finding, at: tuple[LevelNum, ...]) -> list[tuple[float, str | None]]:
    """A lead question's answer for one pair and metric: each asked level's leader
    (``None``: no significant difference there), the analysis's own per-level lead."""
    return [(lv.concurrency, lv.lead) for lv in f.per_level if not at or lv.concurrency in at]


def _lead_json(f: Finding, at: tuple[LevelNum, ...]) -> dict[str, Any]:
    """A lead finding as JSON: per asked level alone, as printed, nothing across levels
    (the crossover the same levels would read, e.g. "fast leads below 4.6 (1.0-64.0)",
    is no answer to "who leads at 1 and 64")."""
    lines = level_lines(f, at)
    by = {lv.concurrency: lv for lv in f.per_level}
    return {
        "metric": f.metric,
        "a": f.a,
        "b": f.b,
        "kind": "lead",
        "axis": f.axis,
        "levels": [c for c, _ in lead_at(f, at)],
        "leads": [
            {"level": c, "leader": who, "mean_a": by[c].mean_a, "mean_b": by[c].mean_b}
            for c, who in lead_at(f, at)
        ],
        "text": "; ".join(lines),
        "at_levels": lines,
    }


def decision_lines(d: Decision) -> list[str]:
    """What was concluded, at what confidence, and what was not measured and why."""
    q = d.question
    metrics = ", ".join(metric_spec(m).label for m in q.metrics)
    lines: list[str] = []
    if q.kind == "capacity":
        assert q.slo is not None
        lines.append(f"question: which target serves the most concurrency with {slo_text(q.slo)}")
        for t, (lo, hi) in d.capacity.items():
            meets = (
                f"meets it up to {lo}"
                if lo is not None
                else f"fails it at {hi}, the lowest level measured"
                if hi is not None
                else "fails it at every level"
            )
            fails = f", fails it at {hi}" if hi is not None else ", never failed it"
            lines.append(f"  {t}: {meets}{fails if lo is not None else ''}")
        top = max((lo for lo, _ in d.capacity.values() if lo is not None), default=None)
        if d.leader is None and top is not None:
            tied = ", ".join(t for t, (lo, _) in d.capacity.items() if lo == top)
            lines.append(f"answer: no target leads: {tied} meet it up to {top} alike")
        elif d.leader is None:
            lines.append("answer: no target meets the SLO at any level measured")
        elif d.confidence > 0:
            lines.append(f"answer: {d.leader} (its capacity bracket is above every other's)")
        else:
            lines.append(f"answer: {d.leader} by its last level meeting the SLO, not surely")
    else:
        per = " requests/s" if q.axis == "rate" else ""
        at = f" at {_levels(q.at)}{per}" if q.kind == "lead" and q.at else ""
        along = " along arrival rates (open loop)" if q.axis == "rate" else ""
        lines.append(
            f"question: {'who leads' if q.kind == 'lead' else 'where the targets cross'}"
            f"{at}{along} on {metrics} ({', '.join(q.targets)})"
        )
        lines.append(
            f"answer ({d.confidence:.0%} intervals, as the sweep's analysis computes them):"
        )
        if q.kind == "lead":  # at the levels asked, nothing placed between them
            lines += [f"  {x}" for f in d.findings for x in level_lines(f, q.at)]
        else:
            lines += [f"  {format_crossover(f)}" for f in d.findings]
    if d.skipped:
        lines.append("not measured:")
        for s in d.skipped:
            per = " requests/s" if q.axis == "rate" else ""
            lines.append(f"  {s.target} at {_levels(s.levels)}{per}: {s.reason}")
            if s.assumption:
                lines.append(f"    assumes {s.assumption}")
            if s.checked:
                lines.append(f"    checked: {s.checked}")
    if d.budget is not None:
        allowed, grid = d.budget
        lines.append(
            f"time budget: {allowed:.0f} s (of the grid's {grid:.0f} s: its measuring, "
            "estimated from the levels measured, and one engine start per target where "
            "starts are timed)"
        )
    if d.deferred:
        lines.append("not measured within the time budget (each would have cost about):")
        for x in d.deferred:
            lines.append(
                f"  {x.target} at {fmt_level(x.level)} (repeat {x.repeat}): {x.seconds:.0f} s, "
                f"{x.why}; it would settle {x.target} vs {', '.join(x.concerns)} further"
            )
        pairs = sorted({tuple(sorted((x.target, u))) for x in d.deferred for u in x.concerns})
        lines.append(
            "  so these comparisons stand only on what was measured, and need more time: "
            + "; ".join(f"{a} vs {b}" for a, b in pairs)
        )
    for n in d.notes:
        lines.append(f"note: {n}")
    return lines


def question_json(q: Question) -> dict[str, Any]:
    """The question as the decision's and the plan's JSON hold it."""
    return {
        "kind": q.kind,
        "axis": q.axis,
        "targets": list(q.targets),
        "levels": list(q.levels),
        "metrics": list(q.metrics),
        "at": list(q.at),
        "slo": {"metric": q.slo.path, "limit": q.slo.limit} if q.slo else None,
        "repeats": q.repeats,
    }


def decision_json(d: Decision, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The decision as a JSON object (``"schema": "crossover.decision/1"``)."""
    q = d.question
    return {
        "schema": "crossover.decision/1",
        "question": question_json(q),
        "confidence": d.confidence,
        "findings": [
            _lead_json(f, q.at)
            if q.kind == "lead"
            else {
                "metric": f.metric,
                "a": f.a,
                "b": f.b,
                "kind": f.kind,
                "leader": f.leader,
                "below": f.below,
                "above": f.above,
                "axis": f.axis,
                "concurrency": f.concurrency,
                "interval": list(f.interval) if f.interval else None,
                "bracket": list(f.bracket) if f.bracket else None,
                "levels": list(f.levels),
                "text": format_crossover(f),
            }
            for f in d.findings
        ],
        "capacity": {t: list(b) for t, b in d.capacity.items()},
        "leader": d.leader,
        "not_measured": [
            {
                "target": s.target,
                "levels": list(s.levels),
                "reason": s.reason,
                "assumption": s.assumption,
                "checked": s.checked,
            }
            for s in d.skipped
        ],
        "notes": list(d.notes),
        "budget": ({"seconds": d.budget[0], "grid_estimate_s": d.budget[1]} if d.budget else None),
        "deferred": [x.__dict__ for x in d.deferred],
        **(extra or {}),
    }
