"""A results database copied aside before it is read.

A committed ``sweep.db`` (or its ``sweep.db.xz``) is never opened where it lies: SQLite
may write beside a database it opens (a journal, a WAL), and an ``.xz`` must be
decompressed first anyway. The tests, ``scripts/h200`` and ``bench`` read such copies.
"""

from __future__ import annotations

import lzma
import shutil
from pathlib import Path

from crossover.errors import UsageError


def copy_database(source: Path, dest: Path) -> Path:
    """Copy a results database to ``dest`` (a file; its folder is made where missing),
    and return ``dest``.

    ``source`` is a results folder, whose ``sweep.db`` is copied or, where it has none,
    whose ``sweep.db.xz`` is decompressed; or a database file itself, decompressed when
    its name ends in ``.xz``. A folder with neither file, or a ``source`` that is not
    there, is a ``UsageError`` naming it. ``source`` is only read.
    """
    if source.is_dir():
        plain, packed = source / "sweep.db", source / "sweep.db.xz"
        if plain.is_file():
            found = plain
        elif packed.is_file():
            found = packed
        else:
            raise UsageError(f"no sweep.db or sweep.db.xz in {source}")
    elif source.is_file():
        found = source
    else:
        raise UsageError(f"{source}: no such results folder or database")
    dest.parent.mkdir(parents=True, exist_ok=True)
    if found.suffix == ".xz":
        with lzma.open(found) as src, dest.open("wb") as out:
            shutil.copyfileobj(src, out)
    else:
        shutil.copyfile(found, dest)
    return dest
