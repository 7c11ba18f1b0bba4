"""Replay: the decide policy run against a finished sweep's per-request database.

A level measured is its recorded requests on their own stamps (a part of it: how far they
had got a number of seconds after the level's first measured send), a repeat is the
recorded repeat, and a level the sweep never ran is one the replay cannot measure (the
policy is told it holds nothing). The replay compares what the policy concluded with the
grid's own analysis over every recorded run, and the measuring time it used with the
grid's (both from the records' stamps; the runs' ``duration_s``, their steady windows, are
given beside).

The database is only read (opened read-only, never written).
"""

from __future__ import annotations

import dataclasses
import functools
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from crossover.analysis.crossovers import Finding
from crossover.decide.capacity import capacity_bracket, capacity_leader
from crossover.decide.coarse import MIN_PART, part_settled
from crossover.decide.model import Decision, Measure, Observation, Question, QuestionKind
from crossover.decide.observe import Finished, end_ns, metric_values, observe, span_s
from crossover.decide.policy import next_step
from crossover.decide.state import PolicyConfig, Prior, State, pair_findings
from crossover.errors import UsageError
from crossover.records.model import RequestRecord
from crossover.spec.slo import SloTerm

#: a replay stops after this many steps whatever happens (a policy bug must not spin)
MAX_STEPS = 10_000
#: an engine start's GPU time where none is given (``--start-s``): the middle of the
#: 1.5-2 min the H200 decisions' engine starts took (issue 42; the committed MoE run's
#: SGLang log: 70 s from its first line to "Application startup complete")
START_S = 105.0
START_S_SOURCE = (
    "the middle of the 1.5-2 min the committed H200 decisions' engine starts took"
    " (docs/results/h200)"
)


@dataclass(frozen=True)
class RecordedRun:
    """One finished run in the database."""

    run_id: str
    target: str
    level: int
    repeat: int
    context: Mapping[str, Any]
    summary: Mapping[str, Any] | None


class Recorded:
    """The finished concurrency-level runs of a sweep database, read-only."""

    def __init__(self, path: Path) -> None:
        if not path.is_file():
            raise UsageError(f"{path}: no such database")
        try:
            self.db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            rows = self.db.execute(
                "SELECT run_id, key, context, summary FROM runs "
                "WHERE status='done' AND key IS NOT NULL ORDER BY created_at"
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            raise UsageError(f"{path}: not a crossover results database ({exc})") from None
        self.path = path
        self.runs: dict[tuple[str, int, int], RecordedRun] = {}
        for run_id, key, ctx, summary in rows:
            name, level, rep = key.split("|")
            if not level.startswith("c="):
                continue  # rate levels: the policy decides along concurrency
            context = orjson.loads(ctx)
            self.runs[(name, int(level[2:]), int(rep.removeprefix("r=")))] = RecordedRun(
                run_id,
                name,
                int(level[2:]),
                int(rep.removeprefix("r=")),
                context.get("context") or {},
                orjson.loads(summary) if summary else None,
            )
        if not self.runs:
            raise UsageError(f"{path}: no finished concurrency level to replay")
        self._records: dict[str, list[RequestRecord]] = {}

    def records(self, run_id: str) -> list[RequestRecord]:
        if run_id not in self._records:
            rows = self.db.execute(
                "SELECT record FROM requests WHERE run_id=? ORDER BY warmup DESC, idx", (run_id,)
            ).fetchall()
            self._records[run_id] = [RequestRecord.model_validate(orjson.loads(r[0])) for r in rows]
        return self._records[run_id]

    def targets(self) -> list[str]:
        seen: list[str] = []
        for t, _, _ in self.runs:
            if t not in seen:
                seen.append(t)
        return seen

    def levels(self) -> list[int]:
        return sorted({c for _, c, _ in self.runs})

    def repeats(self) -> int:
        return 1 + max(r for _, _, r in self.runs)

    def span(self, run_id: str) -> tuple[float, int]:
        """A whole run's measuring time (first send to last end, warm-up included) and its
        measured requests, read in SQL (no record is parsed)."""
        row = self.db.execute(
            "SELECT min(json_extract(CAST(record AS TEXT), '$.t_send_ns')), "
            "max(max(coalesce(json_extract(CAST(record AS TEXT), '$.t_done_ns'), 0), "
            "coalesce(json_extract(CAST(record AS TEXT), '$.t_last_ns'), 0), "
            "json_extract(CAST(record AS TEXT), '$.t_send_ns'))), sum(warmup = 0) "
            "FROM requests WHERE run_id=?",
            (run_id,),
        ).fetchone()
        if row is None or row[0] is None:
            return 0.0, 0
        return max(0.0, (row[1] - row[0]) / 1e9), int(row[2] or 0)

    def observe(
        self,
        t: str,
        c: int,
        r: int,
        budget_s: float | None,
        settle: Callable[[Mapping[str, float | None]], str | None] | None = None,
    ) -> Observation:
        """The level as the policy asked for it: whole, up to ``budget_s``, or sequential
        (``settle``: as a live level stops, :meth:`sequential`)."""
        run = self.runs.get((t, c, r))
        if run is None:  # never recorded: measured, and it holds nothing
            return Observation(t, c, r, {}, 0, 0, 0.0, valid=False)
        if settle is not None:
            part = self.sequential(run, settle)
            if part is not None:
                return part
        if budget_s is None and run.summary is not None:  # the whole level: its summary
            seconds, planned = self.span(run.run_id)
            valid = run.summary.get("verdict") == "valid"
            values = metric_values(run.summary)
            return Observation(t, c, r, values, planned, planned, seconds, valid)
        return observe(t, c, r, self.records(run.run_id), run.summary, budget_s)

    def sequential(
        self, run: RecordedRun, settle: Callable[[Mapping[str, float | None]], str | None]
    ) -> Observation | None:
        """The level as a live sequential level would have ended (``crossover.decide.live.
        SequentialWatch``): its measured requests taken as they finished, from one wave on
        (as many as the level's streams, at least ``MIN_PART``) ``settle`` asked at each; at
        the first it answers, the requests sent by then finish (the drain) and the level is
        their summary, as the sweep's own summarizer computes it. ``None``: it never stops
        (the whole level)."""
        from crossover.metrics.run import RunContext, summarize

        records = self.records(run.run_id)
        measured = [x for x in records if not x.warmup]
        finished = sorted(measured, key=end_ns)
        first = max(run.level, MIN_PART)
        so_far = Finished()
        for n, rec in enumerate(finished[:-1], start=1):
            so_far.add(rec)
            if n < first or settle(so_far.values()) is None:
                continue
            cut = end_ns(finished[n - 1])
            sent = [x for x in records if x.warmup or x.t_send_ns <= cut]
            try:
                ctx = RunContext.model_validate(run.context)
            except ValueError:
                return None
            summary = summarize(sent, ctx).to_json_dict()
            part = [x for x in sent if not x.warmup]
            valid = summary.get("verdict") == "valid"
            return Observation(
                run.target, run.level, run.repeat, metric_values(summary), len(part),
                len(measured), span_s(sent), valid,
            )  # fmt: skip
        return None

    def close(self) -> None:
        self.db.close()


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
    levels_measured: dict[str, list[int]] = field(default_factory=dict)
    #: engine starts the decision's order implies (a target's first level, and again
    #: each time it is measured after another target)
    starts: int = 0
    #: the same, per target
    starts_by_target: dict[str, int] = field(default_factory=dict)

    def gpu_seconds(self, start_s: float) -> dict[str, float]:
        """Each target's GPU time: its measuring time and ``start_s`` per engine start."""
        return {t: s + self.starts_by_target.get(t, 0) * start_s for t, s in self.seconds.items()}

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
        target led a target measured there (significantly), the assumption failed."""
        out: list[str] = []
        for skip in self.decision.skipped:
            if not skip.assumption:
                continue
            held, failed = 0, []
            for f in self.grid_findings:
                if skip.target not in (f.a, f.b):
                    continue
                for lv in f.per_level:
                    if int(lv.concurrency) not in skip.levels:
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


def describe(findings: Sequence[Finding]) -> str:
    """One pair's findings on one metric, as the comparison reads them."""
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
    at: Sequence[int] = (),
    slo: SloTerm | None = None,
    cfg: PolicyConfig | None = None,
    prior: Prior | None = None,
) -> ReplayResult:
    """Run the policy against the database at ``path`` until it settles."""
    rec = Recorded(path)
    try:
        names = list(targets) if targets else rec.targets()
        unknown = [t for t in names if t not in rec.targets()]
        if unknown:
            raise UsageError(
                f"{path} holds no target {', '.join(unknown)} (it holds {', '.join(rec.targets())})"
            )
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
        )
        cfg = cfg or PolicyConfig()
        if cfg.budget is not None and cfg.grid_s is None:
            # the grid's measuring time is known here: the budget is a share of it
            total = sum(
                rec.span(run.run_id)[0] for (t, _, _), run in rec.runs.items() if t in names
            )
            cfg = dataclasses.replace(cfg, grid_s=total)
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
        grid_obs = [rec.observe(t, c, r, None) for (t, c, r) in rec.runs if t in names]
        grid_state = State(
            Question(kind, q.targets, q.levels, q.metrics, (), slo, q.repeats), grid_obs, cfg
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
                    f"{leader} leads" if leader else "none meets the SLO",
                    f"{decision.leader} leads" if decision.leader else "none meets the SLO",
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
                    same = same_conclusion(g, d)
                    said = not same and bool(decision.unsettled(a, b))
                    comparisons.append(Comparison(a, b, m, describe(g), describe(d), same, said))
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
        )
    finally:
        rec.close()


def load_prior(path: Path) -> Prior:
    """The advisor's forecast (``crossover.advise.forecast --json``) as a prior: each
    target's predicted total tokens/s per concurrency level."""
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise UsageError(f"{path}: not a readable forecast ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise UsageError(f"{path}: not a forecast (crossover.forecast/1 with rows)")
    out: dict[str, dict[int, float]] = {}
    for row in data["rows"]:
        try:
            t, c, v = str(row["target"]), int(row["concurrency"]), float(row["total_tok_s"])
        except (KeyError, TypeError, ValueError):
            continue
        out.setdefault(t, {})[c] = v
    if not out:
        raise UsageError(f"{path}: the forecast predicts no target's total tokens/s")
    return out
