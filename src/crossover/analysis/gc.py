"""The runs an engine's long garbage collection fell in, from its log and the sweep's
database.

SGLang's front end (its tokenizer manager, one Python process) stops for 0.5-0.74 s at a
full collection of its ~1 M objects; every request in flight waits it out, and a
closed-loop level whose first wave meets one has its TTFT moved by the pause (SGLang at
c=256 on an H100: TTFT p50 1,154 ms in one repeat, 530 ms in the next,
docs/results/h100/sglang-gc). With ``--gc-warning-threshold-secs`` (crossover passes
0.05) it logs each; an engine whose spec has a warning rule under
``logpatterns.LONG_GC_KEY`` is read here.

Clocks, and what they assume:

* the log stamps whole seconds of the engine host's local time. Its zone is read as
  ``crossover.engines.ready`` reads it: the first stamp's distance from crossover's
  launch header (UTC), rounded to a quarter hour. The engine and the sweep share one
  host clock (a local sweep; an engine on a Ray node keeps that node's clock).
* a run's measured window in wall-clock UTC: the database's ``created_at`` (wall
  seconds, taken just before the level's first request, its warm-up's) plus its
  requests' ``perf_counter`` offsets from that first send; the measured window runs
  from the first measured send to the last measured completion. The summary's
  ``started_at`` is no substitute: it is whole seconds and comes before the warm-up.
* a line is logged as its collection ends, within the second its stamp names: the
  pause ran from ``stamp - seconds`` at the earliest to ``stamp + 1`` at the latest. A
  pause that meets the window anywhere in that range is tied to the run; ``inside``
  says it lies wholly within the window whatever the second's fraction.

A results folder's ``sweep.db.xz`` (where it has no ``sweep.db``) is read through a
decompressed copy, removed after. A sweep folder with neither, or an engine log without
the launch header, ties nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from crossover.analysis.schema import SweepFile, level_label
from crossover.engines import logpatterns as lp
from crossover.engines import registry
from crossover.engines.effective import read_log
from crossover.engines.launchrec import engine_logs
from crossover.engines.ready import log_lines, utc_stamps
from crossover.errors import UsageError
from crossover.records.readable import folder_database, readable_database
from crossover.spec.load import Level

#: what a tied pause means, said wherever one is shown
MEANING = "every request in flight waited it out"


@dataclass(frozen=True)
class GcPause:
    """One long collection an engine logged: where, when (UTC, the start of the
    stamp's second) and how long."""

    log: str  # the log's file name
    line: int  # 1-based
    at: datetime
    seconds: float
    generation: int
    #: the log showed the engine's collector frozen before it (the rule's ``context`` line,
    #: SGLang's ``POST /freeze_gc`` answered 200): it collected objects made since the
    #: last freeze (0.05-0.06 s at 20 requests/s, docs/results/h100/moe-open-decide-freeze)
    frozen: bool = False


@dataclass(frozen=True)
class RunWindow:
    """One run's measured window in wall-clock UTC."""

    target: str
    level: Level
    repeat: int
    start: datetime
    end: datetime


@dataclass(frozen=True)
class GcRun:
    """A run and the long collections that fell in its measured window."""

    target: str
    label: str  # its level: ``c=256``, ``rate=2.5``
    level: float
    repeat: int
    pauses: tuple[GcPause, ...]
    #: of ``pauses``, whether each lies wholly within the window
    inside: tuple[bool, ...]
    engine: str
    #: the measured window's start (UTC)
    window_start: datetime
    #: the target's collector was frozen when they came: every pause came after a freeze
    #: its log shows (``GcPause.frozen``), or its launch has ``freeze_gc: true`` (a live
    #: decision knows it): the freeze is no remedy to name, it was on
    frozen: bool = False


def gc_pauses(log: Path, engine: str) -> list[GcPause]:
    """The long collections ``log`` names, under the engine's ``LONG_GC_KEY`` rule and
    stamped by its ``ready_clock``; none where either is missing or the log cannot say
    when (no launch header, no stamp). Each is ``frozen`` where the rule's ``context``
    line (the collector frozen) came before it."""
    spec = registry.get(engine)
    rule = next((r for r in spec.warning_rules if r.key == lp.LONG_GC_KEY), None)
    if rule is None or spec.ready_clock is None:
        return []
    try:
        lines = log_lines(read_log(log))
    except UsageError:
        return []
    walls = utc_stamps(lines, spec.ready_clock)
    if walls is None:
        return []
    out: list[GcPause] = []
    frozen = False
    for i, line in enumerate(lines):
        m = rule.regex.search(line)
        if m is None and rule.context is not None and rule.context.search(line):
            frozen = True
        at = walls[i]
        if m is None or at is None:
            continue
        out.append(GcPause(log.name, i + 1, at, float(m.group(2)), int(m.group(1)), frozen))
    return out


def run_windows(db: Path, targets: Collection[str] | None = None) -> list[RunWindow]:
    """Every finished run's measured window in ``db`` (a sweep's database), of
    ``targets`` when given (their records alone are read); none where it is not there."""
    if not db.is_file():
        return []
    from crossover.records.store import Store

    out: list[RunWindow] = []
    store = Store(db, read_only=True)
    try:
        for row in store.runs():
            if row.key is None or row.key.count("|") != 2:
                continue
            target, level, rep = row.key.split("|")
            if targets is not None and target not in targets:
                continue
            try:
                lvl = Level.from_key(level)
                repeat = int(rep.removeprefix("r="))
            except ValueError:
                continue
            records = store.records(row.run_id)
            measured = [r for r in records if not r.warmup]
            ends = [r.t_done_ns or r.t_last_ns for r in measured]
            done = [t for t in ends if t is not None]
            if not measured or not done:
                continue
            first = min(r.t_send_ns for r in records)
            anchor = datetime.fromtimestamp(row.created_at, UTC)

            def wall(ns: int, first: int = first, anchor: datetime = anchor) -> datetime:
                return anchor + timedelta(seconds=(ns - first) / 1e9)

            start = wall(min(r.t_send_ns for r in measured))
            out.append(RunWindow(target, lvl, repeat, start, wall(max(done))))
    finally:
        store.close()
    return out


def _meets(p: GcPause, w: RunWindow) -> tuple[bool, bool]:
    """(the pause may meet the window, it lies wholly within it), the second's fraction
    unknown: it ended in ``[at, at + 1 s)`` and began ``seconds`` before."""
    earliest = p.at - timedelta(seconds=p.seconds)
    latest = p.at + timedelta(seconds=1)
    return earliest < w.end and latest > w.start, earliest >= w.start and latest <= w.end


def gc_runs(
    sweep_dir: Path,
    sweep: SweepFile,
    targets: Collection[str] | None = None,
    *,
    database: Path | None = None,
) -> list[GcRun]:
    """The sweep's runs (of ``targets``, when given) whose measured window a logged long
    collection met, in the sweep's target order, then by level and repeat. ``database``:
    the folder's database as a caller already opened it (a committed sweep.db.xz's
    decompressed copy: not made again), else the folder's own."""
    engines = {
        t.name: t.engine
        for t in sweep.targets
        if t.engine and (targets is None or t.name in targets)
    }
    pauses: dict[str, list[GcPause]] = {}
    for target, engine in engines.items():
        try:
            registry.get(engine)
        except UsageError:
            continue
        logs = engine_logs(sweep_dir / "engines", target, replicas=True)
        found = [p for log in logs for p in gc_pauses(log, engine)]
        if found:
            pauses[target] = found
    if not pauses:  # the database's records are read only for a log that has some
        return []
    if database is not None:
        windows = run_windows(database, set(pauses))
    else:
        own = folder_database(sweep_dir)
        if own is None:
            return []
        with readable_database(own) as db:  # a sweep.db.xz: a copy, removed after
            windows = run_windows(db, set(pauses))
    rank = sweep.target_rank()
    out: list[tuple[tuple[int, float, int], GcRun]] = []
    for w in windows:
        hits = [(p, _meets(p, w)) for p in pauses.get(w.target, [])]
        met = [(p, inside) for p, (meets, inside) in hits if meets]
        if not met:
            continue
        run = GcRun(
            target=w.target,
            label=level_label(w.level.axis, w.level.value),
            level=w.level.value,
            repeat=w.repeat,
            pauses=tuple(p for p, _ in met),
            inside=tuple(i for _, i in met),
            engine=registry.get(engines[w.target]).display_name,
            window_start=w.start,
            frozen=all(p.frozen for p, _ in met),
        )
        out.append(((rank(w.target), w.level.value, w.repeat), run))
    return [x for _, x in sorted(out, key=lambda kx: kx[0])]


def describe(x: GcRun) -> str:
    """What fell in one run: ``a garbage collection in SGLang's front end met this run's
    measured window: 0.53 s, ending 0.3-1.3 s into it (sglang.log line 912, at its edge:
    the log stamps whole seconds)`` (``front end, its collector frozen, met`` where
    ``x.frozen``)."""
    n = len(x.pauses)
    what = "a garbage collection" if n == 1 else f"{n} garbage collections"
    parts = []
    for p, inside in zip(x.pauses, x.inside, strict=True):
        into = (p.at - x.window_start).total_seconds()
        edge = "" if inside else ", at its edge: the log stamps whole seconds"
        parts.append(
            f"{p.seconds:.2f} s, ending {max(0.0, into):.1f}-{into + 1:.1f} s into it "
            f"({p.log} line {p.line}{edge})"
        )
    frozen = ", its collector frozen," if x.frozen else ""
    head = f"{what} in {x.engine}'s front end{frozen} met this run's measured window"
    return f"{head}: " + "; ".join(parts)


def format_gc_runs(runs: Sequence[GcRun]) -> list[str]:
    """One line per run: ``sglang c=256 (repeat 0): a 0.53 s garbage collection ...``."""
    return [f"{x.target} {x.label} (repeat {x.repeat}): {describe(x)}: {MEANING}" for x in runs]
