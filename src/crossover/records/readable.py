"""A results database as the commands that only read it take it: a plain ``sweep.db``, its
``sweep.db.xz`` as a results folder commits it, or the folder holding either.

SQLite cannot open an ``.xz``: it is decompressed into a temporary folder that is removed
when the reading is done, never beside the ``.xz`` (a committed folder is left as it was,
and may be read-only). One command then reproduces a committed figure, where a reader had
to unpack the database by hand first.
"""

from __future__ import annotations

import lzma
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from crossover.errors import UsageError
from crossover.records.copies import copy_database
from crossover.records.database_file import require_database

#: a sweep folder's database, and the name a results folder commits it under
PLAIN, PACKED = "sweep.db", "sweep.db.xz"


def folder_database(folder: Path) -> Path | None:
    """``folder``'s ``sweep.db``, else its ``sweep.db.xz``; ``None`` where it has neither
    (a sweep folder may hold no database: its analysis ties nothing to one)."""
    for name in (PLAIN, PACKED):
        if (folder / name).is_file():
            return folder / name
    return None


def _chosen(path: Path) -> Path:
    """The database file ``path`` names: itself, or a folder's (one line where the folder
    has none)."""
    if not path.is_dir():
        return path
    found = folder_database(path)
    if found is None:
        raise UsageError(f"{path}: no {PLAIN} or {PACKED} in this folder")
    return found


def _unpacked(packed: Path, dest: Path) -> None:
    """``packed`` decompressed to ``dest``, checked to be SQLite; one line where it is not
    there, is no whole ``.xz``, or holds something else."""
    if not packed.is_file():
        raise UsageError(f"{packed}: no such database")
    try:
        copy_database(packed, dest)
    except (lzma.LZMAError, EOFError) as exc:
        raise UsageError(f"{packed}: cannot decompress it (a damaged or cut .xz: {exc})") from None
    except OSError as exc:
        raise UsageError(
            f"{packed}: cannot decompress it into {dest.parent} ({exc.strerror})"
        ) from None
    try:
        require_database(dest)
    except UsageError:
        raise UsageError(
            f"{packed}: not a crossover results database (no SQLite file inside)"
        ) from None


@contextmanager
def readable_database(path: Path) -> Iterator[Path]:
    """The database file to open for ``path`` while inside: ``path`` itself where it is a
    plain file (or not there: the caller's own check says so), a folder's ``sweep.db``,
    or an ``.xz`` (given, or a folder's ``sweep.db.xz``) decompressed into a temporary
    folder removed on leaving. A one-line error inside that names the copy names ``path``
    instead: the reader gave the ``.xz``, and the copy is gone by the time it is read."""
    found = _chosen(path)
    if found.suffix != ".xz":
        yield found
        return
    with tempfile.TemporaryDirectory(prefix="crossover-db-") as tmp:
        copy = Path(tmp) / found.with_suffix("").name
        _unpacked(found, copy)
        try:
            yield copy
        except UsageError as exc:
            if str(copy) not in str(exc):
                raise
            raise UsageError(str(exc).replace(str(copy), str(found))) from None
