"""``Recorded`` (``decide --replay``) opens a sweep database only to read it: a finished
one (no ``-wal`` file beside it) gains no ``-wal`` or ``-shm`` file and keeps its bytes.
How a database still being written is read (with its ``-wal``) is
``records.database_file.read_only_uri``'s, tested in tests/records/test_store_read_only.py."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson

from crossover.decide.recorded import Recorded

SCHEMA = (
    "CREATE TABLE runs (run_id TEXT PRIMARY KEY, key TEXT, created_at REAL, status TEXT, "
    "context TEXT, summary TEXT)"
)


def _add(db: sqlite3.Connection, run_id: str, key: str, at: float) -> None:
    ctx = orjson.dumps({"context": {"target": key.split("|")[0]}}).decode()
    summary = orjson.dumps({"requests": 4}).decode()
    db.execute("INSERT INTO runs VALUES (?, ?, ?, 'done', ?, ?)", (run_id, key, at, ctx, summary))


def _database(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(SCHEMA)
    _add(db, "a", "fast|c=1|r=0", 1.0)
    db.commit()
    db.close()  # the last connection checkpoints and removes -wal and -shm


def test_a_finished_database_gains_no_files_and_keeps_its_bytes(tmp_path: Path) -> None:
    path = tmp_path / "sweep.db"
    _database(path)
    before = path.read_bytes()
    rec = Recorded(path)
    try:
        assert list(rec.runs) == [("fast", 1, 0)]
    finally:
        rec.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweep.db"]
    assert path.read_bytes() == before
