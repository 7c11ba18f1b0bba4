"""The SQLite store: one row per request, written the moment it completes.

WAL mode with ``synchronous=NORMAL``: each record is committed on its own, so a
crash of the client loses at most the requests in flight, at ~tens of
microseconds per commit. Runs carry a ``key`` so an interrupted sweep can find
what it already finished and resume.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from crossover.errors import UsageError
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


def check_writable(folder: Path) -> None:
    """Fail before any work if results could not be written there."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create output folder {folder}: {exc.strerror}") from None
    probe = folder / f".crossover-write-test-{os.getpid()}"
    try:
        with probe.open("wb") as fh:
            fh.write(b"\0" * 65536)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        raise UsageError(f"output folder {folder} is not writable: {exc.strerror}") from None
    finally:
        probe.unlink(missing_ok=True)
    st = os.statvfs(folder)
    if st.f_bavail * st.f_frsize < 16 * 1024 * 1024:
        raise UsageError(f"output folder {folder} has less than 16 MiB free")


class Store:
    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise UsageError(f"{path}: not a crossover results database ({exc})") from None

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def create_run(self, run_id: str, context: dict[str, Any], key: str | None = None) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO runs(run_id, key, created_at, status, context) VALUES (?,?,?,?,?)",
                (run_id, key, time.time(), "running", orjson.dumps(context).decode()),
            )

    def add_record(self, run_id: str, record: RequestRecord) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO requests(run_id, idx, warmup, record) VALUES (?,?,?,?)",
            (run_id, record.index, int(record.warmup), orjson.dumps(record.model_dump())),
        )

    def add_sample(self, run_id: str, source: str, t_s: float, data: dict[str, Any]) -> None:
        self._db.execute(
            "INSERT INTO samples(run_id, source, t_s, data) VALUES (?,?,?,?)",
            (run_id, source, t_s, orjson.dumps(data).decode()),
        )

    def finish_run(self, run_id: str, status: str, summary: dict[str, Any] | None) -> None:
        self._db.execute(
            "UPDATE runs SET status=?, summary=? WHERE run_id=?",
            (status, orjson.dumps(summary).decode() if summary is not None else None, run_id),
        )

    def set_meta(self, key: str, value: Any) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO meta(k, v) VALUES (?,?)", (key, orjson.dumps(value).decode())
        )

    def get_meta(self, key: str) -> Any:
        row = self._db.execute("SELECT v FROM meta WHERE k=?", (key,)).fetchone()
        return orjson.loads(row[0]) if row else None

    def records(self, run_id: str, include_warmup: bool = True) -> list[RequestRecord]:
        sql = "SELECT record FROM requests WHERE run_id=?"
        if not include_warmup:
            sql += " AND warmup=0"
        rows = self._db.execute(sql + " ORDER BY warmup DESC, idx", (run_id,)).fetchall()
        return [RequestRecord.model_validate(orjson.loads(r[0])) for r in rows]

    def samples(self, run_id: str) -> list[tuple[str, float, dict[str, Any]]]:
        rows = self._db.execute(
            "SELECT source, t_s, data FROM samples WHERE run_id=? ORDER BY t_s", (run_id,)
        ).fetchall()
        return [(s, t, orjson.loads(d)) for s, t, d in rows]

    def _row(self, r: tuple[Any, ...]) -> RunRow:
        return RunRow(
            run_id=r[0],
            key=r[1],
            created_at=r[2],
            status=r[3],
            context=orjson.loads(r[4]),
            summary=orjson.loads(r[5]) if r[5] else None,
        )

    def runs(self) -> list[RunRow]:
        rows = self._db.execute(
            "SELECT run_id, key, created_at, status, context, summary FROM runs ORDER BY created_at"
        ).fetchall()
        return [self._row(r) for r in rows]

    def run(self, run_id: str) -> RunRow | None:
        r = self._db.execute(
            "SELECT run_id, key, created_at, status, context, summary FROM runs WHERE run_id=?",
            (run_id,),
        ).fetchone()
        return self._row(r) if r else None

    def finished_by_key(self, key: str) -> RunRow | None:
        r = self._db.execute(
            "SELECT run_id, key, created_at, status, context, summary FROM runs "
            "WHERE key=? AND status='done' ORDER BY created_at DESC LIMIT 1",
            (key,),
        ).fetchone()
        return self._row(r) if r else None
