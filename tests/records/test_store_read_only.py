"""``Store(path, read_only=True)`` opens a results database only to read it: its bytes, its
mtime and its folder stay as they were (a rollback-journal database is not turned into
WAL, no ``-wal``/``-shm`` file is left, no table is created), a write raises, a database a
sweep is still writing is read with what its ``-wal`` holds, and an SQLite file that is not
a results database is one line and left as it was."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from crossover.errors import UsageError
from crossover.records.database_file import read_only_uri
from crossover.records.model import RequestRecord
from crossover.records.store import Store


def _database(path: Path, journal: str = "wal") -> None:
    with Store(path) as store:
        store.create_run("r1", {"context": {}}, key="A|c=1|r=0")
        store.add_records(
            "r1",
            [RequestRecord(index=i, expected_output_tokens=1, t_send_ns=i + 1) for i in (0, 1)],
        )
        store.add_sample("r1", "client_loop", 1.0, {"lag_ms": 0.1})
        store.finish_run("r1", "done", {"verdict": "valid"})
    if journal != "wal":
        db = sqlite3.connect(path)
        db.execute(f"PRAGMA journal_mode={journal}")
        db.close()


def _state(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_reading_leaves_the_file_and_its_folder_as_they_were(tmp_path: Path, journal: str) -> None:
    path = tmp_path / "sweep.db"
    _database(path, journal)
    before = _state(tmp_path)
    with Store(path, read_only=True) as store:
        assert [r.run_id for r in store.runs()] == ["r1"]
        assert store.finished_by_key("A|c=1|r=0") is not None
        assert [r.index for r in store.records("r1")] == [0, 1]
        assert [s for s, _, _ in store.samples("r1")] == ["client_loop"]
        assert store.get_meta("anything") is None
    assert _state(tmp_path) == before


def test_a_write_raises_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "sweep.db"
    _database(path, "delete")
    before = _state(tmp_path)
    with Store(path, read_only=True) as store:
        with pytest.raises(sqlite3.OperationalError, match="only to read"):
            store.finish_run("r1", "failed", None)
        assert store.run("r1") is not None
    assert _state(tmp_path) == before


def test_a_database_still_written_is_read_with_its_wal(tmp_path: Path) -> None:
    path = tmp_path / "odd ?#% name.db"
    _database(path)
    writer = sqlite3.connect(path)
    try:
        writer.execute("PRAGMA wal_autocheckpoint=0")  # the new run stays in the -wal
        writer.execute("INSERT INTO runs VALUES ('r2', NULL, 2.0, 'done', '{}', NULL)")
        writer.commit()
        assert Path(f"{path}-wal").stat().st_size > 0
        assert "immutable" not in read_only_uri(path)
        with Store(path, read_only=True) as store:
            assert sorted(r.run_id for r in store.runs()) == ["r1", "r2"]
    finally:
        writer.close()


def test_an_sqlite_file_without_the_tables_is_one_line_and_left_as_it_was(
    tmp_path: Path,
) -> None:
    """Opened read-write, it was given the tables of a results database."""
    path = tmp_path / "other.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE t (a)")
    db.commit()
    db.close()
    before = _state(tmp_path)
    with pytest.raises(UsageError, match=r"not a crossover results database \(no such table: runs"):
        Store(path, read_only=True)
    assert _state(tmp_path) == before
