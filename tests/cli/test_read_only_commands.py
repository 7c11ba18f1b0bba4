"""Commands that only read results (``summarize``, ``decide --replay``, ``compare``,
``report --out`` elsewhere, ``--resummarize`` or not) leave a results folder as they found
it: the database's bytes and mtime the same, no ``-wal`` or ``-shm`` beside it, a database
in rollback-journal mode not turned into WAL, no new file; and they read a folder they
cannot write (a committed sweep on a read-only mount), printing what they print elsewhere.
A folder holding its database only as ``sweep.db.xz`` (as results folders commit it) is
read the same, through a copy decompressed elsewhere and removed afterwards. ``summarize`` opened the
database read-write: it rewrote a non-WAL file as WAL, and failed in a read-only folder
("attempt to write a readonly database"); ``report --out`` wrote its PNGs into the
folder's report/ all the same."""

from __future__ import annotations

import lzma
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from crossover.cli.app import main
from tests.readonly import crossover_cli, read_only, writable_cli

SWEEP = Path(__file__).resolve().parents[2] / "docs" / "results" / "h200" / "sweep"


def _report(d: Path, o: Path) -> list[str]:
    return ["report", str(d), "--out", str(o / "r.html")]


def _db(d: Path) -> Path:
    """The folder's database as a reader names it: sweep.db, else the sweep.db.xz."""
    plain = d / "sweep.db"
    return plain if plain.exists() else d / "sweep.db.xz"


#: each reading command, given the sweep folder and a folder for its own outputs
COMMANDS: dict[str, Callable[[Path, Path], list[str]]] = {
    "summarize": lambda d, o: ["summarize", str(_db(d)), "--json", str(o / "s.json")],
    "decide": lambda d, o: ["decide", "--replay", str(_db(d)), "--json", str(o / "d.json")],
    "compare": lambda d, o: ["compare", str(d), str(d)],
    "report": _report,
    "report --resummarize": lambda d, o: [*_report(d, o), "--resummarize"],
}


def _sweep(tmp_path: Path, journal: str) -> Path:
    """A copy of a committed sweep folder; its database in ``journal`` mode (``wal``: as a
    sweep leaves it; ``xz``: as a sweep leaves it, then kept only as sweep.db.xz, as a
    results folder commits it)."""
    folder = tmp_path / "sweep1"
    folder.mkdir()
    for name in ("sweep.db", "sweep.json"):
        shutil.copyfile(SWEEP / name, folder / name)
    db = folder / "sweep.db"
    if journal == "xz":
        (folder / "sweep.db.xz").write_bytes(lzma.compress(db.read_bytes()))
        db.unlink()
    elif journal != "wal":
        conn = sqlite3.connect(db)
        conn.execute(f"PRAGMA journal_mode={journal}")
        conn.close()
    return folder


def _state(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("journal", ["wal", "delete", "xz"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_reading_leaves_the_folder_as_it_was(
    tmp_path: Path, command: str, journal: str, temp_root: Path
) -> None:
    """No temporary file is left behind either (an ``.xz``'s decompressed copy)."""
    folder = _sweep(tmp_path, journal)
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    before = _state(folder)
    assert main(COMMANDS[command](folder, outputs)) == 0
    assert _state(folder) == before
    assert list(temp_root.iterdir()) == []


@pytest.mark.parametrize("journal", ["wal", "xz"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_read_only_folder_reads_the_same(tmp_path: Path, command: str, journal: str) -> None:
    folder = _sweep(tmp_path, journal)
    names = sorted(p.name for p in folder.iterdir())
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    args = COMMANDS[command](folder, outputs)
    writable = writable_cli(args)
    assert writable.returncode == 0, writable.stderr
    with read_only(folder):
        got = crossover_cli(args, unwritable=folder)
        assert sorted(p.name for p in folder.iterdir()) == names
    assert got.returncode == 0, got.stderr
    assert (got.stdout, got.stderr) == (writable.stdout, writable.stderr)


def _unfolded(tmp_path: Path) -> Path:
    """A sweep folder whose ``sweep.db-wal`` holds a write not yet in ``sweep.db`` and has
    no ``sweep.db-shm`` beside it: copied while a writer had it open (or left by one
    killed), without the ``-shm``."""
    source = _sweep(tmp_path / "source", "wal")
    writer = sqlite3.connect(source / "sweep.db")
    try:
        writer.execute("PRAGMA wal_autocheckpoint=0")  # the write stays in the -wal
        writer.execute("INSERT INTO meta VALUES ('note', '\"not yet folded in\"')")
        writer.commit()
        folder = tmp_path / "copy"
        folder.mkdir()
        for name in ("sweep.db", "sweep.db-wal", "sweep.json"):
            shutil.copyfile(source / name, folder / name)
    finally:
        writer.close()
    return folder


@pytest.mark.parametrize("command", ["summarize", "decide"])
def test_a_wal_without_its_shm_in_a_read_only_folder_says_what_to_do(
    tmp_path: Path, command: str
) -> None:
    """SQLite reads a ``-wal`` only by creating the ``-shm`` beside it: in a read-only
    folder it said "unable to open database file", shown as "not a crossover results
    database". One line says what is wrong and what to do; the ``-wal`` stays, and the
    advice works."""
    (tmp_path / "source").mkdir()
    folder = _unfolded(tmp_path)
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    before = _state(folder)
    args = COMMANDS[command](folder, outputs)
    with read_only(folder):
        got = crossover_cli(args, unwritable=folder)
        assert _state(folder) == before
    assert got.returncode == 2
    line = " ".join(got.stderr.split())  # rich wraps long lines
    db = folder / "sweep.db"
    assert line == (
        f"error: {db}: its folder is read-only and sweep.db-wal holds writes not yet in it, "
        "which SQLite cannot read without creating sweep.db-shm: copy the folder, "
        "sweep.db-wal included, somewhere writable and read it there"
    )
    copy = tmp_path / "writable"
    shutil.copytree(folder, copy)
    assert main(COMMANDS[command](copy, outputs)) == 0
