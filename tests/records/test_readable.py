"""``readable_database``: a plain database is read where it lies; a ``sweep.db.xz`` (given,
or a results folder's) through a decompressed copy in a temporary folder that is gone
afterwards, nothing written beside the ``.xz``; a damaged ``.xz``, or one holding no
SQLite file, is one line naming it."""

from __future__ import annotations

import lzma
from pathlib import Path

import pytest

from crossover.errors import UsageError
from crossover.records.readable import folder_database, readable_database

DB = b"SQLite format 3\x00" + bytes(range(256)) * 64


def _folder(tmp_path: Path, *, plain: bool, packed: bool) -> Path:
    folder = tmp_path / "results"
    folder.mkdir(parents=True)
    if plain:
        (folder / "sweep.db").write_bytes(DB)
    if packed:
        (folder / "sweep.db.xz").write_bytes(lzma.compress(DB))
    return folder


def _state(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def test_a_plain_database_is_read_where_it_lies(tmp_path: Path, temp_root: Path) -> None:
    folder = _folder(tmp_path, plain=True, packed=True)
    with readable_database(folder / "sweep.db") as db:
        assert db == folder / "sweep.db"
    with readable_database(folder) as db:  # the folder's plain one before its .xz
        assert db == folder / "sweep.db"
    assert list(temp_root.iterdir()) == []


def test_a_missing_plain_file_is_left_to_the_caller(tmp_path: Path) -> None:
    with readable_database(tmp_path / "none.db") as db:
        assert db == tmp_path / "none.db"


@pytest.mark.parametrize("given", ["file", "folder"])
def test_an_xz_is_read_through_a_copy_removed_afterwards(
    tmp_path: Path, temp_root: Path, given: str
) -> None:
    folder = _folder(tmp_path, plain=False, packed=True)
    before = _state(folder)
    with readable_database(folder / "sweep.db.xz" if given == "file" else folder) as db:
        assert db.name == "sweep.db"
        assert db.parent.parent == temp_root
        assert db.read_bytes() == DB
    assert list(temp_root.iterdir()) == []
    assert _state(folder) == before


def test_the_copy_is_removed_when_the_reading_fails(tmp_path: Path, temp_root: Path) -> None:
    folder = _folder(tmp_path, plain=False, packed=True)
    seen: list[Path] = []

    def read() -> None:
        with readable_database(folder) as db:
            seen.append(db)
            raise RuntimeError("the reader failed")

    with pytest.raises(RuntimeError):
        read()
    assert seen[0].parent.parent == temp_root
    assert list(temp_root.iterdir()) == []


def test_an_error_naming_the_copy_names_the_xz(tmp_path: Path, temp_root: Path) -> None:
    """The copy is gone by the time the line is read: it names the file the reader gave."""
    packed = _folder(tmp_path, plain=False, packed=True) / "sweep.db.xz"
    with pytest.raises(UsageError) as err, readable_database(packed) as db:
        raise UsageError(f"{db}: no run 'x'")
    assert str(err.value) == f"{packed}: no run 'x'"


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"not xz at all", "cannot decompress it"),
        (lzma.compress(DB)[:-40], "cannot decompress it"),  # cut short
        (lzma.compress(b"some other file"), "not a crossover results database"),
        (lzma.compress(b""), "not a crossover results database"),
    ],
)
def test_a_damaged_or_foreign_xz_is_one_line(
    tmp_path: Path, temp_root: Path, content: bytes, why: str
) -> None:
    packed = tmp_path / "sweep.db.xz"
    packed.write_bytes(content)
    with pytest.raises(UsageError) as err, readable_database(packed):
        pytest.fail("entered a database that is none")
    line = str(err.value)
    assert line.startswith(f"{packed}: {why}")
    assert "\n" not in line
    assert list(temp_root.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweep.db.xz", "temp"]


def test_a_missing_xz_or_an_empty_folder_is_one_line(tmp_path: Path) -> None:
    with (
        pytest.raises(UsageError, match="no such database"),
        readable_database(tmp_path / "sweep.db.xz"),
    ):
        pass
    with (
        pytest.raises(UsageError, match=r"no sweep\.db or sweep\.db\.xz"),
        readable_database(tmp_path),
    ):
        pass


def test_folder_database_prefers_the_plain_file(tmp_path: Path) -> None:
    both = _folder(tmp_path / "a", plain=True, packed=True)
    assert folder_database(both) == both / "sweep.db"
    packed = _folder(tmp_path / "b", plain=False, packed=True)
    assert folder_database(packed) == packed / "sweep.db.xz"
    assert folder_database(_folder(tmp_path / "c", plain=False, packed=False)) is None
