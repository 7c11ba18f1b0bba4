"""A sweep's run summaries recomputed from sweep.db's per-request records (``crossover
report --resummarize``).

The records are the source of truth and the summaries sweep.json keeps are derived: a
sweep measured by an older crossover is read here with today's metric code (its new
fields, validity checks and window rules). Nothing is written: the database is opened
only to read, and the sweep comes back as a new object."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from crossover.analysis.schema import SweepFile, SweepRun, level_label
from crossover.errors import UsageError
from crossover.measure import resummarize
from crossover.records.database_file import require_database
from crossover.records.readable import folder_database, readable_database
from crossover.records.store import Store
from crossover.sweep.driver import RunPlace, finished_rows
from crossover.words import plural

#: a headline moved when it changed by more than this share of its old value: a changed
#: rule moves it further; recomputing the same numbers does not move it at all
MOVED_REL = 0.001
#: the headline numbers whose moves the summary line counts: (what it says, summary path)
HEADLINES = (("total tokens/s", "throughput.total_tokens_per_s"), ("TTFT p50", "ttft_ms.p50"))
#: verdict changes the line names one by one; any more are counted
NAMED = 5


@dataclass(frozen=True)
class VerdictChange:
    """A run whose recomputed verdict differs from the stored one; ``why``: the problem
    codes (warnings and errors) one summary has and the other lacks."""

    run: str
    before: str
    after: str
    why: str | None

    @property
    def change(self) -> str:
        """``valid -> unverified, multi_token_chunks``: the change without the run."""
        return f"{self.before} -> {self.after}" + (f", {self.why}" if self.why else "")


@dataclass(frozen=True)
class Resummarized:
    """The sweep with every run's summary recomputed, and what changed that a reader of
    the report cares about (fields only the newer code writes are no change)."""

    sweep: SweepFile
    verdicts: list[VerdictChange]
    #: per headline (``HEADLINES``' words), how many runs it moved by over ``MOVED_REL``
    moved: dict[str, int]

    def line(self) -> str:
        """One line: how many runs, which verdicts changed and how, how many runs each
        headline moved in."""
        changed = plural(len(self.verdicts), "verdict") + " changed"
        if self.verdicts:
            changed += f" ({'; '.join(_grouped(self.verdicts))})"
        moves = ", ".join(f"{what} in {plural(n, 'run')}" for what, n in self.moved.items())
        runs = plural(len(self.sweep.runs), "run")
        return (
            f"resummarized {runs} from sweep.db's records: {changed}; "
            f"moved over {MOVED_REL:.1%}: {moves}"
        )


def _grouped(changes: list[VerdictChange]) -> list[str]:
    """``valid -> unverified, multi_token_chunks: a c=1 r=0, a c=8 r=0``: one part per kind
    of change, its runs named up to ``NAMED``."""
    by_change: dict[str, list[str]] = {}
    for c in changes:
        by_change.setdefault(c.change, []).append(c.run)
    parts = []
    for change, runs in by_change.items():
        more = f" and {len(runs) - NAMED} more" if len(runs) > NAMED else ""
        parts.append(f"{change}: {', '.join(runs[:NAMED])}{more}")
    return parts


def sweep_database(sweep_dir: Path) -> Path:
    """``sweep_dir``'s ``sweep.db``, else the ``sweep.db.xz`` a results folder commits
    (read through a decompressed copy), or a one-line error where it has neither."""
    found = folder_database(sweep_dir)
    if found is None:
        raise UsageError(
            f"{sweep_dir}: no sweep.db beside sweep.json (nor the sweep.db.xz a results "
            "folder commits): --resummarize reads the per-request records it holds"
        )
    return found


def finished_runs(store: Store) -> dict[RunPlace, str]:
    """The run id the sweep file takes for each place (``finished_rows``: as
    ``SweepDriver`` builds sweep.json)."""
    return {place: row.run_id for place, row in finished_rows(store).items()}


def run_name(run: SweepRun) -> str:
    """``sglang c=256 r=0``: the run as the line names it."""
    return f"{run.target} {level_label(run.axis, run.level)} r={run.repeat}"


def _serious(run: SweepRun) -> set[str]:
    return {p.code for p in run.problems if p.severity != "info"}


def verdict_change(old: SweepRun, new: SweepRun) -> VerdictChange | None:
    """How ``old``'s verdict changed in ``new``, or ``None`` where it did not."""
    if old.verdict == new.verdict:
        return None
    added, gone = _serious(new) - _serious(old), _serious(old) - _serious(new)
    why = ", ".join(sorted(added)) or ", ".join(f"no {c}" for c in sorted(gone)) or None
    return VerdictChange(run_name(old), old.verdict, new.verdict, why)


def moved(old: float | None, new: float | None) -> bool:
    """A headline number changed by more than ``MOVED_REL`` (or appeared, or went)."""
    if old is None or new is None:
        return (old is None) != (new is None)
    return abs(new - old) > MOVED_REL * abs(old)


def recomputed(run: SweepRun, store: Store, run_id: str) -> SweepRun:
    """``run`` with its summary recomputed from the records of ``run_id``, its
    ``overloaded`` worked out again from that summary (a rate level's)."""
    summary = resummarize(store, run_id)
    return SweepRun.model_validate({**dict(run), "summary": summary, "overloaded": None})


def resummarize_sweep(
    sweep_dir: Path, sweep: SweepFile, advance: Callable[[], None] | None = None
) -> Resummarized:
    """``sweep`` (read from ``sweep_dir``) with every run's summary recomputed from
    ``sweep_dir/sweep.db``, opened only to read; ``advance`` is called after each run.
    A run with no finished run in the database is a one-line error."""
    db = sweep_database(sweep_dir)
    with readable_database(db) as readable:  # a sweep.db.xz: a copy, removed after
        require_database(readable)
        runs = _recomputed_runs(db, readable, sweep, advance)
    pairs = list(zip(sweep.runs, runs, strict=True))
    changes = [c for old, new in pairs if (c := verdict_change(old, new)) is not None]
    counts = {
        what: sum(moved(old.value(path), new.value(path)) for old, new in pairs)
        for what, path in HEADLINES
    }
    return Resummarized(sweep.model_copy(update={"runs": runs}), changes, counts)


def _recomputed_runs(
    db: Path, readable: Path, sweep: SweepFile, advance: Callable[[], None] | None
) -> list[SweepRun]:
    """Every run of ``sweep`` recomputed from the database file ``readable`` (``db``
    itself, or its decompressed copy: ``db`` is what an error names)."""
    runs: list[SweepRun] = []
    with Store(readable, read_only=True) as store:
        ids = finished_runs(store)
        for run in sweep.runs:
            run_id = ids.get((run.target, run.axis, run.level, run.repeat))
            if run_id is None:
                raise UsageError(
                    f"{db}: no finished run for sweep.json's {run_name(run)} "
                    "(is this the sweep's own database?)"
                )
            runs.append(recomputed(run, store, run_id))
            if advance is not None:
                advance()
    return runs
