"""What a finished decision cost, said after its answer: a replay's measuring and GPU time
against the grid it replayed, a live decision's measured wall and measuring time per
target; each as the lines ``crossover decide`` prints and as its ``--json``
(``crossover.decision/1`` with a ``replay`` or ``live`` key). Pure but for a live
decision's engine logs and database, read for its GC pauses (``crossover.analysis.gc``):
the CLI echoes them.

A live decision names, of the question's targets, the runs whose engine's KV cache was
full and those a logged long garbage collection met. A replay names them among the
recorded runs it read where its database lies in its sweep folder (sweep.json's KV gauges
and each target's engine; :func:`crossover.analysis.gc.gc_runs` reads the folder's
database beside its ``engines/``): a database alone, of another name or elsewhere, has
neither (:func:`recorded`, given the folder's sweep by the CLI).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crossover.analysis.gc import GcRun, format_gc_runs, gc_runs
from crossover.analysis.kv import (
    AboveSlots,
    KvFullRun,
    QueuedRun,
    above_slots,
    format_above_slots,
    format_kv_full,
    format_queued,
    kv_full_runs,
    queued_runs,
)
from crossover.analysis.machines import (
    TargetMachines,
    format_machines,
    machines_json,
    target_machines,
)
from crossover.decide.model import Question, fmt_levels
from crossover.decide.starts import START_S
from crossover.decide.text import decision_json, decision_lines
from crossover.words import plural

if TYPE_CHECKING:  # a replay need not import the live driver, nor a live decision the replay
    from crossover.analysis.schema import SweepFile
    from crossover.decide.live import LiveResult
    from crossover.decide.replay import ReplayResult


#: what a replay's ``KV full:`` and ``GC pause:`` lines are about: the recorded runs it
#: read, as the grid measured them (a replayed part of a run shares its run's line)
RECORDED = "in the grid's runs this replay read"


@dataclass(frozen=True)
class Recorded:
    """Of the recorded runs a replay read, those whose engine's KV cache was full with
    requests waiting and those a logged long garbage collection met: what a live decision
    measuring them would have said after its answer. Read where the database lies in its
    sweep folder (sweep.json beside it, the engine logs under ``engines/``)."""

    kv: list[KvFullRun]
    gc: list[GcRun]
    #: open-loop runs whose engine queued requests (``crossover.analysis.kv``)
    queued: list[QueuedRun] = field(default_factory=list)
    #: the runs read, by the machine they were measured on, where there were several
    #: (``crossover.analysis.machines``)
    machines: list[TargetMachines] = field(default_factory=list)


def recorded(sweep: SweepFile, r: ReplayResult) -> Recorded:
    """:class:`Recorded` for replay ``r`` of ``sweep``: the KV-full runs among those it
    read, and the GC-paused ones the replay kept (``ReplayResult.gc``)."""
    read = {(o.target, float(o.level), o.repeat) for o in r.observations}
    targets = sorted({t for t, _, _ in read})
    kv = [x for x in kv_full_runs(sweep, targets) if (x.target, x.level, x.repeat) in read]
    queued = [x for x in queued_runs(sweep, targets) if (x.target, x.level, x.repeat) in read]
    return Recorded(kv, list(r.gc), queued, target_machines(sweep, targets, read))


def replay_lines(
    r: ReplayResult, db: Path, start_s: float | None, seen: Recorded | None = None
) -> list[str]:
    """The replayed decision, its measuring and GPU time per target (``start_s``: the
    ``--start-s`` given, else each target's own start cost), and its conclusions against
    the grid's in ``db``; ``seen``: the KV-full and GC-pause runs among those it read,
    said after the answer as a live decision says its own."""
    out = decision_lines(r.decision)
    if seen is not None:
        out += [f"KV full ({RECORDED}): {x}" for x in format_kv_full(seen.kv)]
        out += [f"queued ({RECORDED}): {x}" for x in format_queued(seen.queued)]
        out += [f"machines ({RECORDED}): {x}" for x in format_machines(seen.machines)]
        out += [f"GC pause ({RECORDED}): {x}" for x in format_gc_runs(seen.gc)]
    costs = r.start_costs
    out.append("measured (replayed from the records' stamps), per target:")
    for t, s in r.seconds.items():
        levels = fmt_levels(r.levels_measured[t])
        out.append(f"  {t}: {s:,.0f} s of the grid's {r.grid_seconds[t]:,.0f} s (levels {levels})")
    used, grid = sum(r.seconds.values()), sum(r.grid_seconds.values())
    out.append(
        f"measuring time: {used:,.0f} s of the grid's {grid:,.0f} s ({r.fraction:.0%}); "
        f"{plural(len(r.steps), 'measurement')}, {plural(r.starts, 'engine start')} in this order"
    )
    parts = {(o.target, o.level, o.repeat) for o in r.observations if not o.complete}
    whole = {(o.target, o.level, o.repeat) for o in r.observations if o.complete}
    twice = len(parts & whole)
    if used > grid and twice:  # a replay can cost more than the grid: what it paid twice
        out.append(
            f"  more than the grid: {plural(twice, 'level')} measured in part, then again "
            "whole where the part left a comparison open, each paid for"
        )
    gpu = r.gpu_seconds()
    out.append("GPU time per target (measuring + engine starts x each one's cost):")
    for t, g in gpu.items():
        n = r.starts_by_target.get(t, 0)
        cost = costs[t]
        out.append(
            f"  {t}: {r.seconds[t]:,.0f} s measuring + {plural(n, 'start')} x "
            f"{cost.seconds:,.0f} s = {g:,.0f} s (start: {cost.source})"
        )
    estimated = sorted(t for t, x in costs.items() if not x.measured and start_s is None)
    guessed = f"; {', '.join(estimated)}'s starts estimated" if estimated else ""
    out.append(
        f"  total: {sum(gpu.values()):,.0f} s ({sum(gpu.values()) / 60:.1f} GPU-minutes{guessed})"
    )
    out += [f"checked against the grid: {line}" for line in r.assumption_checks]
    same = sum(c.same for c in r.comparisons)
    said = sum(c.deferred for c in r.comparisons)
    also = f", {said} left unsettled within the budget (said above)" if said else ""
    out.append(
        f"against the grid ({db}): {same} of {len(r.comparisons)} conclusions the same{also}"
    )
    for c in r.comparisons:
        if not c.same:
            how = "unsettled" if c.deferred else "differs"
            out.append(f"  {how}: {c.a} vs {c.b}, {c.metric}: grid {c.grid}; decide {c.decided}")
    return out


def replay_json(
    r: ReplayResult, db: Path, start_s: float | None, seen: Recorded | None = None
) -> dict[str, Any]:
    """The replayed decision as ``crossover.decision/1`` with its ``replay`` key (and,
    where ``seen`` is read, ``kv_full``, ``queued`` and ``gc_pauses`` as a live
    decision's)."""
    costs = r.start_costs
    gpu = r.gpu_seconds()
    found: dict[str, Any] = (
        {
            "kv_full": kv_full_json(seen.kv),
            "queued": queued_json(seen.queued),
            "machines": machines_json(seen.machines),
            "gc_pauses": gc_pauses_json(seen.gc),
        }
        if seen is not None
        else {}
    )
    return decision_json(
        r.decision,
        {
            **found,
            "replay": {
                "database": str(db),
                "seconds": r.seconds,
                "grid_seconds": r.grid_seconds,
                "grid_duration_s": r.grid_duration_s,
                "fraction": r.fraction,
                "starts": r.starts,
                "gpu_time": {
                    "start_s": START_S if start_s is None else start_s,
                    "start_s_source": "--start-s" if start_s is not None else "default",
                    "per_target": {
                        t: {
                            "measuring_s": r.seconds[t],
                            "starts": r.starts_by_target.get(t, 0),
                            "start_s": costs[t].seconds,
                            "start_source": costs[t].source,
                            "start_measured": costs[t].measured,
                            "total_s": g,
                        }
                        for t, g in gpu.items()
                    },
                    "total_s": sum(gpu.values()),
                },
                "same": [c.__dict__ for c in r.comparisons],
            },
        },
    )


def _grid_levels(q: Question) -> int:
    return len(q.levels) * len(q.targets) * q.repeats


def _gc(result: LiveResult, q: Question, out: Path) -> list[GcRun]:
    """The runs a logged long garbage collection met: as the decision read them at its
    end, else from the folder ``out``."""
    return result.gc if result.gc is not None else gc_runs(out, result.sweep, q.targets)


def live_lines(result: LiveResult, q: Question, out: Path) -> list[str]:
    """The live decision, each target's measured wall and measuring time (its engine's
    starts and stops, the levels it stopped within), and where the results are (``out``)."""
    lines = decision_lines(result.decision)
    lines += [f"KV full: {x}" for x in format_kv_full(kv_full_runs(result.sweep, q.targets))]
    lines += [f"queued: {x}" for x in format_queued(queued_runs(result.sweep, q.targets))]
    lines += [f"above slots: {x}" for x in format_above_slots(above_slots(result.sweep, q.targets))]
    machines = target_machines(result.sweep, q.targets)
    lines += [f"machines: {x}" for x in format_machines(machines)]
    lines += [f"GC pause: {x}" for x in format_gc_runs(_gc(result, q, out))]
    lines.append(
        "GPU time per target (wall, measured: the engine up from its start to its stop, "
        "warm-ups and levels; measuring: the records' stamps):"
    )
    for t, tt in result.times.items():
        if not tt.levels and not tt.starts:  # a resume with nothing left of it
            lines.append(f"  {t}: nothing measured this time")
            continue
        levels = fmt_levels(sorted(tt.levels))
        starts = f", {plural(tt.starts, 'engine start')}" if tt.launched else ""
        if tt.ready_s:
            ready = ", ".join(f"{r:.1f}" for r in tt.ready_s)
            stops = ", ".join(f"{x:.1f}" for x in tt.stop_s)
            starts += f" (ready after {ready} s" + (f", stopped in {stops} s)" if stops else ")")
        lines.append(
            f"  {t}: {tt.wall_s:.1f} s wall, {tt.measuring_s:.1f} s measuring{starts}, "
            f"levels {levels}"
        )
        lines += [f"    level {why}" for why in tt.stopped]
    wall = sum(tt.wall_s for tt in result.times.values())
    meas = sum(tt.measuring_s for tt in result.times.values())
    lines.append(f"  GPU time: {wall:.1f} s ({wall / 60:.1f} GPU-minutes), measured")
    lines.append(
        f"total: {wall:.1f} s wall, {meas:.1f} s measuring; "
        f"{plural(len(result.steps), 'level')} measured "
        f"of the grid's {_grid_levels(q)} ({result.kept} kept from before)"
    )
    lines.append(f"results: {out / 'sweep.json'} (database {out / 'sweep.db'})")
    return lines


def kv_full_json(runs: list[KvFullRun]) -> list[dict[str, Any]]:
    """The runs whose KV cache was full with requests waiting (``crossover.analysis.kv``),
    as the live decision's JSON lists them under ``kv_full``."""
    return [
        {
            "target": x.target,
            "level": x.level,
            "repeat": x.repeat,
            "peak_usage": x.pressure.peak_usage,
            "peak_waiting": x.pressure.peak_waiting,
            "full_waiting_samples": x.pressure.full_waiting_samples,
            "samples": x.pressure.samples,
            "usage_series": x.pressure.usage_series,
            "waiting_series": x.pressure.waiting_series,
        }
        for x in runs
    ]


def above_slots_json(found: list[AboveSlots]) -> list[dict[str, Any]]:
    """The targets measured at closed-loop levels above their slots
    (``crossover.analysis.kv.above_slots``), as the live decision's JSON lists them under
    ``above_slots``."""
    return [
        {
            "target": x.target,
            "slots": x.slots,
            "levels": list(x.levels),
            "peak_waiting": x.peak_waiting,
        }
        for x in found
    ]


def queued_json(runs: list[QueuedRun]) -> list[dict[str, Any]]:
    """The open-loop runs whose engine queued requests (``crossover.analysis.kv``), as the
    live decision's JSON lists them under ``queued``."""
    return [
        {
            "target": x.target,
            "level": x.level,
            "repeat": x.repeat,
            "peak_waiting": x.queue.peak_waiting,
            "longest_in_a_row": x.queue.longest,
            "longest_in_a_row_s": x.queue.longest_s,
            "waiting_samples": x.queue.waiting_samples,
            "samples": x.queue.samples,
            "peak_running": x.queue.peak_running,
            "limit": x.limit,
            "peak_usage": x.queue.peak_usage,
            "waiting_series": x.queue.waiting_series,
        }
        for x in runs
    ]


def gc_pauses_json(runs: list[GcRun]) -> list[dict[str, Any]]:
    """The runs a logged long garbage collection met (``crossover.analysis.gc``), as the
    live decision's JSON lists them under ``gc_pauses``."""
    return [
        {
            "target": x.target,
            "level": x.level,
            "repeat": x.repeat,
            "engine": x.engine,
            "window_start": x.window_start.isoformat(),
            # the target's collector frozen when they came (``GcRun.frozen``)
            "frozen": x.frozen,
            "pauses": [
                {
                    "seconds": p.seconds,
                    "generation": p.generation,
                    "at": p.at.isoformat(),
                    "log": p.log,
                    "line": p.line,
                    "inside": inside,
                }
                for p, inside in zip(x.pauses, x.inside, strict=True)
            ],
        }
        for x in runs
    ]


def live_json(result: LiveResult, q: Question, out: Path) -> dict[str, Any]:
    """The live decision as ``crossover.decision/1`` with its ``live`` key, under
    ``kv_full`` the levels measured past the engine's KV capacity and under ``gc_pauses``
    the runs a logged long garbage collection met (both of the question's targets)."""
    return decision_json(
        result.decision,
        {
            "kv_full": kv_full_json(kv_full_runs(result.sweep, q.targets)),
            "queued": queued_json(queued_runs(result.sweep, q.targets)),
            "above_slots": above_slots_json(above_slots(result.sweep, q.targets)),
            "machines": machines_json(target_machines(result.sweep, q.targets)),
            "gc_pauses": gc_pauses_json(_gc(result, q, out)),
            "live": {
                "out": str(out),
                "times": {t: tt.__dict__ for t, tt in result.times.items()},
                "gpu_time": {
                    "per_target": {t: tt.wall_s for t, tt in result.times.items()},
                    "total_s": sum(tt.wall_s for tt in result.times.values()),
                    "how": "measured: each target's engine from its start to its stop",
                },
                "measured": len(result.steps),
                "grid_levels": _grid_levels(q),
                # where it was measured (sweep.json's hosts), with the answer
                "hosts": [h.model_dump(mode="json") for h in result.sweep.hosts],
            },
        },
    )
