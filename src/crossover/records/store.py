"""The SQLite store: one row per request, written off the event loop.

Every write goes through one writer thread with its own connection, which commits
whatever has queued up in one transaction, so a burst of streams finishing together
costs one commit, not one each (a commit was ~260 us on the loop, and 256 finishing
streams stamped the last token of the others ~85 ms late). WAL mode with
``synchronous=NORMAL``.

While a load is in flight its finished records go through a ``RecordSink``: held on the
loop (nothing but a list append) and handed to the writer in one batch when the level
ends, or at the first record finished ``HOLD_S`` after the oldest one held. Writing each
record at once woke the writer for every few records; on the client's core its commits
and the GIL hand-overs ran while the other streams' last chunks waited in their sockets
(1,024 streams ending together: last tokens stamped 0.6 ms late on the median run, 1.6
ms on the worst of six, against 0.24 and 0.48 ms held; ``bench/client_overhead.py``). A
client killed mid-level loses at most ``HOLD_S`` of that level's records, and an
interrupted level is redone on resume anyway; Ctrl-C and an engine's death write
everything received first.

Reads (and ``flush``) wait for the queued writes first, so a caller always reads what
it wrote. Runs carry a ``key`` so an interrupted sweep can find what it already
finished and resume. A command that only reads results (``summarize``) opens the store
``read_only``: nothing is written into the file or beside it.
"""

from __future__ import annotations

import queue
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import orjson

from crossover.errors import UsageError
from crossover.records.database_file import cannot_read, damaged, read_only_uri
from crossover.records.model import RequestRecord

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    key TEXT,
    created_at REAL NOT NULL,
    status TEXT NOT NULL,
    context TEXT NOT NULL,
    summary TEXT
);
CREATE INDEX IF NOT EXISTS runs_key ON runs(key);
CREATE TABLE IF NOT EXISTS requests (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    idx INTEGER NOT NULL,
    warmup INTEGER NOT NULL,
    record BLOB NOT NULL,
    PRIMARY KEY (run_id, idx, warmup)
);
CREATE TABLE IF NOT EXISTS samples (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    source TEXT NOT NULL,
    t_s REAL NOT NULL,
    data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
"""


@dataclass(frozen=True)
class RunRow:
    run_id: str
    key: str | None
    created_at: float
    status: str
    context: dict[str, Any]
    summary: dict[str, Any] | None


def read_records(path: Path, run_id: str, rows: Sequence[Sequence[Any]]) -> list[RequestRecord]:
    """The request records of ``rows`` (one ``record`` column each), read back."""
    from pydantic import ValidationError

    try:
        return [RequestRecord.model_validate(orjson.loads(r[0])) for r in rows]
    except (orjson.JSONDecodeError, ValidationError, TypeError) as exc:
        raise damaged(path, f"a request record of run {run_id}", exc) from None


#: the most statements one transaction of the writer takes
MAX_BATCH = 1024
#: a ``RecordSink`` holds a load's finished records at most this long (seconds)
HOLD_S = 2.0
_INSERT_RECORD = "INSERT OR REPLACE INTO requests(run_id, idx, warmup, record) VALUES (?,?,?,?)"


class _Rows(list[Sequence[Any]]):
    """The parameters of one statement run for many rows (``executemany``)."""


_Write = tuple[str, Sequence[Any]]


class _Writer(threading.Thread):
    """Commits queued statements in batches on its own connection."""

    def __init__(self, path: Path) -> None:
        super().__init__(name="crossover-store-writer", daemon=True)
        self.path = path
        self.queue: queue.SimpleQueue[_Write | threading.Event | None] = queue.SimpleQueue()
        self.error: BaseException | None = None
        #: transactions committed and statements in them (what the tests look at)
        self.batches = 0
        self.rows = 0
        self.largest_batch = 0

    def run(self) -> None:
        try:
            db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA busy_timeout=30000")
            db.execute("PRAGMA synchronous=NORMAL")
        except Exception as exc:  # nothing will be written: say so at the next write
            self.error = exc
            return
        try:
            self._loop(db)
        finally:
            db.close()

    def _loop(self, db: sqlite3.Connection) -> None:
        get, get_nowait = self.queue.get, self.queue.get_nowait
        while True:
            item = get()
            batch: list[_Write] = []
            waiters: list[threading.Event] = []
            stop = False
            # take what has queued up meanwhile; a waiter or the stop mark ends the batch
            while True:
                if item is None:
                    stop = True
                    break
                if isinstance(item, threading.Event):
                    waiters.append(item)
                    break
                batch.append(item)
                if len(batch) >= MAX_BATCH:
                    break
                try:
                    item = get_nowait()
                except queue.Empty:
                    break
            if batch and self.error is None:
                try:
                    db.execute("BEGIN IMMEDIATE")
                    try:
                        for sql, params in batch:
                            if isinstance(params, _Rows):
                                db.executemany(sql, params)
                            else:
                                db.execute(sql, params)
                    except BaseException:
                        db.execute("ROLLBACK")
                        raise
                    db.execute("COMMIT")
                    self.batches += 1
                    self.rows += sum(len(p) if isinstance(p, _Rows) else 1 for _, p in batch)
                    self.largest_batch = max(self.largest_batch, len(batch))
                except Exception as exc:  # kept, raised to the caller at the next write/flush
                    self.error = exc
            for w in waiters:
                w.set()
            if stop:
                return


#: what a database opened only to read must hold (it is never given its tables)
_READ_PROBES = (
    "SELECT run_id, key, created_at, status, context, summary FROM runs LIMIT 0",
    "SELECT run_id, idx, warmup, record FROM requests LIMIT 0",
    "SELECT run_id, source, t_s, data FROM samples LIMIT 0",
)


class Store:
    """A results database. ``read_only`` opens it only to read (``read_only_uri``): its
    bytes and its folder stay as they were (no conversion to WAL, no ``-wal``/``-shm``
    files, no tables created), a read-only file or folder reads, and a write raises.
    Opened read-write (to measure) it is switched to WAL and given its tables."""

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        try:
            if read_only:
                self._db = sqlite3.connect(
                    read_only_uri(path), uri=True, isolation_level=None, check_same_thread=False
                )
                self._db.execute("PRAGMA busy_timeout=30000")
                for probe in _READ_PROBES:
                    self._db.execute(probe)
            else:
                self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.execute("PRAGMA busy_timeout=30000")
                self._db.executescript(SCHEMA)
        except sqlite3.DatabaseError as exc:
            if read_only:
                raise cannot_read(path, exc) from None
            raise UsageError(f"{path}: not a crossover results database ({exc})") from None
        self._writer: _Writer | None = None
        self._lock = threading.Lock()

    @property
    def writer_stats(self) -> dict[str, int]:
        """Transactions the writer committed, rows in them, and the largest batch."""
        w = self._writer
        if w is None:
            return {"batches": 0, "rows": 0, "largest_batch": 0}
        return {"batches": w.batches, "rows": w.rows, "largest_batch": w.largest_batch}

    def _submit(self, sql: str, params: Sequence[Any]) -> None:
        if self.read_only:  # the writer's own connection would write the file
            raise sqlite3.OperationalError(f"{self.path} was opened only to read")
        w = self._writer
        if w is None:
            with self._lock:
                if self._writer is None:
                    self._writer = _Writer(self.path)
                    self._writer.start()
                w = self._writer
        if w.error is not None:
            self._raise(w)
        w.queue.put((sql, params))

    @staticmethod
    def _raise(w: _Writer) -> None:
        assert w.error is not None
        raise w.error

    def flush(self) -> None:
        """Wait until every write queued so far is committed (or failed: raised here)."""
        w = self._writer
        if w is None:
            return
        if w.is_alive():
            done = threading.Event()
            w.queue.put(done)
            while not done.wait(0.5):
                if not w.is_alive():
                    break
        if w.error is not None:
            self._raise(w)

    def close(self) -> None:
        w = self._writer
        try:
            self.flush()
        finally:
            if w is not None and w.is_alive():
                w.queue.put(None)
                w.join()
            self._writer = None
            self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def create_run(self, run_id: str, context: dict[str, Any], key: str | None = None) -> None:
        self._submit(
            "INSERT INTO runs(run_id, key, created_at, status, context) VALUES (?,?,?,?,?)",
            (run_id, key, time.time(), "running", orjson.dumps(context).decode()),
        )
        self.flush()

    def add_record(self, run_id: str, record: RequestRecord) -> None:
        """Queue one record (serialized here, committed by the writer thread)."""
        self._submit(_INSERT_RECORD, (run_id, record.index, int(record.warmup), record.to_json()))

    def add_records(self, run_id: str, records: Sequence[RequestRecord]) -> None:
        """Queue many records as one statement for the writer (one wake-up, one commit)."""
        if records:
            rows = _Rows((run_id, r.index, int(r.warmup), r.to_json()) for r in records)
            self._submit(_INSERT_RECORD, rows)

    def add_sample(self, run_id: str, source: str, t_s: float, data: dict[str, Any]) -> None:
        self._submit(
            "INSERT INTO samples(run_id, source, t_s, data) VALUES (?,?,?,?)",
            (run_id, source, t_s, orjson.dumps(data).decode()),
        )

    def finish_run(self, run_id: str, status: str, summary: dict[str, Any] | None) -> None:
        self._submit(
            "UPDATE runs SET status=?, summary=? WHERE run_id=?",
            (status, orjson.dumps(summary).decode() if summary is not None else None, run_id),
        )
        self.flush()

    def set_meta(self, key: str, value: Any) -> None:
        self._submit(
            "INSERT OR REPLACE INTO meta(k, v) VALUES (?,?)", (key, orjson.dumps(value).decode())
        )
        self.flush()

    def get_meta(self, key: str) -> Any:
        self.flush()
        row = self._db.execute("SELECT v FROM meta WHERE k=?", (key,)).fetchone()
        return orjson.loads(row[0]) if row else None

    def records(self, run_id: str, include_warmup: bool = True) -> list[RequestRecord]:
        self.flush()
        sql = "SELECT record FROM requests WHERE run_id=?"
        if not include_warmup:
            sql += " AND warmup=0"
        rows = self._db.execute(sql + " ORDER BY warmup DESC, idx", (run_id,)).fetchall()
        return read_records(self.path, run_id, rows)

    def samples(self, run_id: str) -> list[tuple[str, float, dict[str, Any]]]:
        self.flush()
        rows = self._db.execute(
            "SELECT source, t_s, data FROM samples WHERE run_id=? ORDER BY t_s", (run_id,)
        ).fetchall()
        return [(s, t, orjson.loads(d)) for s, t, d in rows]

    def _row(self, r: tuple[Any, ...]) -> RunRow:
        try:
            return RunRow(
                run_id=r[0],
                key=r[1],
                created_at=r[2],
                status=r[3],
                context=orjson.loads(r[4]),
                summary=orjson.loads(r[5]) if r[5] else None,
            )
        except (orjson.JSONDecodeError, TypeError) as exc:
            raise damaged(self.path, f"run {r[0]}", exc) from None

    def runs(self) -> list[RunRow]:
        self.flush()
        rows = self._db.execute(
            "SELECT run_id, key, created_at, status, context, summary FROM runs ORDER BY created_at"
        ).fetchall()
        return [self._row(r) for r in rows]

    def run(self, run_id: str) -> RunRow | None:
        self.flush()
        r = self._db.execute(
            "SELECT run_id, key, created_at, status, context, summary FROM runs WHERE run_id=?",
            (run_id,),
        ).fetchone()
        return self._row(r) if r else None

    def finished_by_key(self, key: str) -> RunRow | None:
        self.flush()
        r = self._db.execute(
            "SELECT run_id, key, created_at, status, context, summary FROM runs "
            "WHERE key=? AND status='done' ORDER BY created_at DESC LIMIT 1",
            (key,),
        ).fetchone()
        return self._row(r) if r else None


class RecordWriter(Protocol):
    """What a level writes while it runs: a ``Store``, or on a Ray node the relay that
    streams the same writes back to the driver's store (``crossover.sweep.actor``)."""

    def create_run(self, run_id: str, context: dict[str, Any], key: str | None = None) -> None:
        """A new run, status ``running``."""

    def add_record(self, run_id: str, record: RequestRecord) -> None:
        """One record (kept, or replaced when its index was written before)."""

    def add_records(self, run_id: str, records: Sequence[RequestRecord]) -> None:
        """Many records at once."""

    def add_sample(self, run_id: str, source: str, t_s: float, data: dict[str, Any]) -> None:
        """A scrape or another sample taken during the run."""

    def finish_run(self, run_id: str, status: str, summary: dict[str, Any] | None) -> None:
        """The run's final status and summary."""


class RecordSink:
    """A load's finished records on their way to ``store``, costing the event loop a
    list append while streams are in flight (see the module's docstring).

    ``add`` holds a record; the held records go to the writer, as one batch, at the first
    ``add`` ``hold_s`` or more after the oldest one held, and at ``flush`` (the end of the
    level, Ctrl-C, an engine's death: the caller's ``finally``).
    """

    def __init__(self, store: RecordWriter, run_id: str, hold_s: float = HOLD_S) -> None:
        self.store = store
        self.run_id = run_id
        self.hold_ns = int(hold_s * 1e9)
        self._held: list[RequestRecord] = []
        self._since_ns = 0

    def add(self, record: RequestRecord) -> None:
        now = time.perf_counter_ns()
        held = self._held
        if not held:
            self._since_ns = now
        held.append(record)
        if now - self._since_ns >= self.hold_ns:
            self.flush()

    def flush(self) -> None:
        """Hand every held record to the writer (it commits them in one transaction)."""
        if self._held:
            held, self._held = self._held, []
            self.store.add_records(self.run_id, held)

    @property
    def held(self) -> int:
        """Records held, not yet handed to the writer."""
        return len(self._held)
