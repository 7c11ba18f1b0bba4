"""A results database's file before a ``Store`` opens it: the output folder checked
writable, the file checked to be SQLite (or absent), how to open it only to read and the
one line where that fails, and the one line for a row that cannot be read back. Each
fails with one line (a ``UsageError``), before any work, never a traceback.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from crossover.errors import UsageError, first_line


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


#: the first bytes of every SQLite database file
SQLITE_MAGIC = b"SQLite format 3\x00"


def _head(path: Path) -> bytes:
    """The file's first bytes, as many as SQLite's header; one line if it cannot be read."""
    try:
        with path.open("rb") as fh:
            return fh.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it ({exc.strerror})") from None


def require_database(path: Path) -> None:
    """Fail with one line unless ``path`` is an SQLite file: a ``Store`` opened on an
    empty or any other file would write its tables into it (``summarize`` turned an
    empty file it was only to read into a results database)."""
    if not path.is_file():
        raise UsageError(f"{path}: no such database")
    head = _head(path)
    if head != SQLITE_MAGIC:
        what = "an empty file" if not head else "not an SQLite file"
        raise UsageError(f"{path}: not a crossover results database ({what})")


def check_database_file(path: Path) -> None:
    """Fail with one line before any work (``run`` contacted the server first) when
    ``path`` is there but cannot hold results: a folder, or a file that is not SQLite,
    which is left as it is; or its folder is a file; or the folder holds the database
    packed (``sweep.db.xz``, as results are committed) and not unpacked, where a new one
    would start over beside it. A missing file is created, and an empty one is an empty
    database to SQLite: both are fine."""
    if path.parent.is_file():
        raise UsageError(f"{path.parent}: a file, not a folder for results")
    if path.is_dir():
        raise UsageError(f"{path}: a folder, not a results database file")
    if not path.exists():
        packed = path.with_name(path.name + ".xz")
        if packed.is_file():  # a committed folder: a new database beside it would start over
            raise UsageError(
                f"{path.parent} holds its database packed ({packed.name}) and no {path.name}: "
                f"unpack it to resume (xz -dk {packed}), or write the results elsewhere"
            )
        return
    head = _head(path)
    if head and head != SQLITE_MAGIC:
        raise UsageError(f"{path}: not a crossover results database (not an SQLite file)")


def read_only_uri(path: Path) -> str:
    """How to open ``path`` only to read it (an SQLite URI). A WAL database opened
    ``mode=ro`` still leaves empty ``-wal`` and ``-shm`` files beside it (a committed
    database's folder gains two), so one without a ``-wal`` file (no writer has it open: a
    finished sweep's) is opened ``immutable``, which reads the file alone; one with it (a
    sweep still writing, or one that stopped before its last checkpoint) ``mode=ro``, which
    reads what the ``-wal`` holds too. Neither writes the file or needs its folder writable."""
    from urllib.parse import quote

    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    return uri if Path(f"{path}-wal").exists() else uri + "&immutable=1"


def cannot_read(path: Path, exc: sqlite3.DatabaseError) -> UsageError:
    """The one line for a database that did not open only to read (``read_only_uri``):
    not a results database, in SQLite's words; or, where a ``-wal`` is beside it without
    its ``-shm`` in a folder that cannot be written, what is wrong and what to do: SQLite
    reads the writes a ``-wal`` holds (a sweep stopped before its last checkpoint, or
    copied while it ran) only by creating the ``-shm`` beside it, and says just "unable to
    open database file". The ``-wal`` is left where it is: it holds results."""
    wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
    if wal.exists() and not shm.exists() and not os.access(path.parent, os.W_OK | os.X_OK):
        return UsageError(
            f"{path}: its folder is read-only and {wal.name} holds writes not yet in it, which "
            f"SQLite cannot read without creating {shm.name}: copy the folder, {wal.name} "
            "included, somewhere writable and read it there"
        )
    return UsageError(f"{path}: not a crossover results database ({exc})")


def damaged(path: Path, what: str, exc: Exception) -> UsageError:
    """One line for a row of a results database that cannot be read back (edited or
    damaged by hand: SQLite's own checks pass); a traceback otherwise."""
    return UsageError(f"{path}: {what} is damaged and cannot be read ({first_line(exc)})")
