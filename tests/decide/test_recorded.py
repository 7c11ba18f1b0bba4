"""``Recorded`` (``decide --replay``) opens a sweep database only to read it: a finished
one (no ``-wal`` file beside it) gains no ``-wal`` or ``-shm`` file and keeps its bytes.
How a database still being written is read (with its ``-wal``) is
``records.database_file.read_only_uri``'s, tested in tests/records/test_store_read_only.py."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from crossover.decide import recorded
from crossover.decide.recorded import Recorded
from crossover.errors import UsageError

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


def _no_runs_table(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE other (x)")
    db.commit()
    db.close()


def _no_finished_level(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute(SCHEMA)
    db.commit()
    db.close()


def _damaged_run(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute(SCHEMA)
    db.execute("INSERT INTO runs VALUES ('a', 'fast|c=1|r=0', 1.0, 'done', 'not json', NULL)")
    db.commit()
    db.close()


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda p: p.write_bytes(b"not a database, " * 64), "sweep.db"),
        (_no_runs_table, "sweep.db"),
        (_no_finished_level, "no finished concurrency level"),
        (_damaged_run, "run a"),
    ],
    ids=["not-sqlite", "no-runs-table", "no-finished-level", "damaged-run"],
)
def test_a_database_it_refuses_is_left_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make: Callable[[Path], object], said: str
) -> None:
    """A database ``Recorded`` cannot read (not SQLite, no runs table, no finished level,
    a run's JSON damaged) is refused with one line, and the connection it opened is
    closed: nothing holds the file open after the refusal."""
    path = tmp_path / "sweep.db"
    make(path)
    opened: list[sqlite3.Connection] = []
    connect = sqlite3.connect

    def spy(*args: Any, **kw: Any) -> sqlite3.Connection:
        db = connect(*args, **kw)
        opened.append(db)
        return db

    monkeypatch.setattr(recorded.sqlite3, "connect", spy)
    with pytest.raises(UsageError, match=said):
        Recorded(path)
    assert len(opened) == 1
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        opened[0].execute("SELECT 1")


def test_a_database_is_replayed_along_one_axis(tmp_path: Path) -> None:
    """Rate runs are read where the database holds no concurrency level; one holding both
    (two sweeps in one folder) replays its concurrency levels, as before rates were read."""
    rates = tmp_path / "rates.db"
    db = sqlite3.connect(rates)
    db.execute(SCHEMA)
    _add(db, "a", "fast|rate=0.5|r=0", 1.0)
    _add(db, "b", "slow|rate=2|r=1", 2.0)
    db.commit()
    db.close()
    rec = Recorded(rates)
    try:
        assert rec.axis == "rate"
        assert sorted(rec.runs) == [("fast", 0.5, 0), ("slow", 2.0, 1)]
        assert rec.levels() == [0.5, 2.0]
    finally:
        rec.close()
    both = tmp_path / "both.db"
    db = sqlite3.connect(both)
    db.execute(SCHEMA)
    _add(db, "a", "fast|rate=0.5|r=0", 1.0)
    _add(db, "b", "fast|c=4|r=0", 2.0)
    db.commit()
    db.close()
    rec = Recorded(both)
    try:
        assert rec.axis == "concurrency"
        assert list(rec.runs) == [("fast", 4, 0)]
        assert isinstance(rec.levels()[0], int)  # a concurrency stays an int: "4", not "4.0"
    finally:
        rec.close()
