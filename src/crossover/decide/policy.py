"""The decide policy: from what was measured so far, the next measurement or the answer.

A pure function of its inputs (:func:`next_step`): the question, the observations in the
order they were made, the policy's settings and optionally the advisor's prediction. Each
call works out everything again from the observations, so a resumed decision (or a replay)
reaches the same step from the same evidence. The order of work (docs/decide.md):

1. **First pass**, target by target (one engine start each): the coarse levels (every
   ``coarse_step``-fold step of the grid, its last level, and the levels where the prior
   predicts a crossover), increasing. The first target (the prior's predicted leader, else
   the question's first) is the reference and is measured whole; a later target's level is
   measured first for at most ``budget_factor`` times what the reference's same level took
   (a target far behind shows it long before its level ends), and the rest only when that
   part leaves a lead open (a gap under ``partial_margin``). A target stops early when its
   throughput has saturated (grown under ``saturation_gain`` per doubling of concurrency over
   its last step; a linear curve grows 100%) and every target measured there leads it in
   throughput by ``stop_margin`` or more (significantly) and is ahead on every metric asked,
   no gap narrowing: assuming monotone curves (throughput does not fall with concurrency,
   past saturation a target's latencies grow at least as fast as the leader's), no crossover
   lies ahead. What of the assumption can be measured is checked where measured (and a
   replay checks it against the levels the grid measured).
2. **Repeats where a sign is still uncertain**: a level where one repeat each leaves a
   metric's difference under ``repeat_margin``, within twice the run-to-run spread measured
   on either target, or (before any spread is known) under ``unknown_margin``, gets the next
   repeat of both (up to the grid's repeats), so it is judged as the grid judges it.
3. **Levels where the answer can still change**: a crossover whose interval is wider than
   ``refine_width`` of its level gets the bisection of its segment
   (:func:`crossover.analysis.refine.propose_refinement`), up to ``refine_budget`` levels.

Under a time budget (``budget``) each measurement is weighed by its expected cost against
what is left, and three rules spend it: where engines start, a target's first pass keeps
to its equal part of what was left when it started, shared with the targets still waiting
(:func:`crossover.decide.budget.share_left`); once every target has started, what the
first pass deferred is taken where the engine is up first; a first-pass level whose part
below left a gap open is measured whole (:func:`crossover.decide.budget.rest_expected`).
Where the budget ends the decision, the answer says each deferred measurement, each
inconclusive bracket's bisection and the repeat behind each level lead found on one run of
a side.

Where engines start (``group_targets``), repeats are taken while a target's engine is up:
the reference's at each of its levels (``reference_repeats``: every later target is judged
against them, and a repeat wanted later would cost a restart), a later target's where its
sign against those before it is uncertain. Steps 2 and 3 prefer the target measured last,
so its engine keeps running, and what they want of it comes before the first pass switches
engines; on a target whose start costs more than ``DEAR_START`` of its levels, a crossover
still too wide is measured across its bracket while that engine is up
(:func:`crossover.decide.refine.refinement_wanted`). A capacity
question ("which target serves the most concurrency under an SLO") instead brackets each
target's last level meeting the SLO and first level failing it, stops a target once another
meets the SLO where it fails, and bisects the brackets that decide the leader.

This module orders the work (:func:`next_step`); the parts live beside it: the settings
and the observations indexed (``state.py``), the first pass (``coarse.py``), the skips of
saturated targets (``skip.py``), repeats and refinement (``refine.py``), the time budget's
cost estimates and rules (``budget.py``) and the capacity question (``capacity.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from crossover.decide.budget import (
    grid_estimate,
    measure_cost,
    rest_expected,
    share_left,
    spent_seconds,
)
from crossover.decide.capacity import capacity_step
from crossover.decide.coarse import first_pass, first_pass_all, pass_levels, target_order
from crossover.decide.model import (
    Decision,
    Deferred,
    LevelNum,
    Measure,
    Observation,
    Question,
    Step,
    fmt_levels,
)
from crossover.decide.refine import (
    refinement_wanted,
    repeats_wanted,
    single_run_leads,
    sole_support_repeats,
)
from crossover.decide.skip import check_skips, find_skips
from crossover.decide.state import (
    PolicyConfig,
    Prior,
    State,
    moving_metric_notes,
    overload_notes,
    pair_findings,
    prefer_running,
    short_level_notes,
)

if TYPE_CHECKING:
    from crossover.analysis.gc import GcRun


def next_step(
    q: Question,
    observations: Sequence[Observation],
    cfg: PolicyConfig | None = None,
    prior: Prior | None = None,
    *,
    gc: Sequence[GcRun] = (),
) -> Step:
    """The next measurement to make, or the settled :class:`Decision` (``gc``: the runs a
    logged long garbage collection met, said in its notes, :func:`moving_metric_notes`)."""
    cfg = cfg or PolicyConfig()
    s = State(q, observations, cfg)
    order = target_order(q, prior)
    # under a time budget the grid's last level is not added to the 4-fold steps: the top
    # level is the dearest, and what it would settle is said when it is not measured
    coarse = pass_levels(q, prior, cfg.coarse_step, keep_last=cfg.budget is None)
    if q.kind == "capacity":
        return capacity_step(s, order, coarse)
    deferred: list[Deferred] = []
    budget: tuple[float, float] | None = None
    if cfg.budget is not None:
        grid = cfg.grid_s if cfg.grid_s is not None else grid_estimate(s)
        budget = (cfg.budget * grid, grid)
        spent = spent_seconds(observations, cfg)
    # a budget short of one start per target answers nothing: a target measured alone is
    # compared with none, so nothing is started (its note says so, below)
    hopeless = (
        budget is not None
        and not observations
        and 0.0 < sum(cfg.start_cost(t) for t in order) >= budget[0]
    )
    while True:
        step = _wanted(s, order, coarse)
        if step is None or budget is None:
            break
        if step.budget_s is not None and rest_expected(s, step):
            why = "first pass, whole: its part below left a gap open (a part would cost twice)"
            step = replace(step, budget_s=None, why=why)
        cost = measure_cost(s, step)
        fits = spent + cost <= min(budget[0], share_left(s, order, observations, step, budget[0]))
        if fits and not hopeless:
            return step
        # over the budget: deferred, and the next wanted measurement is weighed instead
        key = (step.target, step.level, step.repeat)
        s.deferred.add(key)
        part = s.runs.get(key)
        if part is not None and not part.complete:
            s.unsettled.add(key)  # its part leaves a gap open: no level of the curve
        concerns = step.concerns or tuple(u for u in q.targets if u != step.target)
        deferred.append(Deferred(step.target, step.level, step.repeat, cost, step.why, concerns))
    if step is not None:
        return step
    if deferred:
        # the budget ended the decision: an inconclusive bracket's bisection is what more
        # time would measure next; said, not measured
        wide = State(q, observations, replace(cfg, refine_inconclusive=True, refine_budget=10**6))
        wide.deferred, wide.unsettled = s.deferred, s.unsettled
        for m in refinement_wanted(wide, coarse):
            key = (m.target, m.level, m.repeat)
            if key in s.deferred:
                continue
            s.deferred.add(key)
            why = f"{m.why} (an inconclusive bracket)"
            cost = measure_cost(s, m)
            deferred.append(Deferred(m.target, m.level, m.repeat, cost, why, m.concerns))
        # a level lead resting on one run of a side, where the grid repeats: its repeat is
        # what would confirm it (the policy judged the sign certain from the spread it
        # learned elsewhere; the budget, not the evidence, stopped the repeat)
        for m in single_run_leads(s):
            key = (m.target, m.level, m.repeat)
            same = [i for i, x in enumerate(deferred) if (x.target, x.level, x.repeat) == key]
            if same:  # deferred already for another pair: it concerns this one too
                x = deferred[same[0]]
                more = tuple(u for u in m.concerns if u not in x.concerns)
                deferred[same[0]] = replace(x, concerns=x.concerns + more)
            else:
                s.deferred.add(key)
                cost = measure_cost(s, m)
                deferred.append(Deferred(m.target, m.level, m.repeat, cost, m.why, m.concerns))
    skips = find_skips(s, order, coarse)
    findings = pair_findings(s)
    notes = check_skips(s, skips) + moving_metric_notes(s, gc)
    notes += overload_notes(s) + short_level_notes(s)
    if budget is not None:
        starts = sum(cfg.start_cost(t) for t in order)
        if starts > 0.0 and starts >= budget[0]:
            # where each start's cost came from: measured (this decision's, the
            # database's, the logs'), or --start-s
            timed = sum(1 for t in order if t in cfg.start_s_of)
            if timed == len(order):
                how = "each at its measured cost"
            elif not timed:
                how = f"each at --start-s {cfg.start_s:g} s"
            else:
                how = f"{timed} at their measured cost, the others at --start-s {cfg.start_s:g} s"
            notes.append(
                f"the time budget ({budget[0]:.0f} s) does not cover one engine start per "
                f"target ({starts:.0f} s, {how}): "
                + (
                    "nothing is started (a target measured alone is compared with none)"
                    if hopeless
                    else "nothing past the starts fits in it"
                )
                + f"; a budget of more than {starts / budget[1]:.2f} of the grid's "
                f"{budget[1]:.0f} s measures more"
            )
        for t in order if not hopeless else ():  # the starts' note says why: none measured
            skipped = {c for sk in skips if sk.target == t for c in sk.levels}
            left = [
                c for c in q.grid if q.covers(t, c) and not s.repeats(t, c) and c not in skipped
            ]
            if left:
                notes.append(
                    f"{t} not measured at {fmt_levels(left)}: the time budget "
                    "measured the first pass's levels and those the answer needed"
                )
    return Decision(
        q,
        tuple(findings),
        cfg.confidence,
        tuple(skips),
        notes=tuple(notes),
        deferred=tuple(deferred),
        budget=budget,
    )


def first_pass_left(
    q: Question,
    observations: Sequence[Observation],
    cfg: PolicyConfig | None = None,
    prior: Prior | None = None,
) -> list[Measure]:
    """Every measurement the first pass still wants after ``observations``, in its order:
    the policy's own (:func:`crossover.decide.coarse.first_pass_all`), the repeats it
    takes while an engine is up among them (``decide --check --out``)."""
    cfg = cfg or PolicyConfig()
    s = State(q, observations, cfg)
    coarse = pass_levels(q, prior, cfg.coarse_step, keep_last=cfg.budget is None)
    return first_pass_all(s, target_order(q, prior), coarse)


def _wanted(s: State, order: list[str], coarse: list[LevelNum]) -> Measure | None:
    """The next measurement the policy wants (first pass, repeats, refinement), the
    deferred ones aside."""
    if s.cfg.budget is not None and s.q.group_targets and set(order) <= {t for t, _, _ in s.runs}:
        # every target started: what the first pass left (the budget deferred it) is taken
        # where the engine is up first, as repeats and refinement are
        first = prefer_running(s, first_pass_all(s, order, coarse))
    else:
        first = first_pass(s, order, coarse)
    if first is not None and first.target == s.last_target:
        return first
    up = prefer_running(
        s, repeats_wanted(s) + sole_support_repeats(s) + refinement_wanted(s, coarse)
    )
    if first is None:
        return up
    # the engine that is up is worked before a switch: a restart costs minutes where a
    # level costs seconds (the first pass's order resumes after)
    return up if up is not None and up.target == s.last_target else first
