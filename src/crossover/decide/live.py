"""Live: the decide policy driving real measurements through the sweep's own machinery.

Every measurement is a level of the sweep (:meth:`crossover.sweep.driver.SweepRunner.
measure_level`): the same prompts, raw records in DIR/sweep.db, verification, sweep.json
and the report. A target's engine stays up while the policy asks for more of it and is
stopped when it moves to another target. A decision interrupted and run again reads the
levels it finished from the database (the sweep's resume) and goes on from there: the
policy is a function of what was measured.

A later target's first-pass level is sequential (:class:`SequentialWatch`): it sees each
request as it finishes and, from one wave of the closed loop on (as many finished as the
level has streams), stops sending once what finished settles its comparison with every
other target measured there (:func:`crossover.decide.coarse.part_settled`); the requests
in flight finish and the run is a valid one of the requests it sent, the requests planned
and why it stopped kept with it (a ``sequential_stop`` sample). Run again, the decision
reads that back (the level is ``complete`` false); where the policy then wants the rest
of it, the level is measured again whole under the same key (the newer run stands in
sweep.json, the part stays stored): two parts of a closed loop measured apart cannot be
joined into one level. Refinement places levels on the sweep's grid,
the resolution the grid itself would give; with ``refine: true`` in the YAML it measures
between them too, to the YAML's ``refine_width`` with at most ``refine_budget`` extra
levels, as ``sweep --refine`` does.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from crossover.analysis.gc import GcRun, gc_runs
from crossover.analysis.schema import SweepFile
from crossover.decide.coarse import may_stop_at, part_settled
from crossover.decide.events import Reasons
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
)
from crossover.decide.observe import Finished, observe
from crossover.decide.policy import next_step
from crossover.decide.state import PolicyConfig, Prior
from crossover.errors import UsageError
from crossover.records.model import RequestRecord
from crossover.records.store import Store
from crossover.spec.load import Axis
from crossover.spec.slo import SloTerm
from crossover.sweep.config import Level, SweepConfig
from crossover.sweep.driver import (
    SweepEvents,
    SweepRunner,
    parse_run_key,
    part_of,
    run_key,
)
from crossover.words import plural

#: a decision stops after this many measurements whatever happens
MAX_STEPS = 1_000


@dataclass
class TargetTime:
    """One target's share of the decision: measuring time (the records' stamps) and the
    wall time its levels took with engine starts and stops (``wall_s``)."""

    measuring_s: float = 0.0
    wall_s: float = 0.0
    #: times its engine was started (a target that launches one), else times it was taken up
    starts: int = 0
    levels: list[LevelNum] = field(default_factory=list)
    launched: bool = False
    #: each engine start's seconds to ready and its stop's seconds (the sweep's
    #: ``engine_starts``), the part of ``wall_s`` that is neither warm-up nor measuring
    ready_s: list[float] = field(default_factory=list)
    stop_s: list[float] = field(default_factory=list)
    #: levels stopped within (sequential), with why
    stopped: list[str] = field(default_factory=list)


class SequentialWatch:
    """Sees a sequential level's records as they arrive and says when it may stop."""

    def __init__(
        self,
        question: Question,
        observations: Sequence[Observation],
        policy: PolicyConfig,
        target: str,
        level: int,
        planned: int | None,
    ) -> None:
        # closed-loop waves only: along rates a level runs whole (no step is sequential)
        self.q, self.obs, self.policy = question, list(observations), policy
        self.target, self.level, self.planned = target, level, planned
        self.done = Finished()

    def __call__(self, rec: RequestRecord) -> str | None:
        if rec.warmup:
            return None
        self.done.add(rec)
        n = self.done.count
        if not may_stop_at(n, self.level, self.planned):
            return None
        why = part_settled(
            self.q, self.obs, self.policy, self.target, self.level, self.done.values()
        )
        if why is None:
            return None
        planned = f" of {self.planned}" if self.planned is not None else ""
        done = f"{n}{planned} requests" if planned else plural(n, "request")
        return f"stopped sending once {done} had finished: {why}"


def _with_start_cost(policy: PolicyConfig, runner: SweepRunner, target: str) -> PolicyConfig:
    """The policy with ``target``'s engine start at what its latest start took (to ready,
    and its stop once one was timed), for a budget to weigh a restart by."""
    mine = [s for s in runner.engine_starts() if s.target == target]
    if not mine:
        return policy
    last = mine[-1]
    cost = last.ready_s + (last.stop_s or 0.0)
    if policy.start_s_of.get(target) == cost:
        return policy
    return dataclasses.replace(policy, start_s_of={**policy.start_s_of, target: cost})


@dataclass
class LiveResult:
    decision: Decision
    steps: list[Measure]
    times: dict[str, TargetTime]
    sweep: SweepFile
    #: levels (each target, level and repeat once) read back from the database
    kept: int
    #: the runs a logged long garbage collection met (``gc_runs``, read once at the end);
    #: ``None``: not read (``crossover.decide.timing`` reads them from the folder)
    gc: list[GcRun] | None = None


def live_policy(cfg: SweepConfig, policy: PolicyConfig | None = None) -> PolicyConfig:
    """The policy as a live decision runs it: levels measured live (no replay budget
    factor), sequential where a stop may save requests, the sweep's own refinement."""
    return PolicyConfig(
        **{
            **(policy or PolicyConfig()).__dict__,
            "budget_factor": 0.0,
            "sequential": True,
            "refine_width": cfg.refine_width,
            "refine_budget": cfg.refine_budget,
        }
    )


def observations_in(
    store: Store, names: Sequence[str], axis: Axis = "concurrency"
) -> list[Observation]:
    """The levels on ``axis`` finished in a sweep's database, as observations, in the
    order made: a level measured in part and later whole gives both, the part first; the
    policy weighs the latest of a key only (``State``), the whole, and counts the time of
    both."""
    out: list[Observation] = []
    for row in store.runs():
        if row.key is None or row.status != "done":
            continue
        name, level, rep = parse_run_key(row.key)
        if name not in names or level.axis != axis:
            continue
        records = store.records(row.run_id)
        part = part_of(store.samples(row.run_id))
        planned = part.planned if part is not None else None
        out.append(observe(name, level.value, rep, records, row.summary, planned=planned))
    return out


def say_kept(
    obs: Sequence[Observation],
    names: Sequence[str],
    events: SweepEvents | None,
    axis: Axis = "concurrency",
) -> None:
    """The levels read back from the database, told to ``events.on_skip`` as a resumed
    sweep tells its kept runs (the CLI says them one line per target): target by target
    in the question's order, each level and repeat once, in the grid's order."""
    if events is None or events.on_skip is None:
        return
    runs = {(o.target, o.level, o.repeat) for o in obs}
    for name, level, repeat in sorted(runs, key=lambda k: (names.index(k[0]), k[1], k[2])):
        events.on_skip(name, Level(axis, level), repeat)


def _say_time(events: SweepEvents | None, target: str, times: Mapping[str, TargetTime]) -> None:
    """As a launched target's engine is stopped: its time up so far and the decision's
    (every launched target's), so a session watching a GPU's clock sees what the decision
    has cost while it runs."""
    if events is None or events.on_engine is None:
        return
    tt = times[target]
    if not tt.launched:  # a URL target: no engine of ours, nor its GPU's time
        return
    total = sum(t.wall_s for t in times.values() if t.launched)
    events.on_engine(
        target,
        f"stopped; its engine up {tt.wall_s:,.0f} s for this decision "
        f"({plural(tt.starts, 'start')}), {total / 60:.1f} GPU-minutes so far in all",
    )


def question_for(
    cfg: SweepConfig,
    kind: QuestionKind,
    metrics: Sequence[str],
    at: Sequence[float] = (),
    slo: SloTerm | None = None,
) -> Question:
    """The question over a sweep config's targets and its concurrency levels, or its
    rates (an open loop: the same policy along requests/s, docs/decide.md "Along
    rates")."""
    if cfg.restart_between_repeats:
        raise UsageError(
            "decide measures a level's repeats only where a sign is uncertain, while the "
            "target's engine is up, so it does not restart the engine per repeat: run "
            "crossover sweep for restart_between_repeats, or set it false"
        )
    # the axis's own refusals first (no levels; a capacity question along rates)
    axis, levels, per_axis = _rate_levels(cfg, kind) if cfg.rates is not None else _levels(cfg)
    names = tuple(t.name for t in cfg.targets)
    if len(names) < 2:
        raise UsageError("decide compares targets: the sweep needs at least two")
    check_at(at, levels)
    return Question(
        kind,
        names,
        tuple(levels),
        tuple(metrics),
        tuple(at),
        slo,
        repeats=max(1, cfg.repeats),
        group_targets=any(t.launch is not None for t in cfg.targets),
        axis=axis,
        **per_axis,
    )


class _AxisParts(TypedDict, total=False):
    """What a question's axis adds to it (:class:`Question`'s own fields)."""

    any_level: bool
    target_levels: dict[str, tuple[float, ...]]
    requests: dict[float, int]


def _levels(cfg: SweepConfig) -> tuple[Axis, list[float], _AxisParts]:
    """A concurrency question's levels: the sweep's and every target's own."""
    base = sorted({lv.concurrency for lv in cfg.levels() if lv.concurrency is not None})
    levels: list[float] = list(base)
    for t in cfg.targets:
        levels = sorted(set(levels) | set(t.concurrency or []))
    if not levels:
        raise UsageError("decide needs concurrency levels (concurrency: in the YAML)")
    return (
        "concurrency",
        levels,
        _AxisParts(
            # between the grid's levels only where the sweep itself would refine
            any_level=cfg.refine,
            # each target's own levels, else the sweep's (as the sweep measures them)
            target_levels={
                t.name: tuple(sorted(t.concurrency or base))
                for t in cfg.targets
                if t.concurrency or base
            },
            requests={c: n for c in levels if (n := cfg.requests_for(int(c))) is not None},
        ),
    )


def _rate_levels(cfg: SweepConfig, kind: QuestionKind) -> tuple[Axis, list[float], _AxisParts]:
    """A question's levels along a sweep's rates (a rate sweep has no per-target levels
    and no ``refine``: the config refuses both)."""
    if kind == "capacity":
        raise UsageError(CAPACITY_ON_RATES)
    assert cfg.rates is not None
    levels = sorted(set(cfg.rates))
    requests = {r: n for r in levels if (n := cfg.requests_for_level(Level("rate", r))) is not None}
    return "rate", levels, _AxisParts(requests=requests)


def frozen_by_launch(cfg: SweepConfig, runs: Sequence[GcRun], out: Path) -> list[GcRun]:
    """``runs`` with those of a target launched with ``freeze_gc: true`` marked frozen
    (``GcRun.frozen``) where its logs under ``out/engines`` hold no line of the freeze's
    request to go on (an engine that logs no access lines): the answer's notes then name
    no freeze as the remedy for pauses that came with it on. Where the log has such lines,
    what it says stands (a refused freeze froze nothing)."""
    from crossover.engines.effective import read_log
    from crossover.engines.launchrec import engine_logs

    def logged(target: str) -> bool:
        for log in engine_logs(out / "engines", target, replicas=True):
            try:
                if "POST /freeze_gc" in read_log(log):
                    return True
            except UsageError:  # a log that cannot be read says nothing
                continue
        return False

    frozen = {
        t.name
        for t in cfg.targets
        if t.launch is not None and t.launch.freeze_gc and not logged(t.name)
    }
    return [dataclasses.replace(x, frozen=True) if x.target in frozen else x for x in runs]


async def decide_live(
    cfg: SweepConfig,
    out: Path,
    question: Question,
    policy: PolicyConfig | None = None,
    prior: Prior | None = None,
    events: SweepEvents | None = None,
    reasons: Reasons | None = None,
) -> LiveResult:
    """Measure as the policy asks until it settles; the sweep folder holds everything.
    ``reasons``: filled with each measurement's ``why`` before it starts, keyed (target,
    level label, repeat), for the events to say (:func:`crossover.decide.events.live_events`)."""
    if question.axis == "rate" and prior:
        raise UsageError(PRIOR_ON_RATES)
    policy = live_policy(cfg, policy)
    runner = SweepRunner(cfg, out, events, tie_rel=policy.tie_rel, command="decide")
    try:
        obs = observations_in(runner.store, question.targets, question.axis)
        # each level and repeat once: a part measured again whole is two runs of one key
        kept = len({(o.target, o.level, o.repeat) for o in obs})
        say_kept(obs, question.targets, events, question.axis)
        starts_before = len(runner.engine_starts())
        launches = {t.name for t in cfg.targets if t.launch is not None}
        times = {t: TargetTime(launched=t in launches) for t in question.targets}

        async def let_go(target: str) -> None:
            """Release ``target`` (its engine stopped), the stop counted in its time."""
            t0 = time.perf_counter()
            await runner.release(target)
            times[target].wall_s += time.perf_counter() - t0
            _say_time(events, target, times)

        steps: list[Measure] = []
        last: str | None = None
        decision: Decision | None = None
        for _ in range(MAX_STEPS):
            step = next_step(question, obs, policy, prior)
            if isinstance(step, Decision):
                decision = step
                break
            steps.append(step)
            tt = times[step.target]
            if step.target != last:
                if last is not None:
                    await let_go(last)
                tt.starts += 1
                last = step.target
            level = Level(question.axis, step.level)
            key = run_key(step.target, level, step.repeat)
            # the rest of a level stopped before: measured again whole (see above)
            again = any(
                (o.target, o.level, o.repeat) == (step.target, step.level, step.repeat) for o in obs
            )
            watch = (
                SequentialWatch(
                    question, obs, policy, step.target, int(step.level),
                    cfg.requests_for(int(step.level)),
                )
                if step.sequential and question.axis == "concurrency"
                else None
            )  # fmt: skip
            before = runner.store.finished_by_key(key) if again else None
            if reasons is not None:
                reasons[(step.target, level.label, step.repeat)] = step.why
            t0 = time.perf_counter()
            await runner.measure_level(step.target, level, step.repeat, watch, again=again)
            tt.wall_s += time.perf_counter() - t0
            policy = _with_start_cost(policy, runner, step.target)
            row = runner.store.finished_by_key(key)
            if before is not None and row is not None and row.run_id == before.run_id:
                row = None  # measured again, it failed: the part read back is not its answer
            if row is None:  # the level failed: it holds nothing the policy can read
                o = Observation(step.target, step.level, step.repeat, {}, 0, 0, 0.0, False)
            else:
                part = part_of(runner.store.samples(row.run_id))
                o = observe(
                    step.target,
                    step.level,
                    step.repeat,
                    runner.store.records(row.run_id),
                    row.summary,
                    planned=part.planned if part is not None else None,
                )
                if part is not None:
                    tt.stopped.append(f"{step.level} r={step.repeat}: {part.why}")
            obs.append(o)
            tt.measuring_s += o.seconds
            if step.level not in tt.levels:
                tt.levels.append(step.level)
                tt.levels.sort()  # the JSON's order is the levels', not the policy's
        if last is not None:
            await let_go(last)
        if decision is None:
            raise UsageError(f"the decision did not settle in {MAX_STEPS} measurements")
        for start in runner.engine_starts()[starts_before:]:
            if start.target in times:
                times[start.target].ready_s.append(start.ready_s)
                if start.stop_s is not None:
                    times[start.target].stop_s.append(start.stop_s)
        sweep = runner.write_sweep_file()
        # the engine logs' long garbage collections that met a run: said in the answer's
        # notes (the policy is pure: given the same observations it settles the same way)
        tied = frozen_by_launch(cfg, gc_runs(out, sweep, question.targets), out)
        if tied:
            noted = next_step(question, obs, policy, prior, gc=tied)
            if isinstance(noted, Decision):
                decision = noted
        return LiveResult(decision, steps, times, sweep, kept, tied)
    finally:
        await runner.release()
        runner.close()
