"""A ``crossover decide`` answer beside the sweep it measured: ``DIR/decision.json``
(``crossover.decision/1``, which a live decision writes into its ``--out``) read for the
report's "Decision" section. Every string in it is shown as text (the template escapes
it): target names and the reasons come from the user's YAML and the engines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from crossover.analysis.crossovers import metric_spec
from crossover.errors import UsageError, first_line
from crossover.words import plural

#: the file ``crossover report`` shows beside a sweep when the folder holds it
DECISION_FILE = "decision.json"
DECISION_SCHEMA = "crossover.decision/1"


def load_decision(sweep_dir: Path) -> dict[str, Any] | None:
    """``sweep_dir/decision.json`` if present; one-line ``UsageError`` when it is not a
    ``crossover.decision/1`` object."""
    path = sweep_dir / DECISION_FILE
    if not path.is_file():
        return None
    try:
        raw = orjson.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not readable JSON ({first_line(exc)})") from None
    if not isinstance(raw, dict) or raw.get("schema") != DECISION_SCHEMA:
        raise UsageError(f'{path}: not a decision (expected "schema": "{DECISION_SCHEMA}")')
    return raw


def _label(metric: Any) -> str:
    try:
        return metric_spec(str(metric)).label
    except (KeyError, ValueError):
        return str(metric)


def _level(c: Any) -> str:
    """A level as given: ``4``, a rate ``2.5`` (JSON holds a rate as ``4.0``)."""
    return f"{c:g}" if isinstance(c, int | float) else str(c)


def _levels(levels: Any) -> str:
    return ",".join(_level(c) for c in levels or []) or "none"


def _question(q: dict[str, Any]) -> str:
    targets = ", ".join(str(t) for t in q.get("targets") or [])
    slo = q.get("slo")
    if q.get("kind") == "capacity" and isinstance(slo, dict):
        return (
            f"which target serves the most concurrency with {_label(slo.get('metric'))} "
            f"<= {slo.get('limit')} ({targets})"
        )
    metrics = ", ".join(_label(m) for m in q.get("metrics") or [])
    rates = q.get("axis") == "rate"
    along = " along arrival rates (open loop)" if rates else ""
    if q.get("kind") == "lead":
        per = " requests/s" if rates else ""
        at = f" at {_levels(q.get('at'))}{per}" if q.get("at") else ""
        return f"who leads{at}{along} on {metrics} ({targets})"
    return f"where the targets cross{along} on {metrics} ({targets})"


def _seconds(v: Any) -> str:
    return f"{v:.1f}" if isinstance(v, int | float) else "-"


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _times(d: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    """A live decision's rows per target (its engine's wall time, measuring, starts and
    levels) and the total line; a replay's measuring against the grid's."""
    live = d.get("live")
    if isinstance(live, dict) and isinstance(live.get("times"), dict):
        rows = []
        wall = 0.0
        for t, tt in live["times"].items():
            tt = tt if isinstance(tt, dict) else {}
            ready = ", ".join(_seconds(x) for x in tt.get("ready_s") or [])
            starts = str(int(tt.get("starts") or 0)) if tt.get("launched") else "- (its URL)"
            rows.append(
                {
                    "target": str(t),
                    "wall": _seconds(tt.get("wall_s")),
                    "measuring": _seconds(tt.get("measuring_s")),
                    "starts": f"{starts} ({ready} s to ready)" if ready else starts,
                    "levels": _levels(sorted(tt.get("levels") or [])),
                    "stopped": [f"level {x}" for x in tt.get("stopped") or []],
                }
            )
            w = tt.get("wall_s")
            wall += w if isinstance(w, int | float) else 0.0
        total = (
            f"GPU time: {wall:.1f} s ({wall / 60:.1f} GPU-minutes), measured: each target's "
            f"engine from its start to its stop; {plural(int(live.get('measured') or 0), 'level')} "
            f"measured of the grid's {live.get('grid_levels')}"
        )
        return rows, total
    replay = d.get("replay")
    if isinstance(replay, dict) and isinstance(replay.get("seconds"), dict):
        grid = _dict(replay.get("grid_seconds"))
        rows = [
            {
                "target": str(t),
                "wall": "-",
                "measuring": _seconds(s),
                "starts": "-",
                "levels": "-",
                "stopped": [f"of the grid's {_seconds(grid.get(t))} s"],
            }
            for t, s in replay["seconds"].items()
        ]
        fraction = replay.get("fraction")
        share = f" ({fraction:.0%} of the grid's)" if isinstance(fraction, int | float) else ""
        return rows, f"replayed from {replay.get('database')}: measuring{share}"
    return [], None


def decision_context(d: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the report's "Decision" section shows of a ``crossover.decision/1`` object."""
    if not d:
        return None
    q = _dict(d.get("question"))
    findings = [f for f in d.get("findings") or [] if isinstance(f, dict)]
    answer = []
    for f in findings:
        answer += [str(x) for x in f.get("at_levels") or []] or [str(f.get("text", ""))]
    capacity = _dict(d.get("capacity"))
    if q.get("kind") == "capacity":
        leader = d.get("leader")
        answer = [
            f"{t}: meets it up to {b[0]}" + (f", fails it at {b[1]}" if b[1] is not None else "")
            if isinstance(b, list) and len(b) == 2 and b[0] is not None
            else f"{t}: meets it at no level measured"
            for t, b in capacity.items()
        ] + [f"answer: {leader}" if leader else "answer: no target leads"]
    skipped = [
        {
            "what": f"{s.get('target')} at {_levels(s.get('levels'))}",
            "reason": str(s.get("reason") or ""),
            "assumption": str(s.get("assumption") or ""),
            "checked": str(s.get("checked") or ""),
        }
        for s in d.get("not_measured") or []
        if isinstance(s, dict)
    ]
    deferred = [
        f"{x.get('target')} at {_level(x.get('level'))} (repeat {int(x.get('repeat') or 0)}): "
        f"about {_seconds(x.get('seconds'))} s, {x.get('why')}"
        for x in d.get("deferred") or []
        if isinstance(x, dict)
    ]
    rows, total = _times(d)
    confidence = d.get("confidence")
    return {
        "question": _question(q),
        "confidence": f"{confidence:.0%}" if isinstance(confidence, int | float) else "-",
        "answer": answer,
        "skipped": skipped,
        "deferred": deferred,
        "notes": [str(n) for n in d.get("notes") or []],
        "times": rows,
        "total": total,
    }
