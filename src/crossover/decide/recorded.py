"""The recorded source a replay measures from: a finished sweep's per-request database.

A level measured is its recorded requests on their own stamps (a part of it: how far they
had got a number of seconds after the level's first measured send), a repeat is the
recorded repeat, and a level the sweep never ran is one the replay cannot measure (the
policy is told it holds nothing). ``crossover.decide.replay`` runs the policy against it
and compares what it concluded with the grid's.

The database is only read (opened read-only, never written).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from crossover.analysis.schema import EngineStart
from crossover.decide.coarse import may_stop_at
from crossover.decide.model import LevelNum, Observation
from crossover.decide.observe import (
    Finished,
    end_ns,
    metric_values,
    observe,
    open_loop,
    span_s,
)
from crossover.errors import UsageError
from crossover.records.database_file import cannot_read, damaged, read_only_uri
from crossover.records.model import RequestRecord
from crossover.records.store import read_records
from crossover.spec.load import Axis, Level


@dataclass(frozen=True)
class RecordedRun:
    """One finished run in the database."""

    run_id: str
    target: str
    level: LevelNum
    repeat: int
    context: Mapping[str, Any]
    summary: Mapping[str, Any] | None


#: (target, level, repeat)
RunKey = tuple[str, LevelNum, int]


class Recorded:
    """The finished runs of a sweep database along one axis, read-only: its concurrency
    levels, or its rates where it holds no concurrency level (``axis``)."""

    def __init__(self, path: Path) -> None:
        if not path.is_file():
            raise UsageError(f"{path}: no such database")
        self.path = path
        try:
            self.db = sqlite3.connect(read_only_uri(path), uri=True)
        except sqlite3.DatabaseError as exc:
            raise cannot_read(path, exc) from None
        try:
            self.axis, self.runs = self._finished_runs()
        except BaseException:
            self.db.close()  # refused: nothing holds the database open after
            raise
        self._records: dict[str, list[RequestRecord]] = {}

    def _finished_runs(self) -> tuple[Axis, dict[RunKey, RecordedRun]]:
        """The database's finished runs of one axis, by (target, level, repeat): its
        concurrency levels where it has any (as before rates were read), else its rates."""
        path = self.path
        try:
            rows = self.db.execute(
                "SELECT run_id, key, context, summary FROM runs "
                "WHERE status='done' AND key IS NOT NULL ORDER BY created_at"
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            raise cannot_read(path, exc) from None
        by_axis: dict[Axis, dict[RunKey, RecordedRun]] = {"concurrency": {}, "rate": {}}
        for run_id, key, ctx, summary in rows:
            parts = key.split("|")
            if len(parts) != 3 or not parts[1].startswith(("c=", "rate=")):
                continue  # no level
            name, level, rep = parts
            try:
                lv = Level.from_key(level)
                at: LevelNum = lv.value
                repeat = int(rep.removeprefix("r="))
                context = orjson.loads(ctx)
                done = orjson.loads(summary) if summary else None
                if not isinstance(context, dict) or not isinstance(done, dict | None):
                    raise TypeError("its context or summary is not a JSON object")
            except (ValueError, TypeError) as exc:  # orjson's JSONDecodeError: a ValueError
                raise damaged(path, f"run {run_id}", exc) from None
            by_axis[lv.axis][(name, at, repeat)] = RecordedRun(
                run_id, name, at, repeat, context.get("context") or {}, done
            )
        # one axis: a database of both (two sweeps in one folder) replays its concurrency
        axis: Axis = "concurrency" if by_axis["concurrency"] or not by_axis["rate"] else "rate"
        runs = by_axis[axis]
        if not runs:
            raise UsageError(f"{path}: no finished concurrency level or rate to replay")
        return axis, runs

    def records(self, run_id: str) -> list[RequestRecord]:
        if run_id not in self._records:
            rows = self.db.execute(
                "SELECT record FROM requests WHERE run_id=? ORDER BY warmup DESC, idx", (run_id,)
            ).fetchall()
            self._records[run_id] = read_records(self.path, run_id, rows)
        return self._records[run_id]

    def targets(self) -> list[str]:
        seen: list[str] = []
        for t, _, _ in self.runs:
            if t not in seen:
                seen.append(t)
        return seen

    def engines(self) -> dict[str, str]:
        """Each target's engine, as its runs' contexts name it (where they do)."""
        out: dict[str, str] = {}
        for (t, _, _), run in self.runs.items():
            engine = run.context.get("engine")
            name = engine.get("name") if isinstance(engine, Mapping) else None
            if isinstance(name, str) and name:
                out.setdefault(t, name)
        return out

    def levels(self) -> list[LevelNum]:
        return sorted({c for _, c, _ in self.runs})

    def repeats(self) -> int:
        return 1 + max(r for _, _, r in self.runs)

    def span(self, run_id: str) -> tuple[float, int]:
        """A whole run's measuring time (first send to last end, warm-up included) and its
        measured requests, read in SQL (no record is parsed)."""
        try:
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
        except (sqlite3.DatabaseError, TypeError) as exc:  # a record that is not JSON
            raise damaged(self.path, f"a request record of run {run_id}", exc) from None

    def level_requests(self, names: Sequence[str]) -> dict[LevelNum, int]:
        """Each level's measured requests, where every recorded run of ``names`` there
        holds as many (a level whose runs differ is left out: not known)."""
        seen: dict[LevelNum, set[int]] = {}
        for (t, c, _), run in self.runs.items():
            if t in names:
                seen.setdefault(c, set()).add(self.measured(run.run_id))
        return {c: n.pop() for c, n in seen.items() if len(n) == 1}

    def measured(self, run_id: str) -> int:
        """A run's measured requests (its warm-up left out), counted in SQL."""
        try:
            row = self.db.execute(
                "SELECT count(*) FROM requests WHERE run_id=? AND warmup=0", (run_id,)
            ).fetchone()
        except sqlite3.DatabaseError as exc:
            raise damaged(self.path, f"the requests of run {run_id}", exc) from None
        return int(row[0])

    def observe(
        self,
        t: str,
        c: LevelNum,
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
            return Observation(
                t, c, r, values, planned, planned, seconds, valid,
                **open_loop(run.summary)._asdict(),
            )  # fmt: skip
        return observe(t, c, r, self.records(run.run_id), run.summary, budget_s)

    def sequential(
        self, run: RecordedRun, settle: Callable[[Mapping[str, float | None]], str | None]
    ) -> Observation | None:
        """The level as a live sequential level would have ended (``crossover.decide.live.
        SequentialWatch``): its measured requests taken as they finished, from one wave on
        (as many as the level's streams, at least ``MIN_PART``) ``settle`` asked at each
        wave's end while a stop still leaves requests unsent (:func:`crossover.decide.coarse.
        may_stop_at`); at the first it answers, the requests sent by then finish (the drain)
        and the level is their summary, as the sweep's own summarizer computes it.
        ``None``: it never stops (the whole level)."""
        from crossover.metrics.run import RunContext, summarize

        records = self.records(run.run_id)
        measured = [x for x in records if not x.warmup]
        finished = sorted(measured, key=end_ns)
        so_far = Finished()
        for n, rec in enumerate(finished[:-1], start=1):
            so_far.add(rec)
            if not may_stop_at(n, int(run.level), len(measured)):
                continue
            if settle(so_far.values()) is None:
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

    def engine_starts(self) -> list[EngineStart]:
        """The engine starts the sweep timed (``engine_starts``; none in older databases)."""
        try:
            row = self.db.execute("SELECT v FROM meta WHERE k='engine_starts'").fetchone()
        except sqlite3.DatabaseError:  # a database from before the meta table
            return []
        if row is None:
            return []
        try:
            return [EngineStart.model_validate(x) for x in orjson.loads(row[0])]
        except (orjson.JSONDecodeError, ValidationError, TypeError):
            return []

    def restarted_per_repeat(self) -> bool:
        """Whether the sweep measured each repeat on its own engine start
        (``restart_between_repeats`` in its stored identity)."""
        try:
            row = self.db.execute("SELECT v FROM meta WHERE k='identity'").fetchone()
            held = orjson.loads(row[0]) if row is not None else None
        except (sqlite3.DatabaseError, orjson.JSONDecodeError):
            return False
        return isinstance(held, dict) and bool(held.get("restart_between_repeats"))

    def close(self) -> None:
        self.db.close()
