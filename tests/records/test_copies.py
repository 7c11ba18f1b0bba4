"""``copy_database``: a results folder's ``sweep.db`` copied, or its ``sweep.db.xz``
decompressed, to a file elsewhere; the source left as it was; a folder with neither is one
clear error."""

from __future__ import annotations

import lzma
from pathlib import Path

import pytest

from crossover.errors import UsageError
from crossover.records.copies import copy_database
from crossover.records.store import Store

PLAIN = b"SQLite format 3\x00 plain"
PACKED = b"SQLite format 3\x00 packed"


def _folder(tmp_path: Path, *, plain: bool, packed: bool) -> Path:
    folder = tmp_path / "results"
    folder.mkdir()
    if plain:
        (folder / "sweep.db").write_bytes(PLAIN)
    if packed:
        (folder / "sweep.db.xz").write_bytes(lzma.compress(PACKED))
    return folder


def test_a_plain_database_is_copied(tmp_path: Path) -> None:
    folder = _folder(tmp_path, plain=True, packed=False)
    dest = tmp_path / "tmp" / "copy.db"  # its folder is made
    assert copy_database(folder, dest) == dest
    assert dest.read_bytes() == PLAIN
    assert sorted(p.name for p in folder.iterdir()) == ["sweep.db"]
    assert (folder / "sweep.db").read_bytes() == PLAIN


def test_an_xz_database_is_decompressed(tmp_path: Path) -> None:
    folder = _folder(tmp_path, plain=False, packed=True)
    dest = copy_database(folder, tmp_path / "sweep.db")
    assert dest.read_bytes() == PACKED
    assert sorted(p.name for p in folder.iterdir()) == ["sweep.db.xz"]


def test_the_plain_database_wins_over_the_xz(tmp_path: Path) -> None:
    folder = _folder(tmp_path, plain=True, packed=True)
    assert copy_database(folder, tmp_path / "sweep.db").read_bytes() == PLAIN


@pytest.mark.parametrize("name", ["other.db", "other.db.xz"])
def test_a_database_file_is_copied_or_decompressed(tmp_path: Path, name: str) -> None:
    source = tmp_path / name
    source.write_bytes(lzma.compress(PACKED) if name.endswith(".xz") else PLAIN)
    dest = copy_database(source, tmp_path / "out" / "sweep.db")
    assert dest.read_bytes() == (PACKED if name.endswith(".xz") else PLAIN)


def test_a_real_store_reads_the_copy(tmp_path: Path) -> None:
    folder = tmp_path / "results"
    folder.mkdir()
    with Store(folder / "sweep.db") as store:
        store.create_run("r1", {"context": {}}, key="t|c=1|r=0")
    db = folder / "sweep.db"
    (folder / "sweep.db.xz").write_bytes(lzma.compress(db.read_bytes()))
    for left in folder.glob("sweep.db*"):  # the database and any WAL beside it
        if left.name != "sweep.db.xz":
            left.unlink()
    with Store(copy_database(folder, tmp_path / "copy" / "sweep.db")) as store:
        assert [row.key for row in store.runs()] == ["t|c=1|r=0"]


def test_a_folder_with_neither_file_is_one_clear_error(tmp_path: Path) -> None:
    folder = _folder(tmp_path, plain=False, packed=False)
    (folder / "sweep.json").write_text("{}")
    with pytest.raises(UsageError, match=r"^no sweep\.db or sweep\.db\.xz in .*results$"):
        copy_database(folder, tmp_path / "sweep.db")
    with pytest.raises(UsageError, match="no such results folder or database"):
        copy_database(tmp_path / "absent", tmp_path / "sweep.db")
    assert not (tmp_path / "sweep.db").exists()
