"""``scripts/h200/waves.py`` and ``scripts/h200/sglang_gap.py`` only read a sweep's
results: they open its database read-only, as ``crossover summarize`` does, and leave the
folder as they found it (they opened it read-write, which turned a rollback-journal
database into WAL and failed in a read-only folder), printing the same table; a path of
no database is one line (waves.py made an empty database there)."""

from __future__ import annotations

import io
import os
import shutil
import sqlite3
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from tests.readonly import SRC
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts" / "h200"
SWEEP = ROOT / "docs" / "results" / "h200" / "sweep"


def _folder(tmp_path: Path) -> Path:
    """A committed sweep's database, in rollback-journal mode: a read-write open turns
    it into WAL."""
    folder = tmp_path / "sweep1"
    folder.mkdir()
    shutil.copyfile(SWEEP / "sweep.db", folder / "sweep.db")
    db = sqlite3.connect(folder / "sweep.db")
    db.execute("PRAGMA journal_mode=delete")
    db.close()
    return folder


def _state(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("script", ["waves", "sglang_gap"])
def test_the_scripts_read_and_leave_the_folder_as_it_was(tmp_path: Path, script: str) -> None:
    folder = _folder(tmp_path)
    before = _state(folder)
    sys.path.insert(0, str(SCRIPTS))  # sglang_gap imports waves
    try:
        module = load_script(SCRIPTS / f"{script}.py", f"h200_{script}_read_only", True)
    finally:
        sys.path.remove(str(SCRIPTS))
    printed = io.StringIO()
    with redirect_stdout(printed):
        module.main(folder / "sweep.db" if script == "waves" else folder, None, None)
    assert _state(folder) == before
    rows = printed.getvalue().splitlines()
    assert len(rows) > 2  # the header, its rule, and a row per valid run
    assert rows[2].startswith("| llamacpp-graphs | 1 | 0 |")


def test_a_path_of_no_database_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "sweep.db"
    got = subprocess.run(
        [sys.executable, str(SCRIPTS / "waves.py"), str(missing)],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(SRC)}, timeout=120, check=False,
    )  # fmt: skip
    assert (got.returncode, got.stderr) == (1, f"{missing}: no such database\n")
    assert not missing.exists()
