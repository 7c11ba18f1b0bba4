"""The decision as text (terminal lines) and as JSON (``--json``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from crossover.analysis.crossovers import format_crossover, metric_spec
from crossover.decide.model import Decision


def _levels(levels: tuple[int, ...] | list[int]) -> str:
    return ",".join(str(c) for c in levels) or "none"


def decision_lines(d: Decision) -> list[str]:
    """What was concluded, at what confidence, and what was not measured and why."""
    q = d.question
    metrics = ", ".join(metric_spec(m).label for m in q.metrics)
    lines: list[str] = []
    if q.kind == "capacity":
        assert q.slo is not None
        lines.append(f"question: which target serves the most concurrency with {q.slo.describe()}")
        for t, (lo, hi) in d.capacity.items():
            meets = f"meets it up to {lo}" if lo is not None else "fails it at every level"
            fails = f", fails it at {hi}" if hi is not None else ", never failed it"
            lines.append(f"  {t}: {meets}{fails if lo is not None else ''}")
        if d.leader is None:
            lines.append("answer: no target meets the SLO at any level measured")
        elif d.confidence > 0:
            lines.append(f"answer: {d.leader} (its capacity bracket is above every other's)")
        else:
            lines.append(f"answer: {d.leader} by its last level meeting the SLO, not surely")
    else:
        at = f" at {_levels(q.at)}" if q.kind == "lead" and q.at else ""
        lines.append(
            f"question: {'who leads' if q.kind == 'lead' else 'where the targets cross'}"
            f"{at} on {metrics} ({', '.join(q.targets)})"
        )
        lines.append(
            f"answer ({d.confidence:.0%} intervals, as the sweep's analysis computes them):"
        )
        for f in d.findings:
            lines.append(f"  {format_crossover(f)}")
    if d.skipped:
        lines.append("not measured:")
        for s in d.skipped:
            lines.append(f"  {s.target} at {_levels(s.levels)}: {s.reason}")
            if s.assumption:
                lines.append(f"    assumes {s.assumption}")
            if s.checked:
                lines.append(f"    checked: {s.checked}")
    for n in d.notes:
        lines.append(f"note: {n}")
    return lines


def decision_json(d: Decision, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The decision as a JSON object (``"schema": "crossover.decision/1"``)."""
    q = d.question
    return {
        "schema": "crossover.decision/1",
        "question": {
            "kind": q.kind,
            "targets": list(q.targets),
            "levels": list(q.levels),
            "metrics": list(q.metrics),
            "at": list(q.at),
            "slo": {"metric": q.slo.metric, "limit": q.slo.limit} if q.slo else None,
            "repeats": q.repeats,
        },
        "confidence": d.confidence,
        "findings": [
            {
                "metric": f.metric,
                "a": f.a,
                "b": f.b,
                "kind": f.kind,
                "leader": f.leader,
                "below": f.below,
                "above": f.above,
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
        **(extra or {}),
    }
