"""Replay: the decide policy run against a finished sweep's per-request database.

The levels it measures come from the database as they were recorded
(``crossover.decide.recorded``: a level the sweep never ran holds nothing). The replay
compares what the policy concluded with the grid's own analysis over every recorded run,
and the measuring time it used with the grid's (both from the records' stamps; the runs'
``duration_s``, their steady windows, are given beside).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from crossover.analysis.crossovers import Finding, metric_spec
from crossover.decide.capacity import capacity_bracket, capacity_leader
from crossover.decide.coarse import part_settled
from crossover.decide.model import (
    CAPACITY_ON_RATES,
    PRIOR_ON_RATES,
    Decision,
    LevelNum,
    Measure,
    Observation,
    Question,
    QuestionKind,
    check_at,
    fmt_level,
)
from crossover.decide.observe import metric_values
from crossover.decide.policy import next_step
from crossover.decide.recorded import Recorded
from crossover.decide.starts import StartCost, start_costs
from crossover.decide.state import PolicyConfig, Prior, State, pair_findings
from crossover.decide.text import lead_at
from crossover.errors import UsageError
from crossover.spec.slo import SloTerm
from crossover.words import plural

if TYPE_CHECKING:
    from crossover.analysis.gc import GcRun

#: a replay stops after this many steps whatever happens (a policy bug must not spin)
MAX_STEPS = 10_000


@dataclass(frozen=True)
class Comparison:
    """The decision's finding against the grid's, for one pair and metric."""

    a: str
    b: str
    metric: str
    grid: str
    decided: str
    same: bool
    #: not the grid's, and the answer says why: a measurement that would settle it was
    #: deferred by the time budget (``Decision.unsettled``)
    deferred: bool = False


@dataclass
class ReplayResult:
    decision: Decision
    steps: list[Measure]
    observations: list[Observation]
    grid_findings: list[Finding]
    comparisons: list[Comparison]
    #: measuring time per target: what the decision used, what the grid used (stamps)
    seconds: dict[str, float] = field(default_factory=dict)
    grid_seconds: dict[str, float] = field(default_factory=dict)
    #: the grid's runs' own ``duration_s`` (their steady windows), summed per target
    grid_duration_s: dict[str, float] = field(default_factory=dict)
    levels_measured: dict[str, list[LevelNum]] = field(default_factory=dict)
    #: engine starts the decision's order implies (a target's first level, and again
    #: each time it is measured after another target)
    starts: int = 0
    #: the same, per target
    starts_by_target: dict[str, int] = field(default_factory=dict)
    #: what one engine start of each target costs, and where that figure comes from
    start_costs: dict[str, StartCost] = field(default_factory=dict)
    #: of the runs the replay read, those a logged long garbage collection met (of the
    #: ``gc`` it was given), as its notes name them
    gc: list[GcRun] = field(default_factory=list)
    #: a capacity question's skips against the grid (:func:`capacity_checks`)
    capacity_checks: list[str] = field(default_factory=list)

    def gpu_seconds(self) -> dict[str, float]:
        """Each target's GPU time: its measuring time and its start's cost per engine start
        (``start_costs``)."""
        return {
            t: s + self.starts_by_target.get(t, 0) * self.start_costs[t].seconds
            for t, s in self.seconds.items()
        }

    @property
    def contradictions(self) -> list[str]:
        """Levels where the decision calls a significant lead the grid calls the other
        way (the grid's lead significant too): never a matter of confidence, a wrong
        answer."""
        grid = {
            (f.a, f.b, f.metric, lv.concurrency): lv.lead
            for f in self.grid_findings
            for lv in f.per_level
        }
        out = []
        for f in self.decision.findings:
            for lv in f.per_level:
                g = grid.get((f.a, f.b, f.metric, lv.concurrency))
                if lv.lead is not None and g is not None and g != lv.lead:
                    out.append(
                        f"{f.a} vs {f.b}, {f.metric} at {lv.concurrency:g}: "
                        f"grid {g}, decide {lv.lead}"
                    )
        return sorted(set(out))

    @property
    def assumption_checks(self) -> list[str]:
        """Each skip's assumption against the grid's levels it skipped: where the skipped
        target led a target measured there (significantly), the assumption failed; a
        capacity question's, where the grid has it meet the SLO there
        (:func:`capacity_checks`)."""
        if self.decision.question.kind == "capacity":
            return self.capacity_checks
        out: list[str] = []
        for skip in self.decision.skipped:
            if not skip.assumption:
                continue
            held, failed = 0, []
            for f in self.grid_findings:
                if skip.target not in (f.a, f.b):
                    continue
                for lv in f.per_level:
                    if lv.concurrency not in skip.levels:
                        continue
                    if lv.lead == skip.target:
                        failed.append(f"{f.metric} vs {f.b if f.a == skip.target else f.a} "
                                      f"at {lv.concurrency:g}")  # fmt: skip
                    else:
                        held += 1
            if failed:
                out.append(f"{skip.target}: the assumption failed at {', '.join(failed)}")
            elif held:
                out.append(f"{skip.target}: the assumption held at the {held} grid level "
                           "comparisons it skipped")  # fmt: skip
        return out

    @property
    def same(self) -> bool:
        return all(c.same for c in self.comparisons)

    @property
    def same_or_said(self) -> bool:
        """Every conclusion the grid's, or one the answer says it left unsettled within
        its time budget (and why)."""
        return all(c.same or c.deferred for c in self.comparisons)

    @property
    def fraction(self) -> float:
        grid = sum(self.grid_seconds.values())
        return sum(self.seconds.values()) / grid if grid else 0.0


#: a pair's answer where no level holds valid runs of both (``describe``)
NOT_COMPARED = "not compared (no level with valid runs of both)"


def describe(findings: Sequence[Finding]) -> str:
    """One pair's findings on one metric, as the comparison reads them. A pair not
    compared at any level (no level with valid runs of both, or no finding) reads ``not
    compared``: an answer with no data does not agree with a grid's "inconclusive"."""
    if all(f.kind == "none" and not f.levels for f in findings):
        return NOT_COMPARED
    xs = [f for f in findings if f.kind == "crossover"]
    if xs:
        parts = []
        for f in xs:
            assert f.interval is not None
            parts.append(
                f"crossover {f.below} below / {f.above} above "
                f"({f.interval[0]:.1f}-{f.interval[1]:.1f})"
            )
        return "; ".join(parts)
    leaders = {f.leader for f in findings if f.kind == "none" and f.leader}
    if leaders and not any(f.kind == "inconclusive" for f in findings):
        return f"{next(iter(leaders))} leads"
    return "inconclusive"


def capacity_checks(decision: Decision, grid: State) -> list[str]:
    """A capacity question's skipped levels against the grid's (``grid``: its every run):
    the skip assumes the SLO's latency does not fall as concurrency grows, so where the
    grid has the target meet the SLO at a level skipped (or above the first it failed,
    which its bracket takes as its end), the assumption failed there."""
    slo = decision.question.slo
    assert slo is not None
    out: list[str] = []
    for t, (_, hi) in decision.capacity.items():
        skipped = {c for sk in decision.skipped if sk.target == t for c in sk.levels}
        above = sorted(c for c in grid.levels(t) if (hi is not None and c > hi) or c in skipped)
        if not above:
            continue
        met = []
        for c in above:
            v = grid.mean(t, c, slo.path)
            if v is not None and slo.holds(v):
                met.append(f"{fmt_level(c)} ({v:,.0f})")
        if met:
            out.append(
                f"{t}: the assumption failed: the grid has it meet the SLO at "
                f"{', '.join(met)}, above where it first failed"
            )
        else:
            out.append(
                f"{t}: the assumption held at the {plural(len(above), 'grid level')} above "
                "where it first failed"
            )
    return out


def describe_leads(findings: Sequence[Finding], at: Sequence[LevelNum]) -> str:
    """One pair's lead answer on one metric, per asked level: ``at 1: vllm; at 64: none``
    (``none``: no significant difference; ``not measured``: no level of both)."""
    leads = dict(lead_at(findings[0], tuple(at))) if findings else {}
    if not leads:  # no asked level holds runs of both: as the other side reads it
        return NOT_COMPARED
    return "; ".join(
        f"at {c:g}: {leads[float(c)] or 'none'}" if float(c) in leads else f"at {c:g}: not compared"
        for c in at
    )


def capacity_answer(
    leader: str | None, brackets: Mapping[str, tuple[LevelNum | None, LevelNum | None]]
) -> str:
    """A capacity answer as the comparison reads it: who leads, a tie, or none meets it."""
    if leader:
        return f"{leader} leads"
    if any(lo is not None for lo, _ in brackets.values()):
        return "a tie"
    return "none meets the SLO"


def same_conclusion(grid: Sequence[Finding], decided: Sequence[Finding]) -> bool:
    """Same leader where the grid has one, every grid crossover found with the same
    sides and an overlapping interval (and none the grid lacks), inconclusive where the
    grid is."""
    gx = [f for f in grid if f.kind == "crossover"]
    dx = [f for f in decided if f.kind == "crossover"]
    if gx or dx:
        if len(gx) != len(dx):
            return False
        for g in gx:
            assert g.interval is not None
            if not any(
                d.below == g.below
                and d.above == g.above
                and d.interval is not None
                and d.interval[0] <= g.interval[1]
                and g.interval[0] <= d.interval[1]
                for d in dx
            ):
                return False
        return True
    return describe(grid) == describe(decided)


def replay(
    path: Path,
    *,
    kind: QuestionKind = "crossover",
    metrics: Sequence[str] = ("total_tokens_per_s", "ttft_ms.p50"),
    targets: Sequence[str] | None = None,
    at: Sequence[float] = (),
    slo: SloTerm | None = None,
    cfg: PolicyConfig | None = None,
    prior: Prior | None = None,
    start_s: float | None = None,
    engine_logs: Path | None = None,
    gc: Sequence[GcRun] = (),
) -> ReplayResult:
    """Run the policy against the database at ``path`` until it settles. Each target's
    engine start costs what ``crossover.decide.starts`` finds (``start_s``, the starts the
    database timed, ``engine_logs``, else an estimate): a budget weighs the measured ones
    (an estimate stays out of it: without ``start_s`` a start not measured is free).

    ``gc``: the grid's runs a logged long garbage collection met (``gc_runs`` of the
    database's sweep folder); those among the runs the replay read are given to the
    policy once it has settled, so its notes name them as a live decision's do."""
    rec = Recorded(path)
    try:
        names = list(targets) if targets else rec.targets()
        unknown = [t for t in names if t not in rec.targets()]
        if unknown:
            raise UsageError(
                f"{path} holds no target {', '.join(unknown)} (it holds {', '.join(rec.targets())})"
            )
        if len(set(names)) < 2:
            raise UsageError(
                f"{path}: a decision compares targets; the replay has only "
                f"{', '.join(names)} (--target: two or more)"
            )
        rates = rec.axis == "rate"
        if rates and kind == "capacity":
            raise UsageError(CAPACITY_ON_RATES)
        if rates and prior is not None:
            raise UsageError(PRIOR_ON_RATES)
        check_at(at, rec.levels())
        asked = [*metrics, *([slo.path] if slo is not None else [])]
        held = [metric_values(r.summary) for r in rec.runs.values() if r.summary is not None]
        missing = [m for m in asked if held and all(v.get(m) is None for v in held)]
        if missing:  # replayed, every level measured would read "no level with valid runs"
            what = ", ".join(metric_spec(m).label for m in missing)
            raise UsageError(f"{path}: no run in it records {what}: it is compared at no level")
        q = Question(
            kind,
            tuple(names),
            tuple(rec.levels()),
            tuple(metrics),
            tuple(at),
            slo,
            repeats=rec.repeats(),
            target_levels={
                t: tuple(sorted({c for tt, c, _ in rec.runs if tt == t})) for t in names
            },
            requests=rec.level_requests(names),
            axis=rec.axis,
        )
        cfg = cfg or PolicyConfig()
        costs = start_costs(names, rec.engine_starts(), engine_logs, start_s, rec.engines())
        timed = {t: c.seconds for t, c in costs.items() if c.measured}
        if timed and start_s is None:
            cfg = dataclasses.replace(cfg, start_s_of=timed)
        if cfg.budget is not None and cfg.grid_s is None:
            # the grid's measuring time is known here: the budget is a share of it, with
            # one engine start per target (the grid's own; 0 each unless starts are counted)
            total = sum(
                rec.span(run.run_id)[0] for (t, _, _), run in rec.runs.items() if t in names
            )
            cfg = dataclasses.replace(cfg, grid_s=total + sum(cfg.start_cost(t) for t in names))
        obs: list[Observation] = []
        steps: list[Measure] = []
        decision: Decision | None = None
        for _ in range(MAX_STEPS):
            step = next_step(q, obs, cfg, prior)
            if isinstance(step, Decision):
                decision = step
                break
            steps.append(step)
            settle = None
            if step.sequential:
                settle = functools.partial(part_settled, q, list(obs), cfg, step.target, step.level)
            obs.append(rec.observe(step.target, step.level, step.repeat, step.budget_s, settle))
        if decision is None:
            raise RuntimeError(f"the policy did not settle in {MAX_STEPS} steps")
        read = {(o.target, float(o.level), o.repeat) for o in obs}
        tied = [x for x in gc if (x.target, x.level, x.repeat) in read]
        if tied:  # the policy is pure: the same observations settle the same way, noted
            noted = next_step(q, obs, cfg, prior, gc=tied)
            if isinstance(noted, Decision):
                decision = noted
        if rec.restarted_per_repeat():  # what the live command refuses, said of a replay
            decision = dataclasses.replace(
                decision,
                notes=(
                    *decision.notes,
                    "the grid measured each repeat on its own engine start "
                    "(restart_between_repeats): its repeats' spread holds a start's, which "
                    "the replay reads as repeats on one start; a live decide refuses such a "
                    "YAML",
                ),
            )
        grid_obs = [rec.observe(t, c, r, None) for (t, c, r) in rec.runs if t in names]
        grid_state = State(
            Question(kind, q.targets, q.levels, q.metrics, (), slo, q.repeats, axis=q.axis),
            grid_obs,
            cfg,
        )
        grid = pair_findings(grid_state, learned_noise=False)
        comparisons = []
        if kind == "capacity":
            brackets = {t: capacity_bracket(grid_state, t) for t in names}
            leader, _ = capacity_leader(brackets)
            comparisons.append(
                Comparison(
                    "capacity",
                    "",
                    slo.path if slo else "",
                    capacity_answer(leader, brackets),
                    capacity_answer(decision.leader, decision.capacity),
                    leader == decision.leader,
                )
            )
            names_pairs: list[str] = []
        else:
            names_pairs = names
        for i, a in enumerate(names_pairs):
            for b in names_pairs[i + 1 :]:
                for m in q.metrics:
                    g = [f for f in grid if (f.a, f.b, f.metric) == (a, b, m)]
                    d = [f for f in decision.findings if (f.a, f.b, f.metric) == (a, b, m)]
                    if kind == "lead":  # at the levels asked alone, as the answer is read
                        gd, dd = describe_leads(g, q.at), describe_leads(d, q.at)
                        same = gd == dd
                    else:
                        gd, dd = describe(g), describe(d)
                        same = same_conclusion(g, d)
                    said = not same and bool(decision.unsettled(a, b))
                    comparisons.append(Comparison(a, b, m, gd, dd, same, said))
        # every observation is paid for: a part of a level and the level measured again
        # whole both count, as they would live (and as the budget counts them)
        seconds: dict[str, float] = {t: 0.0 for t in names}
        for o in obs:
            seconds[o.target] += o.seconds
        grid_seconds: dict[str, float] = {t: 0.0 for t in names}
        grid_duration: dict[str, float] = {t: 0.0 for t in names}
        for (t, _, _), run in rec.runs.items():
            if t in names:
                grid_seconds[t] += rec.span(run.run_id)[0]
                window = ((run.summary or {}).get("window") or {}).get("duration_s")
                grid_duration[t] += float(window or 0.0)
        measured = {t: sorted({o.level for o in obs if o.target == t and o.planned}) for t in names}
        starts, last = 0, None
        by_target: dict[str, int] = {t: 0 for t in names}
        for st in steps:
            if st.target != last:
                starts += 1
                by_target[st.target] += 1
                last = st.target
        return ReplayResult(
            decision,
            steps,
            obs,
            grid,
            comparisons,
            seconds,
            grid_seconds,
            grid_duration,
            measured,
            starts,
            by_target,
            costs,
            tied,
            capacity_checks(decision, grid_state) if kind == "capacity" else [],
        )
    finally:
        rec.close()


#: the forecast's columns a prior reads, and how they are said
PRIOR_COLUMNS = {"total_tok_s": "total tokens/s", "output_tok_s": "output tokens/s"}


def prior_notes(
    path: Path, targets: Sequence[str], input_tokens: int | None, output_tokens: int
) -> list[str]:
    """What a forecast at ``path`` does not say of the sweep it is a prior for: its
    predicted leader and crossings place the first pass, so one made for another workload
    (its ``workload``: prompt and generated tokens) may place them wrong, and a target it
    has no row for is placed on no prediction (a forecast of another model's targets,
    whose names alone match, is told this way)."""
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return []
    if not isinstance(data, dict):
        return []
    out = []
    work = data.get("workload")
    if isinstance(work, dict) and input_tokens is not None:
        theirs = (work.get("input_tokens"), work.get("output_tokens"))
        if None not in theirs and theirs != (input_tokens, output_tokens):
            out.append(
                f"--prior forecasts {theirs[0]} prompt and {theirs[1]} generated tokens a "
                f"request; this sweep's are {input_tokens} and {output_tokens}: where it "
                "looks first may be off"
            )
    rows = data.get("rows")
    rows = rows if isinstance(rows, list) else []
    named = {str(r.get("target")) for r in rows if isinstance(r, dict)}
    missing = [t for t in targets if t not in named]
    if missing and named:
        out.append(
            f"--prior forecasts no {', '.join(missing)} (it forecasts "
            f"{', '.join(sorted(named))}): those are placed on no prediction"
        )
    return out


def load_prior(path: Path, column: str = "total_tok_s") -> Prior:
    """The advisor's forecast (``crossover.advise.forecast --json``) as a prior: each
    target's predicted total tokens/s per concurrency level (``column``: or its output
    tokens/s, ``output_tok_s``)."""
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise UsageError(f"{path}: not a readable forecast ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise UsageError(f"{path}: not a forecast (crossover.forecast/1 with rows)")
    out: dict[str, dict[int, float]] = {}
    for row in data["rows"]:
        try:
            t, c, v = str(row["target"]), int(row["concurrency"]), float(row[column])
        except (KeyError, TypeError, ValueError):
            continue
        out.setdefault(t, {})[c] = v
    if not out:
        raise UsageError(f"{path}: the forecast predicts no target's {PRIOR_COLUMNS[column]}")
    return out
