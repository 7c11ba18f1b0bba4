"""``check_database_file``: what a run may write its records into, checked before any
work; a file that is not SQLite is refused and left as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossover.errors import UsageError
from crossover.records.database_file import check_database_file
from crossover.records.store import Store


def test_a_missing_an_empty_and_a_results_database_are_fine(tmp_path: Path) -> None:
    check_database_file(tmp_path / "new.db")
    assert not (tmp_path / "new.db").exists()
    empty = tmp_path / "empty.db"
    empty.touch()
    check_database_file(empty)
    with Store(tmp_path / "old.db"):
        pass
    check_database_file(tmp_path / "old.db")


def test_another_file_or_a_folder_is_one_line(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"SQLite format 2\n")
    with pytest.raises(UsageError, match="not a crossover results database"):
        check_database_file(notes)
    assert notes.read_bytes() == b"SQLite format 2\n"
    with pytest.raises(UsageError, match="a folder"):
        check_database_file(tmp_path)
