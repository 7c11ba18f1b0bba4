"""A decision's plan before anything is measured (``decide --check``): the question, the
grid's size, each target's first-pass levels in the order measured (the reference first),
which of them a live decision measures sequentially and which whole, and, from the
advisor's forecast, the session's GPU time (:mod:`crossover.decide.estimate`).

The plan is data (:class:`Plan`); :func:`plan_lines` says it as ``decide --check`` prints
it and :func:`plan_json` is its ``--json`` (``"schema": "crossover.decision-plan/1"``). The
CLI only echoes and writes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crossover.decide.coarse import first_pass_levels, first_pass_steps
from crossover.decide.estimate import (
    PassEstimate,
    SessionEstimate,
    decision_estimate,
    rate_estimate,
)
from crossover.decide.estimate import estimate_line as _estimate_line
from crossover.decide.model import LevelNum, Measure, Question, fmt_levels
from crossover.decide.replay import load_prior
from crossover.decide.starts import estimated_start
from crossover.decide.state import PolicyConfig, Prior
from crossover.decide.text import question_json
from crossover.errors import UsageError
from crossover.sweep.config import SweepConfig
from crossover.words import plural

SCHEMA = "crossover.decision-plan/1"


@dataclass(frozen=True)
class Plan:
    """What ``decide --check`` says of a decision: ``first_pass`` each target's levels,
    in the first pass's order; ``grid_levels`` the grid's level runs (every target's
    covered level, every repeat). ``prior_file``: a forecast was given (``--prior``);
    ``estimate`` is then its GPU time (along rates always: a floor from the arrivals,
    ``arrivals_only``), or ``None`` where the forecast could not be read
    for output tokens/s (``unread`` says why). ``steps``: each first-pass level as the
    live decision asks for it (:func:`first_pass_steps`), in ``first_pass``'s order."""

    question: Question
    first_pass: dict[str, list[LevelNum]]
    steps: dict[str, list[Measure]]
    grid_levels: int
    reference_from_prior: bool
    prior_file: bool
    estimate: SessionEstimate | None
    unread: str | None
    start_s: float
    start_s_given: bool


def decision_plan(
    cfg: SweepConfig,
    q: Question,
    prior: Prior | None,
    policy: PolicyConfig,
    prior_path: Path | None,
    start_s: float | None,
) -> Plan:
    """The plan of question ``q`` over ``cfg`` under ``policy``: the first pass where
    ``prior`` (the forecast's total tokens/s) puts it, and its GPU time from the same
    forecast's output tokens/s (``prior_path``, read again for that column)."""
    first = first_pass_levels(q, prior, policy.coarse_step, keep_last=policy.budget is None)
    grid = sum(1 for t in q.targets for c in q.levels if q.covers(t, c)) * q.repeats
    # a start's cost: --start-s for every target, else each engine's estimate (its median
    # start where this project measured it: llama.cpp seconds, vLLM and SGLang minutes)
    per = {t.name: estimated_start(t.engine).seconds for t in cfg.targets}
    start: float | dict[str, float] = per if start_s is None else start_s
    est: SessionEstimate | None = None
    unread: str | None = None
    if q.axis == "rate":
        # an open loop's runs last as long as their arrivals: a floor without a forecast
        est = rate_estimate(cfg, q, first, policy, start)
    elif prior_path is not None:
        try:
            rates = load_prior(prior_path, "output_tok_s")
        except UsageError as exc:
            unread = str(exc)
        else:
            est = decision_estimate(cfg, q, first, rates, policy, start)
    return Plan(
        question=q,
        first_pass=first,
        steps=first_pass_steps(q, first),
        grid_levels=grid,
        reference_from_prior=bool(prior),
        prior_file=prior_path is not None,
        estimate=est,
        unread=unread,
        start_s=start_s if start_s is not None else max(per.values(), default=0.0),
        start_s_given=start_s is not None,
    )


def estimate_text(p: Plan) -> str:
    """The plan's GPU-time line: the grid's and the first pass's, or why there is none."""
    if p.estimate is not None and p.estimate.arrivals_only:
        return _estimate_line(p.estimate, "--start-s" if p.start_s_given else "")
    if not p.prior_file:
        return _estimate_line(None)
    if p.estimate is None:
        return f"estimate: none; {p.unread}"
    return _estimate_line(p.estimate, "--start-s" if p.start_s_given else "")


#: how a later target's first-pass level is measured, and why, as the plan says it
_HOW = {
    "sequential": ("sequential", "each stops once it settles against those measured there"),
    "whole": (
        "whole",
        "a stop would save nothing, each level's requests all sent by the time it may first stop",
    ),
    "alone": ("whole", "the reference is not measured there"),
    "open": ("whole", "an open loop's level runs whole"),
}


def _how(m: Measure, reference: list[LevelNum], rates: bool) -> str:
    if m.sequential:
        return "sequential"
    if rates:
        return "open"
    return "whole" if m.level in reference else "alone"


def later_lines(p: Plan) -> list[str]:
    """How the targets after the reference are measured at their first-pass levels: one
    line per way (sequential; whole where a stop would save nothing; whole where the
    reference is not measured), each target's levels that way, or ``every level``."""
    steps = list(p.steps.values())
    if not steps:
        return []
    reference = [m.level for m in steps[0]]
    ways: dict[str, dict[str, list[LevelNum]]] = {}
    rates = p.question.axis == "rate"
    for mine in steps[1:]:
        for m in mine:
            way = _how(m, reference, rates)
            ways.setdefault(way, {}).setdefault(m.target, []).append(m.level)
    if len(ways) == 1:
        label, why = _HOW[next(iter(ways))]
        return [f"  after it, every level {label}: {why}"]
    return [
        f"  after it, {_HOW[way][0]} ({_HOW[way][1]}): "
        + "; ".join(f"{t} {fmt_levels(cs)}" for t, cs in ways[way].items())
        for way in _HOW
        if way in ways
    ]


def plan_lines(p: Plan) -> list[str]:
    """The plan as ``decide --check`` prints it, after the YAML's check."""
    q = p.question
    order = list(p.first_pass)
    how = "target by target (one engine start each)" if q.group_targets else "level by level"
    leader = "the prior's predicted leader" if p.reference_from_prior else "the YAML's first"
    along = " along arrival rates (requests/s, open loop)" if q.axis == "rate" else ""
    if q.kind == "capacity" and q.slo is not None:
        # one run a level, every level whole, no repeats (crossover.decide.capacity)
        asked = f"capacity under {q.slo.path}<={q.slo.limit:g}"
        later = [
            "  each level whole, one run: a target's first pass stops at the first level "
            "failing the SLO",
            "  then each bracket (last level meeting it, first failing it) that decides the "
            "leader is bisected",
        ]
    else:
        at = f" at {fmt_levels(q.at)}" if q.kind == "lead" else ""
        asked = f"{q.kind}{at} on {', '.join(q.metrics)}"
        wide = " and levels where a crossover is wide" if q.kind == "crossover" else ""
        later = [*later_lines(p), f"  then repeats where a sign is uncertain{wide}"]
    return [
        f"decide plan: {asked}{along}; the grid is {p.grid_levels} levels "
        f"({len(q.targets)} targets, {plural(q.repeats, 'repeat')})",
        f"  first pass {how}, reference {order[0]} ({leader}), its levels whole",
        *(f"  {t}: {fmt_levels(mine)}" for t, mine in p.first_pass.items()),
        *later,
        estimate_text(p),
    ]


def _pass_json(e: PassEstimate | None) -> dict[str, Any] | None:
    if e is None:
        return None
    return {
        "measuring_s": e.measuring_s,
        "runs": e.runs,
        "starts": e.starts,
        "gpu_s": e.gpu_s,
        "gpu_minutes": e.gpu_s / 60,
        "stopped": e.stopped,
    }


def _estimate_json(p: Plan) -> dict[str, Any] | None:
    e = p.estimate
    arrivals = e is not None and e.arrivals_only
    if not p.prior_file and not arrivals:
        return None
    return {
        # an open loop's floor: each run its arrivals alone (warm-up and drain left out)
        "arrivals_only": arrivals,
        # the figure the printed line says: each launched target's own, else --start-s
        "start_s": e.start_s if e else p.start_s,
        "start_s_source": "--start-s" if p.start_s_given else "default",
        "start_s_per_target": dict(e.start_of) if e else {},
        "grid": _pass_json(e.grid) if e else None,
        "first_pass": _pass_json(e.first_pass) if e else None,
        # the first pass's range: its sequential levels each stopped at the first chance
        # (low), each whole (high, the same as ``first_pass``)
        "first_pass_low": _pass_json(e.first_pass_low) if e else None,
        "first_pass_high": _pass_json(e.first_pass) if e else None,
        "missing": [{"target": t, "level": c} for t, c in e.missing] if e else [],
        "text": estimate_text(p),
    }


def plan_json(p: Plan, config: str) -> dict[str, Any]:
    """The plan as a JSON object (``decide --check --json``; ``config``: the YAML's path)."""
    q = p.question
    order = list(p.first_pass)
    return {
        "schema": SCHEMA,
        "config": config,
        "question": question_json(q),
        "grid_levels": p.grid_levels,
        "order": "target" if q.group_targets else "level",
        "reference": order[0] if order else None,
        "reference_from": "prior" if p.reference_from_prior else "config",
        "first_pass": {t: list(levels) for t, levels in p.first_pass.items()},
        "first_pass_steps": {
            t: [{"level": m.level, "sequential": m.sequential, "why": m.why} for m in mine]
            for t, mine in p.steps.items()
        },
        "estimate": _estimate_json(p),
    }
